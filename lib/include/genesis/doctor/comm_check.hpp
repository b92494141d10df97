// `genesis doctor --comm`: a real all_reduce, broadcast, all_gather and barrier across the ranks
// of the job, each result checked exactly (inputs are small integers, so every sum is exact in
// f32) and timed (the median of several iterations of a small tensor). Every rank reports the
// same statuses: the failures each rank saw are summed over the group before anyone reports.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "genesis/dist/process_group.hpp"
#include "genesis/doctor/doctor.hpp"
#include "genesis/rendezvous/store.hpp"
#include "genesis/tensor/device.hpp"

namespace genesis::doctor {

struct CommOptions {
  std::string backend = "auto";                     // auto (gloo), gloo or nccl
  std::chrono::milliseconds timeout{60000};         // rendezvous and every collective
  int iterations = 20;                              // timed (and checked) runs of each op
  std::int64_t elements = 256;                      // f32 elements per rank: 1 KiB
};

// Runs the four checks on `group` with tensors on `device`; every rank of the group must call it.
// `store` (may be null) backs the barrier's check: each rank counts itself in before the barrier
// and reads the count after it. `local_failed` is whether this rank's local checks failed; the
// returned "ranks" row says how many ranks had one. A collective that throws ends the run: the ops
// after it are reported as not run, and no cross-rank tally happens (a peer may be gone).
std::vector<CheckResult> run_comm_checks(dist::ProcessGroup& group, rendezvous::Store* store,
                                         Device device, const CommOptions& options,
                                         bool local_failed);

struct CommOutcome {
  int rank = 0;
  int world_size = 1;
  std::vector<CheckResult> checks;  // as every rank sees them, plus the 1-rank warn when alone
};

// The job-wide form: init_process_group from the environment (env://) with options.backend and
// options.timeout, run_comm_checks on the default group (device cuda:LOCAL_RANK % GPUs for nccl),
// destroy the group. A failed rendezvous or backend becomes a failed "comm" row, not an error.
CommOutcome run_job_comm_checks(const CommOptions& options, bool local_failed,
                                const EnvLookup& env = {});

}  // namespace genesis::doctor
