// SLURM variables to the env contract, hostlist expansion, and the sbatch script. The hostlist
// parser covers what SLURM_JOB_NODELIST holds in practice (prefix[ranges],... with zero-padded
// ranges); `scontrol show hostnames` is preferred when present because it knows every form.
#include "genesis/launch/slurm.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "genesis/core/error.hpp"

namespace genesis::launch {
namespace {

// SLURM's numeric variables, read with the env contract's rules.
constexpr env::IntVar kProcId{"SLURM_PROCID", 0, env::kMaxCount};
constexpr env::IntVar kLocalId{"SLURM_LOCALID", 0, env::kMaxCount};
constexpr env::IntVar kNtasks{"SLURM_NTASKS", 1, env::kMaxCount};
constexpr env::IntVar kNodeId{"SLURM_NODEID", 0, env::kMaxCount};
constexpr env::IntVar kNnodes{"SLURM_NNODES", 1, env::kMaxCount};

int slurm_int(const EnvLookup& lookup, const env::IntVar& var, int fallback) {
  return static_cast<int>(env::read_int(var, lookup).value_or(fallback));
}

// Splits at the commas that are not inside brackets.
std::vector<std::string> split_top_level(const std::string& list) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      if (!current.empty()) items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) items.push_back(current);
  return items;
}

std::optional<std::string> run_scontrol_first_host(const std::string& list) {
  if (std::system("command -v scontrol >/dev/null 2>&1") != 0) return std::nullopt;
  const std::string command = "scontrol show hostnames " + shell_quote(list) + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return std::nullopt;
  char line[512] = {};
  if (fgets(line, sizeof line, pipe.get()) == nullptr) return std::nullopt;
  std::string host(line);
  while (!host.empty() && (host.back() == '\n' || host.back() == ' ')) host.pop_back();
  if (host.empty()) return std::nullopt;
  return host;
}

}  // namespace

std::optional<SlurmMapping> map_slurm_env(const EnvLookup& env) {
  if (env("RANK") || !env("SLURM_PROCID")) return std::nullopt;
  SlurmMapping mapping;
  mapping.rank = slurm_int(env, kProcId, 0);
  mapping.local_rank = slurm_int(env, kLocalId, 0);
  mapping.world_size = slurm_int(env, kNtasks, 1);
  mapping.node_rank = slurm_int(env, kNodeId, 0);
  const std::string nodelist = env("SLURM_JOB_NODELIST").value_or(env("SLURM_NODELIST").value_or(""));
  const int listed = nodelist.empty() ? 1 : static_cast<int>(expand_hostlist(nodelist).size());
  mapping.nnodes = slurm_int(env, kNnodes, listed);
  mapping.master_addr = nodelist.empty() ? "127.0.0.1" : first_host(nodelist);
  mapping.job_id = env("SLURM_JOB_ID").value_or("");
  return mapping;
}

void apply_slurm_layout(LaunchOptions& options, const SlurmMapping& slurm, const GivenLayoutFlags& given) {
  if (slurm.world_size != slurm.nnodes) return;
  if (!given.nnodes) options.nnodes = slurm.nnodes;
  if (!given.node_rank) options.node_rank = slurm.node_rank;
  if (!given.master_addr) options.master_addr = slurm.master_addr;
}

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const std::string& item : split_top_level(list)) {
    const auto open = item.find('[');
    if (open == std::string::npos) {
      hosts.push_back(item);
      continue;
    }
    const auto close = item.find(']', open);
    GENESIS_CHECK(close != std::string::npos, InvalidArgument, "malformed SLURM hostlist '" + list + "'");
    const std::string prefix = item.substr(0, open), suffix = item.substr(close + 1);
    for (const std::string& range : split_top_level(item.substr(open + 1, close - open - 1))) {
      const auto dash = range.find('-');
      const std::string low = range.substr(0, dash);
      const std::string high = dash == std::string::npos ? low : range.substr(dash + 1);
      int from = 0, to = 0;
      auto r1 = std::from_chars(low.data(), low.data() + low.size(), from);
      auto r2 = std::from_chars(high.data(), high.data() + high.size(), to);
      GENESIS_CHECK(!low.empty() && !high.empty() && r1.ec == std::errc() &&
                        r2.ec == std::errc() && r1.ptr == low.data() + low.size() &&
                        r2.ptr == high.data() + high.size() && from <= to,
                    InvalidArgument, "malformed range '" + range + "' in SLURM hostlist '" + list + "'");
      for (int n = from; n <= to; ++n) {
        std::string digits = std::to_string(n);
        if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
        hosts.push_back(prefix + digits + suffix);
      }
    }
  }
  return hosts;
}

