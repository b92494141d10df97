// ZeRO stages 1 and 2: every rank holds the full parameters, but the optimizer state (stage 1)
// and also the reduced gradients (stage 2) only for its shard. The sequence per step is llm.c's
// and DeepSpeed's: gradients are reduce-scattered (rank r receives the average of shard r), each
// rank steps the optimizer on its shard of the parameters, and an all-gather gives every rank the
// updated parameters again.
//
// Buckets. As in DDP, parameters are grouped by the bucket engine's rule (bucket_engine.hpp:
// reverse registration order, bucket_cap_mb, a smaller first bucket), each flattened into one
// buffer padded to a multiple of the world size (flat_params.hpp); a bucket's reduce-scatter
// starts on the communication thread as soon as its last gradient is ready, in bucket order on
// every rank. Rank r owns shard r of every bucket; the optimizer sees one flat tensor per bucket.
//
// Stage 1 keeps a full gradient buffer per bucket: .grad of every parameter views it, micro-batches
// of an accumulation window add into it locally, and only the last one reduces, in place: the
// rank's reduced shard is the buffer's own chunk (its contents elsewhere are scratch until
// zero_grad). Stage 2 keeps no full gradient between backward passes: each micro-batch's
// gradients are copied into a transient bucket buffer (a lone parameter's gradient is that buffer
// already), reduce-scattered, added to the rank's shard and freed (DeepSpeed's stage 2 also
// reduces every micro-batch). After the step every bucket is all-gathered in place.
//
// offload_optimizer (DeepSpeed's ZeRO-Offload): the optimizer steps host copies of the shards, with
// its state on the host; step() moves each reduced shard gradient there and the updated shard
// back before the all-gather. On a CPU run the copies are host to host.
//
// Checkpoint state: each rank saves the elements of its shard range of every bucket, parameters
// (replicated, but saved once) and optimizer state alike; loading reads the full parameters and
// this rank's optimizer shard, so any saved layout loads into any world size.
#include <utility>

#include <spdlog/spdlog.h>

#include "bucket_engine.hpp"
#include "flat_params.hpp"
#include "genesis/autograd/engine.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/optim/clip_grad.hpp"
#include "genesis/ops/ops.hpp"
#include "replicate.hpp"
#include "state_pieces.hpp"
#include "zero_strategies.hpp"

namespace genesis::parallel::detail {
namespace {

class ZeroStage12 : public Strategy, BucketPolicy {
 public:
  ZeroStage12(int stage, std::shared_ptr<nn::Module> model, const OptimizerFactory& make_optimizer,
              std::shared_ptr<dist::ProcessGroup> group, const ZeroOptions& options);
  ~ZeroStage12() override;

  void take_gradient(std::size_t variable, bool armed) override;
  void missing_gradients(const std::vector<std::size_t>& variables) override;
  void bucket_complete(std::size_t bucket) override;
  std::shared_ptr<dist::Work> launch(std::size_t bucket, bool waited_at_once) override;
  void bucket_reduced(std::size_t bucket) override;
  // Stage 2: two bucket buffers at a time, one filling while one reduces.
  std::size_t max_in_flight() const override { return stage_ == 2 ? 2 : SIZE_MAX; }

  std::string name() const override { return "zero" + std::to_string(stage_); }
  nn::Module& module() override { return *model_; }
  Tensor forward(const Tensor& input, bool sync_gradients) override;
  void scale_gradients(double factor) override;
  double clip_grad_norm(double max_norm) override;
  double grad_norm() override;
  void step(double lr) override;
  void zero_grad() override;
  optim::Optimizer& optimizer() override { return *optimizer_; }
  MemoryReport memory() const override;
  std::vector<StatePiece> state_pieces() override;
  void load_state(const StateSource& source) override;

 private:
  struct Bucket {
    FlatParams flat;
    Tensor grad;        // full gradient buffer (stage 1: always; stage 2: during backward only)
    Tensor shard_param; // this rank's shard of flat.flat: what the optimizer steps
    Tensor shard_grad;  // the reduced gradient of that shard (stage 1: grad's shard)
    Tensor reduced;     // stage 2: reduce-scatter output when shard_grad holds a sum already
    bool shard_grad_zero = true;  // stage 2: since zero_grad, so a reduction may write it
  };
  struct Variable {
    std::size_t bucket = 0, index = 0;  // parameter `index` of bucket's FlatParams
    Tensor param;
  };

