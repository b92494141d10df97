// ZeRO-3 / HSDP: the per-unit gather, release and gradient reduction (see zero3_strategy.hpp).
//
// Order of collectives. Every rank must submit the same collectives to a group in the same
// order. Gathers are issued by forward hooks and by the backward node of each unit, at points
// the (identical) graph fixes on every rank; reduce-scatters are launched by the bucket engine
// in one fixed order, reverse forward order with the root last, a unit waiting for the units
// before it even if its gradients were ready earlier (bucket_engine.hpp).
//
// Gradients. A parameter's gradient, once final, is copied into its unit's full gradient buffer
// and dropped from .grad; when the unit's last gradient arrives its gathered parameters are freed
// (no remaining node needs them: every node that saved one of them also produced a gradient for
// it) and the buffer is reduce-scattered (AVG) into this rank's slice. Every micro-batch reduces,
// as zero2 does, so no full gradient outlives a backward; the slices add up in the gradient
// shard. HSDP then averages each slice over the replica group, at the end of backward.
#include "zero3_strategy.hpp"

#include <set>

#include <spdlog/spdlog.h>

#include "genesis/autograd/engine.hpp"
#include "genesis/autograd/grad_destination.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/optim/clip_grad.hpp"
#include "genesis/ops/ops.hpp"
#include "replicate.hpp"
#include "state_pieces.hpp"

namespace genesis::parallel::detail {

FullyShardedStrategy::FullyShardedStrategy(std::string name, std::shared_ptr<nn::Module> model,
                                           const OptimizerFactory& make_optimizer,
                                           std::shared_ptr<dist::ProcessGroup> group,
                                           std::shared_ptr<dist::ProcessGroup> shard_group,
                                           std::shared_ptr<dist::ProcessGroup> replica_group,
                                           const ZeroOptions& options,
                                           std::vector<std::unique_ptr<ShardedUnit>> built)
    : name_(std::move(name)),
      model_(std::move(model)),
      group_(std::move(group)),
      shard_group_(std::move(shard_group)),
      replica_group_(std::move(replica_group)),
      options_(options) {
  bool trainable = false;
  for (auto& [pname, p] : model_->named_parameters()) trainable = trainable || p.requires_grad();
  GENESIS_CHECK(trainable, InvalidArgument, name_ + ": the model has no trainable parameter");
  units_ = make_units(*model_, std::move(built), *group_, *shard_group_,
                      options_.persistence_threshold);
  // Frozen parameters under the persistence threshold are in no unit: whole on every rank.
  std::set<const TensorImpl*> sharded;
  for (const auto& unit : units_)
    for (const FrozenPart& part : unit->frozen())
      for (const auto& [pname, p] : part.flat.params) sharded.insert(p.impl());
  for (auto& [pname, p] : model_->named_parameters())
    if (!p.requires_grad() && !sharded.contains(p.impl())) frozen_.emplace_back(pname, p);
  // A unit of frozen parameters only has nothing to reduce.
  for (std::size_t u = units_.size(); u-- > 0;)
    if (!whole_pass(u) && units_[u]->has_trainable()) reduce_order_.push_back(u);
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (whole_pass(u) && units_[u]->has_trainable()) reduce_order_.push_back(u);
  reductions_.resize(units_.size());

  std::vector<std::vector<std::size_t>> slots_of(units_.size());
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const FlatParams& flat = units_[u]->flat();
    for (std::size_t i = 0; i < flat.params.size(); ++i) {
      slots_of[u].push_back(slots_.size());
      slots_.push_back(ParamSlot{u, i, flat.params[i].second});
    }
    if (nn::Module* m = units_[u]->module()) {
      module_hooks_.emplace_back(u, m->register_forward_pre_hook(
                                        [this, u](nn::Module&, const Tensor& input) {
                                          return before_unit_forward(u, input);
                                        }));
      module_hooks_.emplace_back(
          u, m->register_forward_hook([this, u](nn::Module&, const Tensor&, const Tensor& out) {
            return after_unit_forward(u, out);
          }));
    }
  }
  hook_root_readers();
  if (options_.offload_param)
    for (auto& unit : units_) unit->offload_shard();  // the optimizer then steps host shards
  if (host_copies()) {
    // The optimizer's copy of each shard, and its state, live on the host; step() moves the
    // gradient shard there and the updated shard back. On a CPU build this is one more copy.
    for (const auto& unit : units_) host_shards_.push_back(host_copy_for_optimizer(unit->shard()));
    optimizer_ = make_optimizer(host_shards_);
  } else {
    optimizer_ = make_optimizer(shards());
  }
  // The engine's buckets are the units in reduce order.
  std::vector<Tensor> params_of_slots;
  for (const ParamSlot& slot : slots_) params_of_slots.push_back(slot.param);
  std::vector<std::vector<std::size_t>> buckets;
  for (std::size_t u : reduce_order_) buckets.push_back(slots_of[u]);
  engine_ = std::make_unique<BucketEngine>(name_, std::move(params_of_slots), std::move(buckets),
                                           static_cast<BucketPolicy&>(*this));
  spdlog::debug("{}: {} units, {} parameters, shard group of {}, {} replicas", name_,
                units_.size(), slots_.size(), shard_group_->size(),
                replica_group_ ? replica_group_->size() : 1);
}

