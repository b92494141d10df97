// The memory estimates behind strategy = "auto" and `train --dry-run` (see memory_plan.hpp).
#include "genesis/core/format.hpp"
#include "genesis/parallel/memory_plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

#include "genesis/core/error.hpp"

namespace genesis::parallel {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::int64_t ceil_div(double bytes, int n) {
  return static_cast<std::int64_t>((bytes + n - 1) / n);
}

// The "on host" column: what offloading keeps in host memory, "-" where it does not apply.
std::string host_column(const StrategyEstimate& e) {
  char cell[32];
  std::snprintf(cell, sizeof cell, " %12s",
                e.offloaded_bytes > 0 ? format_bytes(static_cast<double>(e.offloaded_bytes)).c_str()
                                      : "-");
  return cell;
}

}  // namespace

const StrategyEstimate& MemoryPlan::estimate(const std::string& name) const {
  for (const auto& e : estimates)
    if (e.name == name) return e;
  throw InvalidArgument("no memory estimate for strategy '" + name + "'");
}

namespace {

// What `strategy = "auto"` picks, and one line saying why.
void choose_strategy(MemoryPlan& plan) {
  const MemoryPlanInputs& in = plan.inputs;
  // Least communication first; among equals the one that shards least (less to coordinate).
  const char* order[] = {"ddp", "zero1", "zero2", "hsdp", "zero3"};
  const double limit = in.headroom * plan.budget_bytes;
  for (const char* name : order) {
    const StrategyEstimate& e = plan.estimate(name);
    const auto weighed = in.device_memory_bytes > 0 ? e.on_device() : e.total();
    // Offloading asks for a strategy that can do it: not ddp, and for parameters zero3 or hsdp.
    const std::string_view n = name;
    if ((in.offload_optimizer && n == "ddp") ||
        (in.offload_param && n != "zero3" && n != "hsdp"))
      continue;
    if (!e.available || static_cast<double>(weighed) > limit) continue;
    plan.chosen = name;
    break;
  }
  const StrategyEstimate& ddp = plan.estimate("ddp");
  char line[256];
  if (plan.chosen == "ddp") {
    std::snprintf(line, sizeof line, "ddp's %s per rank fits %.0f%% of the %s budget (%s)",
                  format_bytes(static_cast<double>(ddp.total())).c_str(), in.headroom * 100,
                  format_bytes(plan.budget_bytes).c_str(), plan.budget_source.c_str());
  } else if (!plan.chosen.empty() && (in.offload_optimizer || in.offload_param)) {
    std::snprintf(line, sizeof line, "%s asks for %s; %s needs %s per rank",
                  in.offload_param ? "offload_param" : "offload_optimizer",
                  in.offload_param ? "zero3 or hsdp" : "a ZeRO stage", plan.chosen.c_str(),
                  format_bytes(static_cast<double>(plan.estimate(plan.chosen).total())).c_str());
  } else if (!plan.chosen.empty()) {
    std::snprintf(line, sizeof line,
                  "ddp needs %s per rank, over %.0f%% of the %s budget (%s); %s needs %s",
                  format_bytes(static_cast<double>(ddp.total())).c_str(), in.headroom * 100,
                  format_bytes(plan.budget_bytes).c_str(), plan.budget_source.c_str(),
                  plan.chosen.c_str(),
                  format_bytes(static_cast<double>(plan.estimate(plan.chosen).total())).c_str());
  } else {
    // Nothing fits: the smallest one still has the best chance; say so loudly.
    plan.chosen = "zero3";
    std::snprintf(line, sizeof line,
                  "no strategy fits %.0f%% of the %s budget (%s); zero3 needs the least: %s",
                  in.headroom * 100, format_bytes(plan.budget_bytes).c_str(),
                  plan.budget_source.c_str(),
                  format_bytes(static_cast<double>(plan.estimate("zero3").total())).c_str());
  }
  plan.reason = line;
}

}  // namespace

