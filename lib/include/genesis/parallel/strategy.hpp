// Strategy: how a model's training step is spread over the ranks of a process group (DDP, the
// ZeRO stages and HSDP behind one interface), so the trainer never branches on the strategy. A
// strategy owns the wrapped model and its optimizer; the trainer gives it micro-batches, a loss to
// backpropagate, a clipping norm and a learning rate.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "genesis/dist/process_group.hpp"
#include "genesis/nn/module.hpp"
#include "genesis/optim/optimizer.hpp"
#include "genesis/parallel/ddp.hpp"
#include "genesis/ckpt/state_piece.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::parallel {

// What a strategy saves and loads, in the checkpoint's words.
using ckpt::StatePiece;
using ckpt::StateSource;

// Bytes this rank holds for the model's training state.
struct MemoryReport {
  std::int64_t parameter_bytes = 0;
  std::int64_t gradient_bytes = 0;
  std::int64_t optimizer_bytes = 0;  // after the first step (state is created lazily)
  std::int64_t offloaded_bytes = 0;  // of the above, what lives in host memory (offload_*)
};

using OptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>& params)>;

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // The model with full parameters as the user built it (evaluation, export).
  virtual nn::Module& module() = 0;
  // One micro-batch's forward; sync_gradients is false for all but the last micro-batch of an
  // optimizer step, whose backward then reduces the accumulated gradients.
  virtual Tensor forward(const Tensor& input, bool sync_gradients) = 0;
  virtual void backward(const Tensor& loss) { loss.backward(); }
  // Multiplies this rank's gradients, where the strategy keeps them (what grad_norm() reads and
  // step() applies), by `factor` in place. For fp16 with dynamic loss scaling: the loss was
  // multiplied by the scale before backward so small gradients survive fp16, and this divides
  // them back (factor = 1 / scale) after the last micro-batch's backward and before clipping
  // and step(). Not collective.
  virtual void scale_gradients(double factor) = 0;
  // Clips the global gradient norm to max_norm; returns the norm before clipping.
  virtual double clip_grad_norm(double max_norm) = 0;
  // The global L2 norm of the gradients; the same value on every rank, and inf or NaN when any
  // gradient on any rank is (how an fp16 overflow is detected). May be collective: every rank
  // calls it.
  virtual double grad_norm() = 0;
  // Optimizer step at learning rate lr, then clears the gradients.
  virtual void step(double lr) = 0;
  // Clears the gradients without stepping: a step skipped because its gradients overflowed.
  // (The optimizer's own zero_grad() would detach a sharded strategy's gradient buffers.)
  // Not collective.
  virtual void zero_grad() = 0;
  virtual optim::Optimizer& optimizer() = 0;
  virtual MemoryReport memory() const = 0;
  // Collective (every rank calls it): afterwards module()'s parameters hold their full current
  // values until the next forward() or step(), so each rank may evaluate or export with plain
  // module() calls. Strategies that keep full parameters anyway need do nothing.
  virtual void gather_full_parameters() {}

  // Checkpointing (ckpt/state_piece.hpp). state_pieces: what this rank saves; across the ranks of
  // the group every element of every logical tensor is saved exactly once (replicated state by
  // one rank), so the ranks write their files in parallel without duplicates. The pieces are
  // valid until the next forward() or step().
  virtual std::vector<StatePiece> state_pieces() = 0;
  // Sets parameters, buffers and optimizer state from `source`, whatever layout it was saved
  // in; each rank reads only what it holds. A missing or misshapen tensor throws
  // InvalidArgument naming it. The optimizer's step count is the caller's (Optimizer::
  // set_step_count). Not collective.
  virtual void load_state(const StateSource& source) = 0;
};

struct ZeroOptions {
  double bucket_cap_mb = 25;        // gradient buckets (stages 1 and 2): the rule DDP's follow
  double first_bucket_cap_mb = 1;   // smaller, so the first reduce-scatter starts early
  int hsdp_shard_size = 0;     // hsdp: ranks per shard group; 0: LOCAL_WORLD_SIZE (one node)
  bool offload_optimizer = false;  // ZeRO stages: optimizer state and update on the host
  // zero3/hsdp: parameter shards (and so their gradients and the update) in host memory, each
  // unit copied to the device as it is gathered (DeepSpeed's offload_param).
  bool offload_param = false;
  // zero3/hsdp: the next unit is all-gathered while this one computes (prefetch) when it holds at
  // most prefetch_elements (0: never) and the units gathered with it at most max_live_elements
  // (DeepSpeed's stage3_prefetch_bucket_size and stage3_max_live_parameters); a unit in use is
  // gathered whatever its size.
  std::int64_t prefetch_elements = 50'000'000;
  std::int64_t max_live_elements = 1'000'000'000;
  // zero3/hsdp: a trainable parameter of at most this many elements (0: none) stays gathered on
  // every rank from the first forward after a step until the next step, as DeepSpeed's
  // stage3_param_persistence_threshold keeps small parameters: one all-gather per step instead
  // of two per micro-batch. Its gradient and optimizer state stay sharded.
  std::int64_t persistence_threshold = 0;
  // hsdp: the store its shard and replica subgroups rendezvous on, when `group` is not the
  // default group (ranks as threads in tests); null: dist::new_group on the default group.
  std::shared_ptr<rendezvous::Store> store;
};

// The elements of `model`'s trainable parameters that the persistence threshold keeps gathered
// (ZeroOptions::persistence_threshold), for memory estimates.
std::int64_t persistent_elements(nn::Module& model, std::int64_t threshold);

struct StrategyOptions {
  std::string name = "ddp";  // "auto" | "ddp" | "zero1" | "zero2" | "zero3" | "hsdp"
  DDPOptions ddp;
  ZeroOptions zero;
};

class DeferredInit;

// deferred: for zero3 and hsdp, the DeferredInit (deferred_init.hpp) `model` was built under;
// the strategy adopts the units it sharded and shards the rest of the model itself.
std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options,
                                        std::shared_ptr<nn::Module> model,
                                        const OptimizerFactory& make_optimizer,
                                        std::shared_ptr<dist::ProcessGroup> group,
                                        DeferredInit* deferred = nullptr);

}  // namespace genesis::parallel