FullyShardedStrategy::~FullyShardedStrategy() {
  engine_.reset();
  settle_all();
  for (auto& [u, id] : module_hooks_) units_[u]->module()->remove_hook(id);
  for (auto& [module, id] : root_hooks_) module->remove_hook(id);
}

std::vector<Tensor> FullyShardedStrategy::shards() const {
  std::vector<Tensor> out;
  for (const auto& unit : units_) out.push_back(unit->shard());
  return out;
}

std::vector<std::string> FullyShardedStrategy::unit_names() const {
  std::vector<std::string> out;
  for (const auto& unit : units_) out.push_back(unit->name());
  return out;
}

Tensor FullyShardedStrategy::forward(const Tensor& input, bool /*sync_gradients*/) {
  // Every micro-batch reduces its gradients (see the top of this file), so sync_gradients
  // changes nothing here.
  const bool training = autograd::grad_enabled();
  trace_.clear();
  pinned_ = false;  // units gathered by gather_full_parameters() are used, then released
  if (training) {
    // A backward that failed halfway leaves reductions in flight; arm() settles them.
    engine_->arm();
    for (Reduction& r : reductions_) r = Reduction{};
    for (const ParamSlot& s : slots_) autograd::withdraw_grad_destination(Tensor(s.param));
    // The root's gradient buffer now rather than once its last gradient is in: the head's
    // gradient (taken in forward by linear_cross_entropy, in backward's first node by linear)
    // is then written where it is reduced, instead of into a vocabulary-sized table of its own
    // that sits beside the buffer while it is copied in at the end of the backward.
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (whole_pass(u) && !units_[u]->persistent()) view_gradients(u);
  }
  // A forward without autograd between a forward and its backward (a LoRA run's reference is the
  // policy without its adapters) leaves gathered what that backward still needs.
  std::vector<bool> held(units_.size());
  for (std::size_t u = 0; u < units_.size(); ++u)
    held[u] = units_[u]->state() != ShardedUnit::State::released;
  // The root and persistent units first (the persistent one is gathered once per step), then
  // the first unit's prefetch, issued before waiting for them.
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (whole_pass(u) && units_[u]->start_gather())
      trace_.push_back({Zero3Event::Kind::gather, units_[u]->name(), false});
  if (!units_.empty() && !whole_pass(0)) prefetch(0);
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (whole_pass(u)) units_[u]->wait_gathered();
  Tensor out = model_->forward(input);
  if (!training)
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (!held[u] && !units_[u]->persistent()) units_[u]->release();
  return out;
}

// Within the limits of ZeroOptions: the unit's elements, and every gathered unit's with it.
void FullyShardedStrategy::prefetch(std::size_t u) {
  const std::int64_t next = units_[u]->gathered_elements();
  if (next > options_.prefetch_elements) return;
  std::int64_t live = next;
  for (const auto& unit : units_)
    if (unit->state() != ShardedUnit::State::released) live += unit->gathered_elements();
  if (live > options_.max_live_elements) return;
  if (units_[u]->start_gather()) trace_.push_back({Zero3Event::Kind::gather, units_[u]->name(), true});
}

