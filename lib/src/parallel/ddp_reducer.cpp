// Bucket assignment, the grad-ready hook, in-order launching and the end-of-backward step of
// DDP's reducer (the why is in ddp_reducer.hpp).
#include "ddp_reducer.hpp"
#include "flat_params.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "genesis/autograd/engine.hpp"
#include "genesis/core/error.hpp"

namespace genesis::parallel {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

using Reducer = DistributedDataParallel::Reducer;

Reducer::Reducer(std::shared_ptr<nn::Module> module, std::shared_ptr<dist::ProcessGroup> group,
                 const DDPOptions& options)
    : group_(std::move(group)), options_(options) {
  GENESIS_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0, InvalidArgument,
                "DDP bucket_cap_mb and first_bucket_cap_mb must be positive");
  for (auto& [name, p] : module->named_parameters())
    if (p.requires_grad()) variables_.push_back({p, name});
  GENESIS_CHECK(!variables_.empty(), InvalidArgument,
                "DistributedDataParallel: the module has no parameter that requires grad");

  // Reverse registration order; a new bucket when the cap is reached or dtype/device change.
  for (std::size_t k = variables_.size(); k-- > 0;) {
    Variable& v = variables_[k];
    const double cap_bytes =
        (buckets_.size() <= 1 ? options_.first_bucket_cap_mb : options_.bucket_cap_mb) * kMiB;
    bool open_new = buckets_.empty();
    if (!open_new) {
      const Bucket& last = buckets_.back();
      const Variable& first = variables_[last.variables.front()];
      const double bytes = static_cast<double>(last.trace.numel) *
                           static_cast<double>(dtype_size(first.param.dtype()));
      open_new = bytes >= cap_bytes || first.param.dtype() != v.param.dtype() ||
                 first.param.device() != v.param.device();
    }
    if (open_new) buckets_.emplace_back();
    Bucket& b = buckets_.back();
    v.bucket = buckets_.size() - 1;
    v.offset = b.trace.numel;
    b.trace.numel += v.param.numel();
    b.trace.parameters.push_back(v.name);
    b.variables.push_back(k);
  }
  for (Bucket& b : buckets_) {
    const Tensor& p = variables_[b.variables.front()].param;
    b.flat = Tensor::zeros({b.trace.numel}, p.dtype(), p.device());
  }
  if (options_.find_unused_parameters) local_used_.assign(variables_.size(), 0.0f);

  for (std::size_t k = 0; k < variables_.size(); ++k)
    variables_[k].hook_id =
        variables_[k].param.register_grad_ready_hook([this, k](const Tensor&) { on_grad_ready(k); });
  spdlog::debug("ddp: {} parameters in {} buckets", variables_.size(), buckets_.size());
}

Reducer::~Reducer() {
  wait_all();
  for (Variable& v : variables_) v.param.remove_grad_ready_hook(v.hook_id);
}

Tensor Reducer::bucket_view(const Variable& v) const {
  return make_view(buckets_[v.bucket].flat, v.param.shape(), contiguous_strides(v.param.shape()),
                   buckets_[v.bucket].flat.offset() + v.offset);
}

void Reducer::arm() {
  // A backward that failed half-way may have left works in flight; they must finish before the
  // buckets are written again.
  wait_all();
  for (Variable& v : variables_) v.ready = false;
  for (Bucket& b : buckets_) {
    b.pending = b.variables.size();
    b.work.reset();
  }
  std::fill(local_used_.begin(), local_used_.end(), 0.0f);
  next_launch_ = 0;
  grads_ready_ = 0;
  finalize_queued_ = false;
  armed_ = true;
}

void Reducer::on_grad_ready(std::size_t index) {
  if (!armed_) return;  // no_sync, eval, or a backward that did not come from our forward
  Variable& v = variables_[index];
  GENESIS_CHECK(!v.ready, InvalidArgument,
                "DDP: parameter '" + v.name +
                    "' got its gradient twice in one backward; call forward again before each "
                    "backward (retain_graph-style double backward is not supported)");
  if (!finalize_queued_) {
    autograd::queue_callback([this] { finalize(); });
    finalize_queued_ = true;
  }
  Tensor grad = v.param.grad();
  Tensor view = bucket_view(v);
  if (!detail::same_view(grad, view)) {
    view.copy_(grad);
    if (options_.gradient_as_bucket_view) v.param.set_grad(view);
  }
  if (!local_used_.empty()) local_used_[index] = 1.0f;
  mark_ready(index);
}

void Reducer::mark_ready(std::size_t index) {
  Variable& v = variables_[index];
  v.ready = true;
  ++grads_ready_;
  --buckets_[v.bucket].pending;
  launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_++];
    b.trace.grads_ready_at_launch = grads_ready_;
    b.trace.launched = std::chrono::steady_clock::now();
    const auto op = options_.average ? dist::ReduceOp::AVG : dist::ReduceOp::SUM;
    b.work = group_->all_reduce(b.flat, {.op = op});
  }
}

void Reducer::finalize() {
  armed_ = false;
  std::vector<std::string> unused;
  for (std::size_t k = 0; k < variables_.size(); ++k) {
    if (variables_[k].ready) continue;
    if (!options_.find_unused_parameters) {
      unused.push_back(variables_[k].name);
      continue;
    }
    // Contributes zero here; another rank may have used it.
    bucket_view(variables_[k]).zero_();
    mark_ready(k);
  }
  if (!unused.empty()) {
    wait_all();
    std::string names;
    for (std::size_t i = 0; i < unused.size() && i < 5; ++i) names += (i ? ", " : "") + unused[i];
    if (unused.size() > 5) names += " and " + std::to_string(unused.size() - 5) + " more";
    throw InvalidArgument(
        "DDP: " + std::to_string(unused.size()) +
        " parameter(s) received no gradient in this backward: " + names +
        ". If parts of the model are skipped on purpose, set find_unused_parameters = true "
        "(config: distributed.find_unused_parameters); otherwise make every parameter "
        "contribute to the loss");
  }
  for (Bucket& b : buckets_) b.work->wait();
  // Which parameters got a gradient on any rank: globally unused ones keep no .grad, exactly as
  // in a single-process run where they were never touched.
  std::vector<float> used;
  if (!local_used_.empty()) {
    Tensor any = Tensor::from_vector(local_used_, {static_cast<std::int64_t>(local_used_.size())},
                                     group_->device());
    group_->all_reduce(any, {.op = dist::ReduceOp::MAX})->wait();
    used = any.to_vector();
  }
  for (std::size_t k = 0; k < variables_.size(); ++k) {
    Variable& v = variables_[k];
    if (!used.empty() && used[k] == 0.0f) continue;
    Tensor view = bucket_view(v);
    Tensor grad = v.param.grad();
    if (options_.gradient_as_bucket_view) {
      if (!detail::same_view(grad, view)) v.param.set_grad(view);
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      v.param.set_grad(view.clone());
    }
  }
}

void Reducer::wait_all() noexcept {
  for (Bucket& b : buckets_) {
    if (!b.work) continue;
    try {
      b.work->wait();
    } catch (const std::exception& e) {
      spdlog::debug("ddp: discarding a failed bucket all-reduce: {}", e.what());
    }
    b.work.reset();
  }
}

std::vector<BucketTrace> Reducer::trace() const {
  std::vector<BucketTrace> out;
  for (const Bucket& b : buckets_) out.push_back(b.trace);
  return out;
}

}  // namespace genesis::parallel
