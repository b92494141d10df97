// Per-rank memory of each strategy, estimated from the parameter count before anything is
// built, and the choice `strategy = "auto"` makes from it: the strategy with the least
// communication whose model state fits the budget with headroom. The yardstick is the ZeRO
// paper's accounting, in fp32 here (training keeps f32 parameters, gradients and state): with
// Psi parameters, N ranks and K optimizer-state bytes per parameter (Adam: 8), DDP holds
// (4 + 4 + K) Psi bytes, stage 1 (4 + 4) Psi + K Psi / N, stage 2 4 Psi + (4 + K) Psi / N,
// stage 3 (4 + 4 + K) Psi / N. Activations are not counted; the headroom is for them.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace genesis::parallel {

struct StrategyEstimate {
  std::string name;
  std::int64_t parameter_bytes = 0;
  std::int64_t gradient_bytes = 0;
  std::int64_t optimizer_bytes = 0;
  double communication = 0;  // bytes moved per step per parameter byte (ring algorithms)
  bool available = true;     // false: does not apply at this world size (hsdp on one node)
  std::int64_t offloaded_bytes = 0;  // of total(), what offloading keeps in host memory
  std::int64_t total() const { return parameter_bytes + gradient_bytes + optimizer_bytes; }
  std::int64_t on_device() const { return total() - offloaded_bytes; }
};

struct MemoryPlanInputs {
  std::int64_t num_parameters = 0;
  // zero3/hsdp: of those, the ones the persistence threshold keeps gathered (whole on every rank).
  std::int64_t persistent_parameters = 0;
  // A frozen model held beside the trained one under the same sharding (DPO's reference): its
  // parameters count, it has no gradients or optimizer state.
  std::int64_t frozen_parameters = 0;
  int world_size = 1;
  int local_world_size = 1;        // ranks per node: hsdp's default shard group
  int hsdp_shard_size = 0;         // 0: local_world_size
  double optimizer_bytes_per_parameter = 8;  // adam/adamw 8, sgd with momentum 4, plain sgd 0
  bool gradient_as_bucket_view = false;      // ddp keeps one gradient copy instead of two
  // The ZeRO stages' optimizer state (offload_optimizer), and for zero3/hsdp with offload_param
  // the shards and their gradients too, in host memory; on a GPU auto weighs what stays.
  bool offload_optimizer = false;
  bool offload_param = false;
  double budget_bytes = 0;         // 0: detect (the GPU's memory, or host memory / local ranks)
  double device_memory_bytes = 0;  // a GPU run: the rank's GPU memory; 0 on the CPU
  std::string device_name;         // that GPU, for the budget's description ("cuda:0")
  double headroom = 0.8;           // a strategy fits when its total <= headroom * budget
};

struct MemoryPlan {
  MemoryPlanInputs inputs;
  double budget_bytes = 0;
  std::string budget_source;  // "distributed.memory_budget_gb", "host memory / 2 ranks", ...
  std::vector<StrategyEstimate> estimates;  // ddp, zero1, zero2, zero3, hsdp
  std::string chosen;                       // what auto picks
  std::string reason;                       // one line: why
  const StrategyEstimate& estimate(const std::string& name) const;
};

MemoryPlan plan_memory(const MemoryPlanInputs& inputs);

// The table `genesis train --dry-run` prints: one row per strategy with parameters, gradients,
// optimizer state and total per rank, a mark on `used` (the strategy the run would train with:
// auto's choice, or the one the config names), and auto's choice with its reason.
void print_memory_plan(const MemoryPlan& plan, const std::string& used, std::ostream& out);


}  // namespace genesis::parallel
