// One run directory, one job. Rank 0 holds an exclusive flock on <run_dir>/.lock for the whole
// run, with who holds it written inside, so a second job started on the same directory (a run
// started twice, two srun tasks that each believe they are rank 0) is refused naming the holder
// instead of both writing checkpoints and metrics over each other. The kernel drops a flock when
// its process dies, so a crashed run leaves no stale lock behind.
#pragma once

#include <filesystem>

#include "genesis/core/unique_fd.hpp"

namespace genesis::train {

class RunLock {
 public:
  // Creates run_dir if needed and takes the lock; IoError naming the holder (pid, host, since
  // when, run id) when another process has it.
  explicit RunLock(const std::filesystem::path& run_dir);
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  UniqueFd fd_;  // closing it drops the flock
};

}  // namespace genesis::train
