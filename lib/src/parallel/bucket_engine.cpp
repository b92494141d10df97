// Bucket assignment, the grad-ready hook, in-order launching and the end of backward of the
// gradient-bucket engine (the why is in bucket_engine.hpp).
#include "bucket_engine.hpp"

#include <spdlog/spdlog.h>

#include "genesis/autograd/engine.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/trace.hpp"

namespace genesis::parallel::detail {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double bytes_of(const Tensor& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype()));
}

}  // namespace

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<Tensor>& params,
                                                     double first_cap_mb, double cap_mb) {
  GENESIS_CHECK(first_cap_mb > 0 && cap_mb > 0, InvalidArgument,
                "bucket_cap_mb and first_bucket_cap_mb must be positive");
  std::vector<std::vector<std::size_t>> buckets;
  double bytes = 0;
  const auto cap_of = [&](std::size_t bucket) {
    return (bucket == 0 ? first_cap_mb : cap_mb) * kMiB;
  };
  for (std::size_t k = params.size(); k-- > 0;) {
    const Tensor& p = params[k];
    bool open_new = buckets.empty();
    if (!open_new) {
      const Tensor& first = params[buckets.back().front()];
      // A parameter over the cap opens a bucket of its own: added to smaller ones it would only
      // hold them back, and alone its gradient can be the bucket's buffer (ZeRO-2).
      open_new = bytes >= cap_of(buckets.size() - 1) || bytes_of(p) >= cap_of(buckets.size()) ||
                 first.dtype() != p.dtype() || first.device() != p.device();
    }
    if (open_new) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(k);
    bytes += bytes_of(p);
  }
  return buckets;
}

BucketEngine::BucketEngine(std::string owner, std::vector<Tensor> params,
                           std::vector<std::vector<std::size_t>> buckets, BucketPolicy& policy)
    : owner_(std::move(owner)), policy_(policy) {
  for (Tensor& p : params) variables_.push_back({std::move(p)});
  std::vector<bool> placed(variables_.size(), false);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    for (std::size_t v : buckets[b]) {
      GENESIS_CHECK(v < variables_.size() && !placed[v], InvalidArgument,
                    owner_ + ": a parameter is in no bucket or in two");
      placed[v] = true;
      variables_[v].bucket = b;
    }
    buckets_.push_back({std::move(buckets[b]), 0, nullptr, {}});
  }
  for (bool p : placed)
    GENESIS_CHECK(p, InvalidArgument, owner_ + ": a parameter is in no bucket or in two");
  for (std::size_t k = 0; k < variables_.size(); ++k)
    variables_[k].hook_id =
        variables_[k].param.register_grad_ready_hook([this, k](const Tensor&) { on_grad_ready(k); });
}

BucketEngine::~BucketEngine() {
  settle();
  for (Variable& v : variables_) v.param.remove_grad_ready_hook(v.hook_id);
}

void BucketEngine::arm() {
  // A backward that failed half-way may have left works in flight; they must finish before the
  // buckets are written again.
  settle();
  for (Variable& v : variables_) v.ready = false;
  for (Bucket& b : buckets_) b.pending = b.variables.size();
  next_launch_ = 0;
  next_reap_ = 0;
  grads_ready_ = 0;
  finish_queued_ = false;
  armed_ = true;
}

void BucketEngine::on_grad_ready(std::size_t variable) {
  if (armed_)
    GENESIS_CHECK(!variables_[variable].ready, InvalidArgument,
                  owner_ + ": a parameter got its gradient twice in one backward; call forward "
                           "again before each backward (retain_graph-style double backward is "
                           "not supported)");
  policy_.take_gradient(variable, armed_);
  if (!armed_) return;  // no_sync, an accumulation window, or eval
  if (!finish_queued_) {
    autograd::queue_callback([this] { finish_backward(); });
    autograd::on_backward_failure([this] { settle(); });
    finish_queued_ = true;
  }
  mark_ready(variable);
}

void BucketEngine::mark_ready(std::size_t variable) {
  Variable& v = variables_[variable];
  v.ready = true;
  ++grads_ready_;
  if (--buckets_[v.bucket].pending == 0) {
    wait_for_room();
    policy_.bucket_complete(v.bucket);
  }
  launch_ready();
  reap_finished();
}

void BucketEngine::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    wait_for_room();
    const std::size_t b = next_launch_++;
    buckets_[b].launched = std::chrono::steady_clock::now();
    buckets_[b].work = policy_.launch(b, b + 1 == buckets_.size());
  }
}

// Only buckets already launched are waited for: every rank launches them, so they finish.
void BucketEngine::wait_for_room() {
  while (next_launch_ > next_reap_ && next_launch_ - next_reap_ >= policy_.max_in_flight())
    reap_next();
}

void BucketEngine::reap_next() {
  std::shared_ptr<dist::Work> work = std::move(buckets_[next_reap_].work);
  work->wait();  // rethrows a failed collective's error
  if (trace::enabled()) {
    const std::string name = "bucket " + std::to_string(next_reap_);
    trace::record({name + " " + owner_, "bucket", buckets_[next_reap_].launched,
                   std::chrono::steady_clock::now(), trace::lane_named(name)});
  }
  policy_.bucket_reduced(next_reap_++);
}

// Buckets whose collective has finished, in launch order: the policy frees what it needed for them
// now rather than at the end of backward, so they do not pile up while backward goes on.
void BucketEngine::reap_finished() {
  while (next_reap_ < next_launch_ && buckets_[next_reap_].work->is_completed()) reap_next();
}

void BucketEngine::finish_backward() {
  armed_ = false;
  std::vector<std::size_t> missing;
  for (std::size_t k = 0; k < variables_.size(); ++k)
    if (!variables_[k].ready) missing.push_back(k);
  if (!missing.empty()) {
    policy_.missing_gradients(missing);  // a refusal throws: on_backward_failure settles
    for (std::size_t k : missing) mark_ready(k);
  }
  while (next_reap_ < buckets_.size()) reap_next();
  policy_.finish();
}

void settle_work(std::shared_ptr<dist::Work>& work, const std::string& owner) noexcept {
  if (!work) return;
  try {
    work->wait();
  } catch (const std::exception& e) {
    spdlog::debug("{}: discarding a failed {}: {}", owner, work->description(), e.what());
  }
  work.reset();
}

void BucketEngine::settle() noexcept {
  for (Bucket& b : buckets_) settle_work(b.work, owner_);
  policy_.settle();
}

}  // namespace genesis::parallel::detail