std::string first_host(const std::string& list) {
  if (auto host = run_scontrol_first_host(list)) return *host;
  try {
    const auto hosts = expand_hostlist(list);
    GENESIS_CHECK(!hosts.empty(), InvalidArgument, "it is empty");
    return hosts.front();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("cannot find the first host of the SLURM node list '" + list +
                          "': scontrol is not on PATH, and genesis's own reading failed (" +
                          e.what() + "); put scontrol on PATH or set MASTER_ADDR");
  }
}

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-./=:,+@%") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

SbatchOptions sbatch_options_for(const LaunchOptions& options, const std::string& genesis_binary) {
  SbatchOptions s;
  s.nodes = options.nnodes;
  s.gpus_per_node = options.gpus ? options.nproc_per_node : 0;
  s.nproc_per_node = options.nproc_per_node;
  s.master_port = std::max(options.master_port, 0);
  s.genesis_binary = genesis_binary;
  s.command = options.command;
  auto add = [&s](std::initializer_list<std::string> args) {
    s.extra_launch_args.insert(s.extra_launch_args.end(), args);
  };
  if (options.max_restarts > 0) add({"--max-restarts", std::to_string(options.max_restarts)});
  if (!options.log_dir.empty()) add({"--log-dir", options.log_dir.string()});
  if (options.tee) add({"--tee"});
  if (!options.local_ranks_filter.empty()) {
    std::string ranks;
    for (int r : options.local_ranks_filter) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    add({"--local-ranks-filter", ranks});
  }
  return s;
}

namespace {

// A given port, or one per job: two jobs whose first node is the same host (a shared node)
// would otherwise both bind 29500. Below the kernel's ephemeral ports, with the store's port
// (one above) in range too.
std::string master_port_line(int port) {
  if (port > 0) return "MASTER_PORT=" + std::to_string(port) + "\n";
  return "# One port per job (the store takes the next), below the kernel's ephemeral ports.\n"
         "MASTER_PORT=$((" + std::to_string(kSlurmPortFirst) + " + SLURM_JOB_ID % " +
         std::to_string(kSlurmPortLast - kSlurmPortFirst) + "))\n";
}

}  // namespace

std::string render_sbatch(const SbatchOptions& options) {
  GENESIS_CHECK(options.nodes >= 1, InvalidArgument, "sbatch: --nnodes must be at least 1");
  GENESIS_CHECK(!options.command.empty(), InvalidArgument, "sbatch: nothing to launch");
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Written by `genesis launch --emit-sbatch`: one genesis launcher per node, each starting\n"
    << "# " << options.nproc_per_node << " local ranks. Submit with: sbatch THIS_FILE\n"
    << "#SBATCH --job-name=" << options.job_name << "\n"
    << "#SBATCH --nodes=" << options.nodes << "\n"
    << "#SBATCH --ntasks-per-node=1\n";
  if (options.gpus_per_node > 0) s << "#SBATCH --gpus-per-node=" << options.gpus_per_node << "\n";
  if (!options.partition.empty()) s << "#SBATCH --partition=" << options.partition << "\n";
  if (!options.time_limit.empty()) s << "#SBATCH --time=" << options.time_limit << "\n";
  s << "#SBATCH --output=%x-%j.out\n\n"
    << "set -euo pipefail\n"
    << "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
    << master_port_line(options.master_port)
    << "# The rendezvous store's secret for this job; srun passes it on to every node.\n"
    << "GENESIS_STORE_TOKEN=${GENESIS_STORE_TOKEN:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')}\n"
    << "export MASTER_ADDR MASTER_PORT GENESIS_STORE_TOKEN\n\n"
    << "srun --nodes=\"$SLURM_NNODES\" --ntasks-per-node=1 bash -c '"
    << "exec " << options.genesis_binary << " launch --nnodes \"$SLURM_NNODES\" --node-rank \"$SLURM_NODEID\" "
    << "--master-addr \"$MASTER_ADDR\" --master-port \"$MASTER_PORT\" ";
  if (options.gpus_per_node > 0)
    s << "--gpus " << options.gpus_per_node;
  else
    s << "--nproc-per-node " << options.nproc_per_node;
  std::string rest;
  for (const auto& arg : options.extra_launch_args) rest += " " + shell_quote(arg);
  const bool genesis_command = options.command.front() == options.genesis_binary;
  if (genesis_command) {
    for (std::size_t i = 1; i < options.command.size(); ++i) rest += " " + shell_quote(options.command[i]);
  } else {
    rest += " --";
    for (const auto& arg : options.command) rest += " " + shell_quote(arg);
  }
  // The whole line sits inside single quotes for bash -c, so quotes in it must be closed and reopened.
  std::string escaped;
  for (char c : rest) escaped += c == '\'' ? std::string("'\\''") : std::string(1, c);
  s << escaped << "'\n";
  return s.str();
}

}  // namespace genesis::launch
