// The gradient reducer behind DistributedDataParallel (PyTorch c10d's reducer.hpp is the model).
//
// Bucket order. Parameters are assigned to buckets in *reverse registration order*, because
// backward produces gradients roughly in reverse of the forward's use, which for the modules
// here is registration order: the output layer's gradients are ready first, so the bucket that
// holds them fills first and its all-reduce starts while backward is still working on the input
// layers. The first bucket is capped smaller (first_bucket_cap_mb) so communication starts early.
//
// Same order on every rank. A process group runs collectives in submission order and matches
// the k-th op of one rank with the k-th op of every other, so every rank must submit the bucket
// all-reduces in the same order even when its gradients become ready in a different order (a
// branch taken on one rank only, find_unused_parameters). Buckets are therefore launched strictly
// by index: bucket i goes to the communication thread only after buckets 0..i-1 did, and it
// waits (marked ready) until then. Bucket assignment depends only on parameter shapes, which the
// constructor checked are equal on every rank.
//
// A reducer is armed by a synchronised forward and runs in the grad-ready hooks of one backward;
// the autograd engine's end-of-backward callback waits for the last buckets and writes the
// averages back into .grad (or leaves .grad as a view into the bucket).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genesis/dist/process_group.hpp"
#include "genesis/parallel/ddp.hpp"

namespace genesis::parallel {

struct DistributedDataParallel::Reducer {
  struct Variable {
    Tensor param;
    std::string name;
    std::size_t bucket = 0;
    std::int64_t offset = 0;  // into the bucket's flat buffer, in elements
    bool ready = false;       // its gradient is in the bucket this backward
    int hook_id = -1;
  };
  struct Bucket {
    Tensor flat;                       // 1-D, every variable's gradient back to back
    std::vector<std::size_t> variables;  // indices into variables_, in bucket order
    std::size_t pending = 0;           // variables not yet ready this backward
    std::shared_ptr<dist::Work> work;  // the all-reduce in flight
    BucketTrace trace;
  };

  Reducer(std::shared_ptr<nn::Module> module, std::shared_ptr<dist::ProcessGroup> group,
          const DDPOptions& options);
  ~Reducer();

  // Called by a synchronised training forward: the next backward reduces.
  void arm();
  void disarm() { armed_ = false; }
  bool armed() const { return armed_; }
  std::vector<BucketTrace> trace() const;
  std::size_t num_buckets() const { return buckets_.size(); }

 private:
  void on_grad_ready(std::size_t index);
  void mark_ready(std::size_t index);
  void launch_ready_buckets();
  void finalize();
  void wait_all() noexcept;
  Tensor bucket_view(const Variable& v) const;

  std::shared_ptr<dist::ProcessGroup> group_;
  DDPOptions options_;
  std::vector<Variable> variables_;
  std::vector<Bucket> buckets_;
  // find_unused_parameters: 1 per variable that got a gradient here, kept on the host and
  // reduced (MAX) on the group's device at the end of backward.
  std::vector<float> local_used_;
  bool armed_ = false;
  bool finalize_queued_ = false;
  std::size_t next_launch_ = 0;
  std::int64_t grads_ready_ = 0;
};

}  // namespace genesis::parallel