  std::vector<Tensor> shard_params() const;
  double sum_over_ranks(double local) const;

  int stage_;
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<dist::ProcessGroup> group_;
  std::vector<Bucket> buckets_;
  std::vector<Variable> variables_;
  nn::NamedTensors frozen_;  // parameters outside the buckets (no grad): whole on every rank
  std::vector<Tensor> host_shards_;  // offload_optimizer: what the optimizer steps, per bucket
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<BucketEngine> engine_;  // last: its hooks call into everything above
};

ZeroStage12::ZeroStage12(int stage, std::shared_ptr<nn::Module> model,
                         const OptimizerFactory& make_optimizer,
                         std::shared_ptr<dist::ProcessGroup> group, const ZeroOptions& options)
    : stage_(stage), model_(std::move(model)), group_(std::move(group)) {
  nn::NamedTensors params;
  for (auto& [name, p] : model_->named_parameters())
    (p.requires_grad() ? params : frozen_).emplace_back(name, p);
  GENESIS_CHECK(!params.empty(), InvalidArgument, name() + ": the model has no trainable parameter");
  {
    NoGradGuard no_grad;
    check_same_parameters(params, *group_);
    broadcast_from_rank0(params, *group_);
    broadcast_from_rank0(model_->named_buffers(), *group_);
  }

  std::vector<Tensor> tensors;
  for (const auto& [pname, p] : params) tensors.push_back(p);
  const auto assignment =
      assign_buckets(tensors, options.first_bucket_cap_mb, options.bucket_cap_mb);
  const int world = group_->size(), rank = group_->rank();
  for (const auto& members : assignment) {
    nn::NamedTensors g;
    for (std::size_t k : members) g.push_back(params[k]);
    Bucket b;
    // The flat parameters and stage 1's full gradient in the group's shared memory where it
    // has some: the all-gather and reduce-scatter then read the peers' copies in place.
    b.flat = flatten_parameters(std::move(g), world, std::nullopt, group_.get());
    b.shard_param = make_view(b.flat.flat, {b.flat.shard_numel}, {1},
                              b.flat.flat.offset() + rank * b.flat.shard_numel);
    b.shard_param.set_requires_grad(true);
    if (stage_ == 1) {
      b.grad = group_->zeros_shared_on(b.flat.flat.device(), b.flat.padded_numel(),
                                       b.flat.flat.dtype());
      b.shard_grad = b.flat.shard_of(b.grad, rank);
    } else {
      b.shard_grad = Tensor::zeros({b.flat.shard_numel}, b.flat.flat.dtype(), b.flat.flat.device());
    }
    b.shard_param.set_grad(b.shard_grad);
    buckets_.push_back(std::move(b));
  }
  // The engine's variables in bucket order, so its buckets are the ones above.
  std::vector<Tensor> in_buckets;
  std::vector<std::vector<std::size_t>> members;
  for (std::size_t bi = 0; bi < buckets_.size(); ++bi) {
    members.emplace_back();
    for (std::size_t i = 0; i < buckets_[bi].flat.params.size(); ++i) {
      Variable v{bi, i, buckets_[bi].flat.params[i].second};
      if (stage_ == 1) v.param.set_grad(buckets_[bi].flat.param_view(buckets_[bi].grad, i));
      members.back().push_back(variables_.size());
      in_buckets.push_back(v.param);
      variables_.push_back(v);
    }
  }
  if (options.offload_optimizer)
    for (const Bucket& b : buckets_) host_shards_.push_back(host_copy_for_optimizer(b.shard_param));
  optimizer_ = make_optimizer(options.offload_optimizer ? host_shards_ : shard_params());
  engine_ = std::make_unique<BucketEngine>(name(), std::move(in_buckets), std::move(members),
                                           static_cast<BucketPolicy&>(*this));
  spdlog::debug("{}: {} parameters in {} buckets, {} ranks", name(), variables_.size(),
                buckets_.size(), world);
}

ZeroStage12::~ZeroStage12() { engine_.reset(); }

std::vector<Tensor> ZeroStage12::shard_params() const {
  std::vector<Tensor> out;
  for (const Bucket& b : buckets_) out.push_back(b.shard_param);
  return out;
}

Tensor ZeroStage12::forward(const Tensor& input, bool sync_gradients) {
  if (model_->is_training() && autograd::grad_enabled()) {
    // Stage 2 reduces every micro-batch; stage 1 only the last of an accumulation window.
    engine_->settle();
    if (stage_ == 2 || sync_gradients)
      engine_->arm();
    else
      engine_->disarm();
  }
  return model_->forward(input);
}

void ZeroStage12::take_gradient(std::size_t v, bool /*armed*/) {
  Variable& var = variables_[v];
  if (stage_ == 1) {
    const Bucket& b = buckets_[var.bucket];
    Tensor view = b.flat.param_view(b.grad, var.index);
    Tensor grad = var.param.grad();
    // .grad should view the bucket; a caller that reset it gets the bucket back.
    if (!same_view(grad, view)) {
      view.copy_(grad);
      var.param.set_grad(view);
    }
  }
  // Stage 2 leaves the gradient where it is until its bucket is complete (bucket_complete).
}

// Stage 2's bucket buffer exists only from here to its reduction: made once every gradient of
// the bucket is in. Made at the first gradient, it would sit beside the ones still to come.
void ZeroStage12::bucket_complete(std::size_t bucket) {
  if (stage_ != 2) return;
  Bucket& b = buckets_[bucket];
  b.grad = b.flat.take_lone_gradient();
  if (b.grad.defined()) return;
  b.grad = Tensor::zeros({b.flat.padded_numel()}, b.flat.flat.dtype(), b.flat.flat.device());
  b.flat.take_gradients(b.grad);
}

void ZeroStage12::missing_gradients(const std::vector<std::size_t>& /*variables*/) {
  // They contribute zeros (a branch another rank took): stage 1's buffer holds them already,
  // and stage 2's is made zeroed once the bucket is complete.
}

// The full gradient is scratch once reduced (stage 2 drops it, stage 1 zeroes it after the step),
// so the collective may reduce in it. Stage 1 reduces in place into the buffer's own shard; stage 2
// straight into the shard gradient while that is zero, else beside it for the sum.
std::shared_ptr<dist::Work> ZeroStage12::launch(std::size_t bucket, bool waited_at_once) {
  Bucket& b = buckets_[bucket];
  const bool direct = stage_ == 1 || b.shard_grad_zero;
  if (!direct)
    b.reduced = Tensor::empty({b.flat.shard_numel}, b.flat.flat.dtype(), b.flat.flat.device());
  b.shard_grad_zero = false;
  return group_->reduce_scatter_tensor(direct ? b.shard_grad : b.reduced, b.grad,
                                       {.op = dist::ReduceOp::AVG, .input_is_scratch = true,
                                        .caller_waits = waited_at_once});
}

void ZeroStage12::bucket_reduced(std::size_t bucket) {
  Bucket& b = buckets_[bucket];
  if (stage_ == 1) return;
  if (b.reduced.defined()) add_into(b.shard_grad, b.reduced);  // accumulation over micro-batches
  b.reduced = Tensor();
  b.grad = Tensor();  // free the full gradient
}

double ZeroStage12::sum_over_ranks(double local) const {
  return detail::sum_over_ranks(local, *group_);
}

// The reduced shard gradients are what clipping, the norm and the step read; stage 1's full
// local buffer is only the reduction's input and is cleared by step() or zero_grad().
void ZeroStage12::scale_gradients(double factor) {
  optim::scale_gradients(shard_params(), factor);
}

double ZeroStage12::clip_grad_norm(double max_norm) {
  return optim::clip_grad_norm(shard_params(), max_norm,
                               [this](double local) { return sum_over_ranks(local); });
}

double ZeroStage12::grad_norm() {
  return optim::grad_norm(shard_params(), [this](double local) { return sum_over_ranks(local); });
}

void ZeroStage12::step(double lr) {
  step_shards(*optimizer_, lr, host_shards_, shard_params());
  // Every rank's updated shard into every rank's full parameters, in place: the shard is the
  // all-gather's own chunk of the flat buffer, so no copy of it is made.
  // Waited for at once: the last bucket's, when nothing is queued ahead, runs on this thread.
  std::vector<std::shared_ptr<dist::Work>> gathers;
  for (Bucket& b : buckets_)
    gathers.push_back(group_->all_gather_tensor(
        b.flat.flat, b.shard_param, {.caller_waits = &b == &buckets_.back()}));
  for (auto& work : gathers) work->wait();
  zero_grad();
}

void ZeroStage12::zero_grad() {
  // In place: .grad of the shards (and in stage 1 of the parameters) views these buffers.
  for (Bucket& b : buckets_) {
    if (stage_ == 1) {
      b.grad.zero_();  // the shard gradient with it
    } else {
      b.shard_grad.zero_();
      b.shard_grad_zero = true;
    }
  }
}

// Offloaded bytes are those of the optimizer state found in host memory while the buckets
// compute on a device, read from where each state tensor is rather than from the setting: an
// offload that did not happen reports none, and neither does a CPU run, which has no device to
// leave (its host copies are one more copy in the same memory).
MemoryReport ZeroStage12::memory() const {
  MemoryReport r;
  for (const Bucket& b : buckets_) {
    const auto elem = static_cast<std::int64_t>(dtype_size(b.flat.flat.dtype()));
    r.parameter_bytes += b.flat.padded_numel() * elem;
    r.gradient_bytes += (stage_ == 1 ? b.flat.padded_numel() : b.flat.shard_numel) * elem;
  }
  const bool on_device = !buckets_.empty() && !buckets_.front().flat.flat.device().is_cpu();
  for (auto& [name, t] : optimizer_->state_tensors()) {
    const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
    r.optimizer_bytes += bytes;
    if (on_device && t.device().is_cpu()) r.offloaded_bytes += bytes;
  }
  return r;
}

std::vector<StatePiece> ZeroStage12::state_pieces() {
  const int rank = group_->rank();
  std::vector<StatePiece> out;
  for (const Bucket& b : buckets_)
    append_shard_pieces(b.flat, rank, b.shard_param, "model.", "", out);
  if (rank == 0) {
    for (const auto& [pname, p] : frozen_) out.push_back(whole_piece(model_name(pname), p));
    for (const auto& [bname, t] : model_->named_buffers())
      out.push_back(whole_piece(model_name(bname), t));
  }
  for (const auto& [slot, state] : state_by_slot(optimizer_->state_tensors()))
    append_shard_slot_pieces(buckets_.at(slot).flat, rank, state, out);
  return out;
}

void ZeroStage12::load_state(const StateSource& source) {
  engine_->settle();
  NoGradGuard no_grad;
  nn::NamedTensors trainable;
  for (const Variable& v : variables_) trainable.push_back(buckets_[v.bucket].flat.params[v.index]);
  const nn::NamedTensors params = model_->named_parameters();
  check_model_entries(source, params);
  // The parameters view the buckets' flat buffers, so the shards the optimizer steps follow.
  for (const auto& [pname, p] : params) load_whole(source, model_name(pname), p);
  for (const auto& [bname, t] : model_->named_buffers()) load_whole(source, model_name(bname), t);
  for (std::size_t i = 0; i < host_shards_.size(); ++i)
    host_shards_[i].copy_(buckets_[i].shard_param.detach().to(Device::cpu()));
  const OptimizerLayout layout = optimizer_layout(source, trainable, optimizer_->state_names());
  optim::NamedTensors state;
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    for (auto& entry : read_shard_slot(source, layout, buckets_[i].flat, group_->rank(), i))
      state.push_back(std::move(entry));
  load_optimizer(*optimizer_, state, name());
}

}  // namespace

std::unique_ptr<Strategy> make_zero_stage12(int stage, std::shared_ptr<nn::Module> model,
                                            const OptimizerFactory& make_optimizer,
                                            std::shared_ptr<dist::ProcessGroup> group,
                                            const ZeroOptions& options) {
  GENESIS_CHECK(stage == 1 || stage == 2, InvalidArgument, "make_zero_stage12: stage 1 or 2");
  return std::make_unique<ZeroStage12>(stage, std::move(model), make_optimizer, std::move(group),
                                       options);
}

}  // namespace genesis::parallel::detail
