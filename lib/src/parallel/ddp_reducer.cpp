// DDP's bucket policy: buckets laid out flat, each all-reduced, the averages copied back (the why
// is in ddp_reducer.hpp and bucket_engine.hpp).
#include "ddp_reducer.hpp"
#include "flat_params.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "genesis/autograd/grad_destination.hpp"
#include "genesis/core/error.hpp"

namespace genesis::parallel {

using Reducer = DistributedDataParallel::Reducer;

Reducer::Reducer(std::shared_ptr<nn::Module> module, std::shared_ptr<dist::ProcessGroup> group,
                 const DDPOptions& options)
    : group_(std::move(group)), options_(options) {
  std::vector<Tensor> params;
  for (auto& [name, p] : module->named_parameters())
    if (p.requires_grad()) {
      params.push_back(p);
      names_.push_back(name);
    }
  GENESIS_CHECK(!params.empty(), InvalidArgument,
                "DistributedDataParallel: the module has no parameter that requires grad");
  auto assignment = detail::assign_buckets(params, options_.first_bucket_cap_mb,
                                           options_.bucket_cap_mb);
  offsets_.resize(params.size());
  for (const auto& variables : assignment) {
    Bucket b;
    for (std::size_t k : variables) {
      offsets_[k] = b.trace.numel;
      b.trace.numel += params[k].numel();
      b.trace.parameters.push_back(names_[k]);
    }
    // In the group's shared memory where it has some: the all-reduce then works in place.
    const Tensor& first = params[variables.front()];
    b.flat = group_->zeros_shared_on(first.device(), b.trace.numel, first.dtype());
    buckets_.push_back(std::move(b));
  }
  if (options_.find_unused_parameters) local_used_.assign(params.size(), 0.0f);
  engine_ = std::make_unique<detail::BucketEngine>("DDP", std::move(params),
                                                   std::move(assignment), *this);
  spdlog::debug("ddp: {} parameters in {} buckets", names_.size(), buckets_.size());
}

Reducer::~Reducer() { engine_.reset(); }

Tensor Reducer::bucket_view(std::size_t variable) const {
  const Tensor& flat = buckets_[engine_->bucket_of(variable)].flat;
  const Tensor& param = engine_->param(variable);
  return make_view(flat, param.shape(), contiguous_strides(param.shape()),
                   flat.offset() + offsets_[variable]);
}

void Reducer::arm() {
  engine_->arm();
  std::fill(local_used_.begin(), local_used_.end(), 0.0f);
  // .grad views the bucket anyway: a backward that computes a gradient may write it there.
  if (options_.gradient_as_bucket_view)
    for (std::size_t k = 0; k < engine_->num_variables(); ++k)
      autograd::offer_grad_destination(engine_->param(k), bucket_view(k));
}

void Reducer::disarm() {
  engine_->disarm();
  withdraw_destinations();
}

void Reducer::withdraw_destinations() {
  if (options_.gradient_as_bucket_view)
    for (std::size_t k = 0; k < engine_->num_variables(); ++k)
      autograd::withdraw_grad_destination(engine_->param(k));
}

void Reducer::take_gradient(std::size_t variable, bool armed) {
  if (!armed) return;  // no_sync or eval: the gradient accumulates in .grad
  Tensor param = engine_->param(variable);
  Tensor grad = param.grad();
  Tensor view = bucket_view(variable);
  if (!detail::same_view(grad, view)) {
    view.copy_(grad);
    if (options_.gradient_as_bucket_view) param.set_grad(view);
  }
  if (!local_used_.empty()) local_used_[variable] = 1.0f;
}

void Reducer::missing_gradients(const std::vector<std::size_t>& variables) {
  if (options_.find_unused_parameters) {
    for (std::size_t k : variables) bucket_view(k).zero_();  // another rank may have used it
    return;
  }
  std::string names;
  for (std::size_t i = 0; i < variables.size() && i < 5; ++i)
    names += (i ? ", " : "") + names_[variables[i]];
  if (variables.size() > 5) names += " and " + std::to_string(variables.size() - 5) + " more";
  throw InvalidArgument(
      "DDP: " + std::to_string(variables.size()) +
      " parameter(s) received no gradient in this backward: " + names +
      ". If parts of the model are skipped on purpose, set find_unused_parameters = true "
      "(config: distributed.find_unused_parameters); otherwise make every parameter "
      "contribute to the loss");
}

std::shared_ptr<dist::Work> Reducer::launch(std::size_t bucket, bool waited_at_once) {
  Bucket& b = buckets_[bucket];
  b.trace.grads_ready_at_launch = engine_->grads_ready();
  b.trace.launched = std::chrono::steady_clock::now();
  const auto op = options_.average ? dist::ReduceOp::AVG : dist::ReduceOp::SUM;
  return group_->all_reduce(b.flat, {.op = op, .caller_waits = waited_at_once});
}

void Reducer::finish() {
  withdraw_destinations();
  // Which parameters got a gradient on any rank: globally unused ones keep no .grad, exactly as
  // in a single-process run where they were never touched.
  std::vector<float> used;
  if (!local_used_.empty()) {
    Tensor any = Tensor::from_vector(local_used_, {static_cast<std::int64_t>(local_used_.size())},
                                     group_->device());
    group_->all_reduce(any, {.op = dist::ReduceOp::MAX})->wait();
    used = any.to_vector();
  }
  for (std::size_t k = 0; k < engine_->num_variables(); ++k) {
    if (!used.empty() && used[k] == 0.0f) continue;
    Tensor param = engine_->param(k);
    Tensor view = bucket_view(k);
    Tensor grad = param.grad();
    if (options_.gradient_as_bucket_view) {
      if (!detail::same_view(grad, view)) param.set_grad(view);
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      param.set_grad(view.clone());
    }
  }
}

std::vector<BucketTrace> Reducer::trace() const {
  std::vector<BucketTrace> out;
  for (const Bucket& b : buckets_) out.push_back(b.trace);
  return out;
}

}  // namespace genesis::parallel
