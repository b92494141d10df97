// FullyShardedStrategy: ZeRO-3 / FSDP over one shard group, and HSDP when a replica group is
// given. Each unit (zero3_units.hpp) is gathered by a forward pre-hook, released by the forward
// hook, gathered again by an autograd node wrapped around its output just before its own
// backward, and released once all of its gradients are ready and reduce-scattered into the
// rank's gradient shard. The optimizer steps only the shards; nothing is gathered after step().
// Not here: the subgroup construction and the factories (zero3_factories.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bucket_engine.hpp"
#include "genesis/parallel/strategy.hpp"
#include "zero3_units.hpp"

namespace genesis::parallel::detail {

// One step of the last training forward and backward, in the order it happened, for tests and
// traces: with prefetch the gather of unit i+1 is issued between forward_begin and forward_end
// of unit i (and in backward the gather of unit i-1 right after backward_begin of unit i).
struct Zero3Event {
  // early_release: the root's gathered weights freed once its readers' backward is done.
  enum class Kind { gather, forward_begin, forward_end, backward_begin, reduce_scatter, early_release };
  Kind kind;
  std::string unit;       // unit name; "" is the root unit
  bool prefetch = false;  // gather: issued ahead of the unit's use
};

// Its units are the bucket engine's buckets (bucket_engine.hpp), launched in reverse forward
// order with the persistent unit and the root last.
class FullyShardedStrategy : public Strategy, BucketPolicy {
 public:
  // shard_group: the ranks a unit is sharded over; replica_group: null for ZeRO-3, else the
  // ranks holding the same shard in the other shard groups (HSDP), whose gradient shards are
  // averaged. `group` is the whole job, used to check and broadcast the initial parameters.
  // built: the units sharded while the model was built (deferred init), adopted by make_units.
  FullyShardedStrategy(std::string name, std::shared_ptr<nn::Module> model,
                       const OptimizerFactory& make_optimizer,
                       std::shared_ptr<dist::ProcessGroup> group,
                       std::shared_ptr<dist::ProcessGroup> shard_group,
                       std::shared_ptr<dist::ProcessGroup> replica_group,
                       const ZeroOptions& options,
                       std::vector<std::unique_ptr<ShardedUnit>> built = {});
  ~FullyShardedStrategy() override;

  std::string name() const override { return name_; }
  // The model; its parameters hold values only while their unit is gathered, e.g. after
  // gather_full_parameters() until the next forward() or step(). Run it through forward(),
  // on every rank, except in that window.
  nn::Module& module() override { return *model_; }
  Tensor forward(const Tensor& input, bool sync_gradients) override;
  void scale_gradients(double factor) override;
  double clip_grad_norm(double max_norm) override;
  double grad_norm() override;
  void step(double lr) override;
  void zero_grad() override;
  optim::Optimizer& optimizer() override { return *optimizer_; }
  // Parameter bytes are the shards only: the gathered unit (two with prefetch) is transient and
  // not counted; with offload_optimizer the optimizer state (and its parameter copy) is on the host.
  MemoryReport memory() const override;

  // Collective over the shard group (every rank must call it): all-gathers every unit, so
  // module()'s parameters hold the full current values (export, a full state dict) until the
  // next forward() or step() releases them. Meanwhile the units' hooks do nothing under no-grad,
  // so each rank may run module() on its own batches (evaluation) without collectives.
  void gather_full_parameters() override;
  // Each rank of the first shard group saves its shards (HSDP's other replicas save nothing);
  // loading sets this rank's shards, releasing any gathered unit first.
  std::vector<StatePiece> state_pieces() override;
  void load_state(const StateSource& source) override;
  const std::vector<Zero3Event>& last_trace() const { return trace_; }
  std::vector<std::string> unit_names() const;

  void take_gradient(std::size_t slot, bool armed) override;
  void missing_gradients(const std::vector<std::size_t>& slots) override;
  void bucket_complete(std::size_t bucket) override;
  std::shared_ptr<dist::Work> launch(std::size_t bucket, bool waited_at_once) override;
  void bucket_reduced(std::size_t bucket) override;
  void finish() override;
  void settle() noexcept override;

 private:
  struct ParamSlot {
    std::size_t unit = 0, index = 0;
    Tensor param;
  };
  struct Reduction {
    Tensor grad;     // the unit's full gradient, laid out like its flat buffer, until reduced
    Tensor reduced;  // reduce-scatter output (then replica all-reduce) of this backward
    std::shared_ptr<dist::Work> work;  // HSDP: the replica all-reduce in flight
  };

  // Gathers unit u; returns its input wrapped for the release of a unit with frozen weights.
  Tensor before_unit_forward(std::size_t u, const Tensor& input);
  Tensor after_unit_forward(std::size_t u, const Tensor& output);
  void before_unit_backward(std::size_t u);
  void prefetch(std::size_t u);
  Reduction& gradient_buffer(std::size_t u);
  void view_gradients(std::size_t u);
  void accumulate(std::size_t u);
  void settle_all() noexcept;
  // Every unit but (unless persistent_too) the persistent one, which stays until step().
  void release_all(bool persistent_too);
  std::vector<Tensor> shards() const;
  double sum_over_shards(double local) const;
  // The root unit's early release (zero3_root_release.cpp): its gathered weights go once every
  // module that reads them in backward is done, instead of at the end of the backward.
  void hook_root_readers();
  Tensor wrap_root_reader(const Tensor& input);
  void root_reader_done();
  // The root and persistent units: no module hooks, gathered by forward() for the whole pass.
  bool whole_pass(std::size_t u) const { return units_[u]->module() == nullptr; }
  // offload_optimizer without offload_param: the optimizer steps host copies of device shards.
  bool host_copies() const { return options_.offload_optimizer && !options_.offload_param; }

  std::string name_;
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<dist::ProcessGroup> group_, shard_group_, replica_group_;
  ZeroOptions options_;
  // wrap_units order: the persistent unit, then the root (if they have parameters) last.
  std::vector<std::unique_ptr<ShardedUnit>> units_;
  // Reverse forward order, then the persistent unit and the root.
  std::vector<std::size_t> reduce_order_;
  std::vector<Reduction> reductions_;
  std::vector<ParamSlot> slots_;
  nn::NamedTensors frozen_;  // parameters outside the units (no grad): whole on every rank
  std::vector<std::pair<std::size_t, int>> module_hooks_;  // (unit, hook id)
  // The root unit when its readers can be told apart (hook_root_readers), their hooks, the
  // wrapped inputs of this backward still to run, and whether a reader ran this step on an input
  // without a gradient (whose backward nothing would announce: no early release then).
  std::optional<std::size_t> root_;
  std::vector<std::pair<nn::Module*, int>> root_hooks_;
  std::int64_t root_readers_ = 0;
  bool root_reader_unseen_ = false;
  std::vector<Tensor> host_shards_;  // offload_optimizer: what the optimizer steps
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::vector<Zero3Event> trace_;
  bool pinned_ = false;  // gather_full_parameters() holds every unit until forward() or step()
  std::unique_ptr<BucketEngine> engine_;  // last: its hooks call into everything above
};

}  // namespace genesis::parallel::detail
