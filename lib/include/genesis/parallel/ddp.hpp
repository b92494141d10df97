// DistributedDataParallel: wraps a module so that backward also averages its gradients across
// the ranks of a process group, as torch.nn.parallel.DistributedDataParallel does. Gradients are
// packed into buckets that start their all-reduce on the group's communication thread as soon as
// their last gradient is ready, so communication overlaps the rest of backward; backward()
// returns once every bucket is reduced and every .grad holds the average. Not here: the sharded
// strategies (strategy.hpp's zero1/zero2/zero3/hsdp, on the same bucket engine), the optimizer
// (plain optim::*, stepping the full parameters).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "genesis/dist/process_group.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::parallel {

struct DDPOptions {
  double bucket_cap_mb = 25;             // bucket size; a bucket holds at least one parameter
  double first_bucket_cap_mb = 1;        // smaller, so the first all-reduce starts early (PyTorch)
  bool find_unused_parameters = false;   // tolerate parameters that get no gradient
  bool gradient_as_bucket_view = false;  // .grad views its bucket: no copy back after reducing
  bool broadcast_buffers = true;         // rank 0's buffers to every rank before each forward
  bool average = true;                   // divide the summed gradients by the world size
};

// One bucket's part in the last synchronised backward, for tests and traces.
struct BucketTrace {
  std::vector<std::string> parameters;  // names, in the bucket's (reverse registration) order
  std::int64_t numel = 0;
  // How many of the model's gradients were ready when this bucket's all-reduce was handed to the
  // communication thread: fewer than all of them means it overlapped the rest of backward.
  std::int64_t grads_ready_at_launch = 0;
  std::chrono::steady_clock::time_point launched;
};

class DistributedDataParallel : public nn::Module {
 public:
  // Broadcasts rank 0's parameters and buffers to every rank after checking that every rank has
  // the same parameter names' shapes: a mismatch fails on every rank naming the parameter.
  DistributedDataParallel(std::shared_ptr<nn::Module> module,
                          std::shared_ptr<dist::ProcessGroup> group, DDPOptions options = {});
  // The default process group (genesis::dist::init_process_group).
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {});
  ~DistributedDataParallel() override;
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The wrapped module's forward; in training with grad enabled and sync on, arms the reducer so
  // the next backward through the output synchronises gradients.
  Tensor forward(const Tensor& x) override;

  // While the guard lives, forward/backward only accumulate local gradients (gradient
  // accumulation); the first synchronised backward after it reduces the accumulated sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  nn::Module& module() { return *module_; }
  std::shared_ptr<nn::Module> module_ptr() const { return module_; }
  const dist::ProcessGroup& group() const { return *group_; }
  const DDPOptions& options() const { return options_; }
  std::vector<BucketTrace> last_backward_trace() const;
  std::size_t num_buckets() const;

  struct Reducer;

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<dist::ProcessGroup> group_;
  DDPOptions options_;
  std::unique_ptr<Reducer> reducer_;
  bool require_sync_ = true;
};

}  // namespace genesis::parallel

namespace genesis::dist {
// Seed 000 spells it genesis.distributed.DistributedDataParallel.
using parallel::DDPOptions;
using parallel::DistributedDataParallel;
}  // namespace genesis::dist