MemoryPlan plan_memory(const MemoryPlanInputs& in) {
  GENESIS_CHECK(in.world_size >= 1 && in.local_world_size >= 1, InvalidArgument,
                "plan_memory: world sizes must be >= 1");
  MemoryPlan plan;
  plan.inputs = in;
  const double psi = static_cast<double>(in.num_parameters) * 4.0;  // f32 bytes
  // Parameter bytes held: the frozen model's (no gradients, no optimizer state) beside them.
  const double held = psi + static_cast<double>(in.frozen_parameters) * 4.0;
  const double opt = static_cast<double>(in.num_parameters) * in.optimizer_bytes_per_parameter;
  const int n = in.world_size;
  const auto whole = [](double b) { return static_cast<std::int64_t>(b); };

  // Communication per step in units of the parameter bytes: an all-reduce moves 2x (ring:
  // reduce-scatter + all-gather), stage 3 adds a second all-gather for backward (3x).
  plan.estimates.push_back({"ddp", whole(held), whole(psi * (in.gradient_as_bucket_view ? 1 : 2)),
                            whole(opt), 2.0, true});
  plan.estimates.push_back({"zero1", whole(held), whole(psi), ceil_div(opt, n), 2.0, true});
  plan.estimates.push_back({"zero2", whole(held), ceil_div(psi, n), ceil_div(opt, n), 2.0, true});
  // Persistent parameters are held whole besides their shard.
  const double kept = static_cast<double>(in.persistent_parameters) * 4.0;
  plan.estimates.push_back(
      {"zero3", ceil_div(held, n) + whole(kept), ceil_div(psi, n), ceil_div(opt, n), 3.0, true});
  const int shard = in.hsdp_shard_size > 0 ? in.hsdp_shard_size : in.local_world_size;
  StrategyEstimate hsdp{"hsdp", ceil_div(held, shard) + whole(kept), ceil_div(psi, shard),
                        ceil_div(opt, shard), 3.0, shard < n && n % shard == 0};
  plan.estimates.push_back(hsdp);
  for (StrategyEstimate& e : plan.estimates) {
    const bool fully_sharded = e.name == "zero3" || e.name == "hsdp";
    if (e.name != "ddp" && (in.offload_optimizer || (fully_sharded && in.offload_param)))
      e.offloaded_bytes = e.optimizer_bytes;
    if (fully_sharded && in.offload_param)
      e.offloaded_bytes += e.parameter_bytes - whole(kept) + e.gradient_bytes;  // the shards
  }

  if (in.budget_bytes > 0) {
    plan.budget_bytes = in.budget_bytes;
    plan.budget_source = "distributed.memory_budget_gb";
  } else if (in.device_memory_bytes > 0) {
    plan.budget_bytes = in.device_memory_bytes;
    plan.budget_source = in.device_name + " memory";
  } else {
    plan.budget_bytes = host_memory_bytes() / in.local_world_size;
    plan.budget_source = "host memory / " + std::to_string(in.local_world_size) +
                         (in.local_world_size == 1 ? " rank" : " ranks");
  }

  choose_strategy(plan);
  return plan;
}

void print_memory_plan(const MemoryPlan& plan, const std::string& used, std::ostream& out) {
  const auto& in = plan.inputs;
  char line[200];
  std::snprintf(line, sizeof line, "  per-rank model state (f32, %d %s; activations not counted):\n",
                in.world_size, in.world_size == 1 ? "rank" : "ranks");
  out << line;
  const bool offload = in.offload_optimizer || in.offload_param;
  std::snprintf(line, sizeof line, "    %-8s %12s %12s %12s %12s %6s%s\n", "strategy", "parameters",
                "gradients", "optimizer", "total", "comm", offload ? "      on host" : "");
  out << line;
  for (const auto& e : plan.estimates) {
    if (!e.available) {
      std::snprintf(line, sizeof line, "    %-8s %12s   (needs more ranks than one shard group)\n",
                    e.name.c_str(), "-");
    } else {
      std::snprintf(line, sizeof line, "  %s %-8s %12s %12s %12s %12s %5.0fx%s\n",
                    e.name == used ? "*" : " ", e.name.c_str(),
                    format_bytes(static_cast<double>(e.parameter_bytes)).c_str(),
                    format_bytes(static_cast<double>(e.gradient_bytes)).c_str(),
                    format_bytes(static_cast<double>(e.optimizer_bytes)).c_str(),
                    format_bytes(static_cast<double>(e.total())).c_str(), e.communication,
                    offload ? host_column(e).c_str() : "");
    }
    out << line;
  }
  out << (used == plan.chosen ? "  auto: " : "  auto would pick: ") << plan.chosen << " ("
      << plan.reason << ")\n";
}

}  // namespace genesis::parallel
