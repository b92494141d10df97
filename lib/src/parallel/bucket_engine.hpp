// The ordered-bucket engine every data-parallel strategy reduces its gradients with (PyTorch
// c10d's reducer.hpp is the model). DDP all-reduces its buckets, ZeRO-1/2 reduce-scatter them
// into each rank's shard, ZeRO-3 and HSDP reduce-scatter each unit (then all-reduce over the
// replicas): what differs is a small BucketPolicy; the engine owns the rest.
//
// Bucket order. Parameters are assigned to buckets in *reverse registration order* (assign_buckets),
// because backward produces gradients roughly in reverse of the forward's use, which for the
// modules here is registration order: the output layer's gradients are ready first, so the bucket
// that holds them fills first and its collective starts while backward is still working on the
// input layers. The first bucket is capped smaller (first_bucket_cap_mb) so communication starts
// early; dtype and device changes open a new bucket (a bucket is one flat buffer), and a parameter
// larger than the cap has a bucket of its own.
//
// Same order on every rank. A process group runs collectives in submission order and matches the
// k-th op of one rank with the k-th op of every other, so every rank must submit the buckets'
// collectives in the same order even when its gradients become ready in a different order (a
// branch taken on one rank only, find_unused_parameters). Buckets are therefore launched strictly
// by index: bucket i goes to the communication thread only after buckets 0..i-1 did, and waits
// (complete) until then. Bucket assignment depends only on parameter shapes, which every strategy
// checks are equal on every rank.
//
// One backward. arm() before it (a synchronised training forward); each parameter's grad-ready
// hook hands the gradient to the policy and counts it; the autograd engine's end-of-backward
// callback gives parameters without a gradient to the policy, launches what is left, waits for
// every bucket in order and lets the policy finish. A bucket whose collective is done is handed
// back to the policy (in order) as soon as backward notices, so its buffers go early. A backward
// that throws settles every collective in flight before the exception leaves backward().
//
// Traced (core/trace.hpp), each bucket is a span from its launch to its hand-back, on a lane of
// its own: buckets in flight overlap each other and backward.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "genesis/dist/work.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::parallel::detail {

// Buckets of `params` (indices), in launch order: reverse registration order, a new bucket once
// the current one reaches its cap in MiB (the first bucket's is first_cap_mb) or when dtype or
// device change; a parameter over the cap is alone in its bucket. Every bucket holds at least one
// parameter.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<Tensor>& params,
                                                     double first_cap_mb, double cap_mb);

// Waits for `work` if there is one and resets it; a failure is logged (naming `owner`) and dropped:
// for destructors and error paths, where the error that matters was already raised.
void settle_work(std::shared_ptr<dist::Work>& work, const std::string& owner) noexcept;

// What a strategy does with its buckets. Every method runs on the training thread, inside
// backward. `variable` indexes the engine's params; `bucket` its buckets.
class BucketPolicy {
 public:
  virtual ~BucketPolicy() = default;
  // Every grad-ready hook, armed or not (gradient accumulation without a reduction): moves the
  // parameter's gradient where its bucket's collective reads it, or leaves it in .grad.
  virtual void take_gradient(std::size_t variable, bool armed) = 0;
  // At the end of an armed backward, the parameters that got no gradient in it; they contribute
  // zeros (a branch another rank took), or the policy throws to refuse them.
  virtual void missing_gradients(const std::vector<std::size_t>& variables) = 0;
  // Bucket's gradients are all in (any order: before its turn to launch comes).
  virtual void bucket_complete(std::size_t /*bucket*/) {}
  // Bucket's turn: starts its collective and returns it. `waited_at_once`: the last bucket, which
  // fills as backward ends and is then waited for (dist's caller_waits: the group may run it on
  // this thread).
  virtual std::shared_ptr<dist::Work> launch(std::size_t bucket, bool waited_at_once) = 0;
  // Bucket's collective finished (called in launch order: during backward once it is done, at
  // the latest at its end).
  virtual void bucket_reduced(std::size_t /*bucket*/) {}
  // Every bucket is reduced: the last step of backward.
  virtual void finish() {}
  // Waits for collectives the policy started itself (HSDP's replica all-reduce), never throws.
  virtual void settle() noexcept {}
  // How many buckets may be complete or in flight before the engine waits for the oldest: a
  // policy whose buckets hold a buffer until reduced bounds them (DeepSpeed's stage 2 likewise
  // double-buffers its reduction bucket), else backward piles them up faster than they drain.
  virtual std::size_t max_in_flight() const { return SIZE_MAX; }
};

class BucketEngine {
 public:
  // Registers a grad-ready hook on each of `params`; `buckets` (indices into params, in launch
  // order) must hold every parameter once. `owner` names the strategy in errors.
  BucketEngine(std::string owner, std::vector<Tensor> params,
               std::vector<std::vector<std::size_t>> buckets, BucketPolicy& policy);
  ~BucketEngine();  // settles, removes the hooks
  BucketEngine(const BucketEngine&) = delete;
  BucketEngine& operator=(const BucketEngine&) = delete;

  // The next backward reduces. Settles what an earlier backward that failed left in flight.
  void arm();
  // The next backward only accumulates (the policy still takes each gradient, unarmed).
  void disarm() { armed_ = false; }
  bool armed() const { return armed_; }
  // Waits for every collective in flight, discarding failures; never throws.
  void settle() noexcept;

  std::size_t num_buckets() const { return buckets_.size(); }
  const std::vector<std::size_t>& bucket(std::size_t b) const { return buckets_[b].variables; }
  std::size_t bucket_of(std::size_t variable) const { return variables_[variable].bucket; }
  const Tensor& param(std::size_t variable) const { return variables_[variable].param; }
  std::size_t num_variables() const { return variables_.size(); }
  // Gradients counted so far in this backward (how far backward was when a bucket launched).
  std::int64_t grads_ready() const { return grads_ready_; }

 private:
  struct Variable {
    Tensor param;
    std::size_t bucket = 0;
    bool ready = false;
    int hook_id = -1;
  };
  struct Bucket {
    std::vector<std::size_t> variables;
    std::size_t pending = 0;
    std::shared_ptr<dist::Work> work;
    std::chrono::steady_clock::time_point launched;  // for its trace span
  };

  void on_grad_ready(std::size_t variable);
  void mark_ready(std::size_t variable);
  void launch_ready();
  void wait_for_room();
  void reap_next();
  void reap_finished();
  void finish_backward();

  std::string owner_;
  BucketPolicy& policy_;
  std::vector<Variable> variables_;
  std::vector<Bucket> buckets_;
  bool armed_ = false;
  bool finish_queued_ = false;
  std::size_t next_launch_ = 0;
  std::size_t next_reap_ = 0;  // buckets before it are reduced and handed back to the policy
  std::int64_t grads_ready_ = 0;
};

}  // namespace genesis::parallel::detail