Tensor FullyShardedStrategy::before_unit_forward(std::size_t u, const Tensor& input) {
  if (pinned_ && !autograd::grad_enabled()) return Tensor();
  trace_.push_back({Zero3Event::Kind::forward_begin, units_[u]->name(), false});
  if (units_[u]->start_gather())
    trace_.push_back({Zero3Event::Kind::gather, units_[u]->name(), false});
  units_[u]->wait_gathered();
  if (u + 1 < units_.size() && !whole_pass(u + 1)) prefetch(u + 1);
  if (!units_[u]->has_frozen() || !autograd::grad_enabled() || !input.defined() ||
      !input.requires_grad())
    return Tensor();
  // Frozen weights produce no gradient that would say when the unit's backward is done with
  // them (its input's gradient needs them after its own parameters have theirs): the input
  // passes through a node that runs once that gradient is complete, and releases the unit.
  Tensor wrapped = input.detach();
  autograd::record("Zero3UnitInputBackward", {input}, {wrapped},
                   [this, u](const std::vector<Tensor>& grads,
                             const autograd::NeedsGrad&) -> std::vector<Tensor> {
                     if (!units_[u]->persistent()) units_[u]->release();
                     return {grads[0]};
                   });
  return wrapped;
}

Tensor FullyShardedStrategy::after_unit_forward(std::size_t u, const Tensor& output) {
  if (pinned_ && !autograd::grad_enabled()) return Tensor();
  trace_.push_back({Zero3Event::Kind::forward_end, units_[u]->name(), false});
  units_[u]->release();
  if (!autograd::grad_enabled() || !output.defined() || !output.requires_grad()) return Tensor();
  // The unit's output passes through a node created after all of the unit's own nodes, so the
  // engine (latest-created ready node first) runs it, and with it the gather, before them.
  Tensor wrapped = output.detach();
  autograd::record("Zero3UnitBackward", {output}, {wrapped},
                   [this, u](const std::vector<Tensor>& grads,
                             const autograd::NeedsGrad&) -> std::vector<Tensor> {
                     before_unit_backward(u);
                     return {grads[0]};
                   });
  return wrapped;
}

void FullyShardedStrategy::before_unit_backward(std::size_t u) {
  trace_.push_back({Zero3Event::Kind::backward_begin, units_[u]->name(), false});
  if (units_[u]->start_gather())
    trace_.push_back({Zero3Event::Kind::gather, units_[u]->name(), false});
  units_[u]->wait_gathered();
  if (u > 0) prefetch(u - 1);
  view_gradients(u);
}

// The unit's parameters take their gradients straight into its flat buffer, so no
// parameter-sized gradient waits beside the buffer to be copied in: a buffer made here is each
// parameter's gradient destination (linear and embedding compute theirs in it; others, small,
// are copied in once the unit is complete), one made earlier in this backward its .grad
// (AccumulateGrad adds in place).
void FullyShardedStrategy::view_gradients(std::size_t u) {
  if (!units_[u]->has_trainable()) return;
  const bool fresh = !reductions_[u].grad.defined();
  const Reduction& r = gradient_buffer(u);
  const FlatParams& flat = units_[u]->flat();
  for (std::size_t i = 0; i < flat.params.size(); ++i) {
    Tensor param(flat.params[i].second);
    if (param.grad().defined()) continue;
    if (fresh)
      autograd::offer_grad_destination(param, flat.param_view(r.grad, i));
    else
      param.set_grad(flat.param_view(r.grad, i));
  }
}

FullyShardedStrategy::Reduction& FullyShardedStrategy::gradient_buffer(std::size_t u) {
  const FlatParams& flat = units_[u]->flat();
  Reduction& r = reductions_[u];
  if (!r.grad.defined())
    r.grad = Tensor::zeros({flat.padded_numel()}, flat.flat.dtype(), flat.flat.device());
  return r;
}

void FullyShardedStrategy::take_gradient(std::size_t slot, bool armed) {
  GENESIS_CHECK(armed, InvalidArgument,
                name_ + ": a backward ran without a forward through the strategy before it; call "
                        "forward again before each backward");
  // A gradient in the unit's buffer already is done with; any other (the root unit's, which has
  // no backward hook to set views up) waits as it is and is copied in once the unit is complete.
  const ParamSlot& s = slots_[slot];
  const Reduction& r = reductions_[s.unit];
  if (r.grad.defined() &&
      same_view(Tensor(s.param).grad(), units_[s.unit]->flat().param_view(r.grad, s.index)))
    Tensor(s.param).set_grad(Tensor());
}

void FullyShardedStrategy::missing_gradients(const std::vector<std::size_t>& slots) {
  // They contribute zeros (a branch another rank took): the buffer starts zeroed, and a view set
  // up for a gradient that never came goes.
  for (std::size_t k : slots) Tensor(slots_[k].param).set_grad(Tensor());
}

