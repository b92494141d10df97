// The trainer's place in a job: which rank it is, the process group its strategy reduces over
// (Gloo for a CPU run, NCCL for a GPU run), and the few cross-rank sums the loop needs for
// metrics. A job under a launcher (WORLD_SIZE set) joins through init_process_group("env://");
// a lone process gets a one-rank group and never touches the network. Not here: what is reduced
// for gradients (parallel/).
#pragma once

#include <memory>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/dist/process_group.hpp"

namespace genesis::train {

class Job {
 public:
  // `device` is where the rank's tensors live: it decides the backend (auto: nccl on a GPU;
  // on the CPU shared memory within a host, gloo across hosts) and refuses a backend that cannot
  // reduce tensors there.
  Job(const DistributedConfig& config, Device device);
  ~Job();  // tears down the default group if this Job created it
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  int rank() const { return group_->rank(); }
  int world_size() const { return group_->size(); }
  bool is_main() const { return rank() == 0; }
  const std::shared_ptr<dist::ProcessGroup>& group() const { return group_; }
  std::string backend() const { return group_->backend_name(); }

  // values[i] becomes the sum over ranks of values[i] (one all-reduce; f32 on the wire, enough
  // for loss sums and counts below 2^24).
  void sum(std::vector<double>& values) const;
  // Every rank's value, indexed by rank.
  std::vector<double> gather(double value) const;

 private:
  Device device_;
  std::shared_ptr<dist::ProcessGroup> group_;
  bool owns_default_group_ = false;
};

}  // namespace genesis::train
