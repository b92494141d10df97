// The end of a run as the user sees it: summary.json (TrainResult's figures, every figure of the
// last evaluation under "eval_", and what the run was and held), and the final report on stdout
// (the totals, then a few held-out prompts with what the model answered).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/parallel/strategy.hpp"
#include "genesis/train/trainer.hpp"

namespace genesis::train {

// What summary.json says beyond TrainResult.
struct RunFacts {
  std::string name, model, device, backend, strategy, mixed_precision, optimizer, lr_scheduler;
  std::int64_t num_parameters = 0;
  std::int64_t effective_batch_size = 0;  // examples per optimizer step over all ranks
  std::int64_t timed_steps = 0;           // steps after warm-up behind the rates
  int world_size = 1;
  int threads = 1;
  double flops_per_token = 0;
  double train_s = 0;
  // Seconds checkpoint saves held training up (the slowest rank's), over this many saves.
  double checkpoint_blocked_s = 0;
  std::int64_t checkpoint_saves = 0;
  std::vector<double> peak_rss_mb;  // per rank
  std::vector<double> peak_host_tensor_mb;  // per rank: host memory in tensors at its peak
  double estimate_mb = 0;  // the memory plan's model state per rank for the strategy that ran
  parallel::MemoryReport memory;    // this rank's model state
  // GPU runs (CPU runs leave them empty): the device's name and each rank's peak memory in
  // tensors and held, in MiB.
  std::string device_name;
  std::vector<double> peak_device_mb, peak_reserved_mb;
  std::string blas_kernels;  // CPU runs: the OpenBLAS kernel set the matmuls ran on
  nlohmann::json eval;                // the last evaluation's figures by name
  nlohmann::json train;               // the objective's figures on the last logged step, by name
  nlohmann::json world_size_changes;  // ResumePlan's; empty: none
  nlohmann::json loss_scale;          // fp16: {final, skipped_steps}; null otherwise
  nlohmann::json time_breakdown;      // wall_clock_breakdown: seconds by phase, rank 0's and per_rank; or null
};

// Writes result.summary_path.
void write_summary(const TrainResult& result, const RunFacts& facts);

// "zero3 on 2 ranks peaked at 1650 MiB in tensors per rank (2166 MiB resident), 1.75x the 944.0
// MiB estimated for its state":
// what the run's summary.json says of memory, if the run directory holds one (--dry-run).
std::optional<std::string> last_run_memory(const std::filesystem::path& run_dir);

// "done: 600 steps in 3:12; final loss ..., 24000 tok/s", the SFT lines, and "summary: PATH".
void print_final_report(const TrainResult& result, const char* rate_unit, std::ostream& out);

}  // namespace genesis::train