// Every node that reads the unit's parameters has produced their gradients, so none needs the
// gathered values any more (the root's included): they go before the gradient buffer comes, and
// each waiting gradient goes as soon as it is copied in, so the largest (a tied embedding's two,
// summed) never sits beside both the gathered unit and the buffer.
void FullyShardedStrategy::bucket_complete(std::size_t bucket) {
  const std::size_t u = reduce_order_[bucket];
  for (const auto& [name, param] : units_[u]->flat().params)
    autograd::withdraw_grad_destination(Tensor(param));
  // Frozen weights may still be read by the nodes that give the unit's input its gradient.
  if (!units_[u]->persistent() && !units_[u]->has_frozen()) units_[u]->release();
  units_[u]->flat().take_gradients(gradient_buffer(u).grad);
}

std::shared_ptr<dist::Work> FullyShardedStrategy::launch(std::size_t bucket,
                                                         bool waited_at_once) {
  const std::size_t u = reduce_order_[bucket];
  const FlatParams& flat = units_[u]->flat();
  Reduction& r = reductions_[u];
  r.reduced = Tensor::empty({flat.shard_numel}, flat.flat.dtype(), flat.flat.device());
  trace_.push_back({Zero3Event::Kind::reduce_scatter, units_[u]->name(), false});
  // The full gradient goes once reduced (bucket_reduced), so the collective may reduce in it.
  return shard_group_->reduce_scatter_tensor(
      r.reduced, r.grad,
      {.op = dist::ReduceOp::AVG, .input_is_scratch = true,
       .caller_waits = waited_at_once});
}

void FullyShardedStrategy::bucket_reduced(std::size_t bucket) {
  const std::size_t u = reduce_order_[bucket];
  Reduction& r = reductions_[u];
  r.grad = Tensor();  // free the full gradient
  if (replica_group_)
    r.work = replica_group_->all_reduce(r.reduced, {.op = dist::ReduceOp::AVG});
  else
    accumulate(u);
}

// The reduced slice into the shard's gradient: the first of a step becomes it, later ones
// (micro-batches) add in. Between steps no gradient shard exists, so forward and the start of
// backward hold the parameter shards and optimizer state only.
void FullyShardedStrategy::accumulate(std::size_t u) {
  NoGradGuard no_grad;
  Reduction& r = reductions_[u];
  Tensor shard = units_[u]->shard();
  const Tensor reduced = r.reduced.to(shard.device());  // offload_param: to the host shard
  if (shard.grad().defined())
    add_into(shard.grad(), reduced);
  else
    shard.set_grad(reduced);
  r.reduced = Tensor();
}

void FullyShardedStrategy::finish() {
  if (replica_group_)
    for (std::size_t u : reduce_order_) {
      std::shared_ptr<dist::Work> work = std::move(reductions_[u].work);
      work->wait();
      accumulate(u);
    }
  release_all(/*persistent_too=*/false);
  root_readers_ = 0;  // a graph dropped without its backward left some: they never run now
  root_reader_unseen_ = false;
}

void FullyShardedStrategy::settle() noexcept {
  for (Reduction& r : reductions_) settle_work(r.work, name_);
}

void FullyShardedStrategy::release_all(bool persistent_too) {
  for (auto& unit : units_)
    if (persistent_too || !unit->persistent()) unit->release();
}

void FullyShardedStrategy::settle_all() noexcept {
  if (engine_) engine_->settle();  // the reductions, its own and the policy's
  for (auto& unit : units_)
    if (!unit->settle()) spdlog::debug("{}: discarding a failed gather of '{}'", name_, unit->name());
}

double FullyShardedStrategy::sum_over_shards(double local) const {
  // Replicas hold identical gradient shards, so the shard group alone covers the model once.
  return detail::sum_over_ranks(local, *shard_group_);
}

// The gradient shards (.grad of shards()) are what the norm reads and step() applies; with
// offload_optimizer step() copies them to the host afterwards.
void FullyShardedStrategy::scale_gradients(double factor) {
  optim::scale_gradients(shards(), factor);
}

double FullyShardedStrategy::clip_grad_norm(double max_norm) {
  return optim::clip_grad_norm(shards(), max_norm,
                               [this](double local) { return sum_over_shards(local); });
}

double FullyShardedStrategy::grad_norm() {
  return optim::grad_norm(shards(), [this](double local) { return sum_over_shards(local); });
}

void FullyShardedStrategy::step(double lr) {
  pinned_ = false;
  // A gather in flight reads the shards the optimizer is about to change, and the persistent
  // unit's values are about to be stale: it is gathered again by the next forward.
  release_all(/*persistent_too=*/true);
  step_shards(*optimizer_, lr, host_shards_, shards());
  zero_grad();
}

void FullyShardedStrategy::zero_grad() {
  // The shards' gradients go (the next backward makes new ones); the host copies that the
  // offloaded optimizer steps keep their buffers.
  NoGradGuard no_grad;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    if (host_copies()) host_shards_[u].grad().zero_();
    Tensor(units_[u]->shard()).set_grad(Tensor());
  }
}

void FullyShardedStrategy::gather_full_parameters() {
  for (auto& unit : units_) unit->start_gather();
  for (auto& unit : units_) unit->wait_gathered();
  pinned_ = true;
}

std::vector<StatePiece> FullyShardedStrategy::state_pieces() {
  // The shard group's ranks are the first ones of `group_` (zero3_factories.cpp), so only the
  // first replica's shard group has ranks below its size.
  if (group_->rank() >= shard_group_->size()) return {};
  const int index = shard_group_->rank();
  std::vector<StatePiece> out;
  for (const auto& unit : units_) {
    append_shard_pieces(unit->flat(), index, unit->shard(), "model.", "", out);
    for (const FrozenPart& part : unit->frozen())
      append_shard_pieces(part.flat, index, part.shard, "model.", "", out);
  }
  if (group_->rank() == 0) {
    for (const auto& [pname, p] : frozen_) out.push_back(whole_piece(model_name(pname), p));
    for (const auto& [bname, t] : model_->named_buffers())
      out.push_back(whole_piece(model_name(bname), t));
  }
  for (const auto& [slot, state] : state_by_slot(optimizer_->state_tensors()))
    append_shard_slot_pieces(units_.at(slot)->flat(), index, state, out);
  return out;
}

void FullyShardedStrategy::load_state(const StateSource& source) {
  // Gathered units would keep showing the old values, and a gather in flight reads the shards.
  pinned_ = false;
  settle_all();
  release_all(/*persistent_too=*/true);
  NoGradGuard no_grad;
  const int index = shard_group_->rank();
  check_model_entries(source, model_->named_parameters());
  nn::NamedTensors trainable;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const Tensor values = read_shard(source, units_[u]->flat(), index, units_[u]->shard());
    Tensor(units_[u]->shard()).copy_(values);
    if (host_copies()) host_shards_[u].copy_(values);
    for (const auto& param : units_[u]->flat().params) trainable.push_back(param);
    for (FrozenPart& part : units_[u]->frozen())
      Tensor(part.shard).copy_(read_shard(source, part.flat, index, part.shard));
  }
  for (const auto& [pname, p] : frozen_) load_whole(source, model_name(pname), p);
  for (const auto& [bname, t] : model_->named_buffers()) load_whole(source, model_name(bname), t);
  const OptimizerLayout layout = optimizer_layout(source, trainable, optimizer_->state_names());
  optim::NamedTensors state;
  for (std::size_t u = 0; u < units_.size(); ++u)
    for (auto& entry : read_shard_slot(source, layout, units_[u]->flat(), index, u))
      state.push_back(std::move(entry));
  load_optimizer(*optimizer_, state, name_);
}

// Offloaded bytes are read from where each tensor is, not from the settings: a shard (and the
// gradient shard step() keeps beside it) or an optimizer state tensor in host memory while the
// units compute on a device. An offload that did not happen reports none, and neither does a CPU
// run, which has no device to leave (its host copies are one more copy in the same memory).
MemoryReport FullyShardedStrategy::memory() const {
  MemoryReport r;
  const bool on_device = !units_.empty() && !units_.front()->flat().flat.device().is_cpu();
  for (const auto& unit : units_) {
    const std::int64_t bytes = unit->flat().shard_numel * unit->element_bytes();
    r.parameter_bytes += bytes;
    if (unit->persistent()) r.parameter_bytes += unit->flat().padded_numel() * unit->element_bytes();
    r.gradient_bytes += bytes;
    if (on_device && unit->shard().device().is_cpu()) r.offloaded_bytes += 2 * bytes;
    r.parameter_bytes += unit->frozen_shard_bytes();
    if (on_device && unit->offloaded()) r.offloaded_bytes += unit->frozen_shard_bytes();
  }
  for (auto& [sname, t] : optimizer_->state_tensors()) {
    const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
    r.optimizer_bytes += bytes;
    if (on_device && t.device().is_cpu()) r.offloaded_bytes += bytes;
  }
  return r;
}

}  // namespace genesis::parallel::detail
