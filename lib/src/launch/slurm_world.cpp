// One world from the tasks of an srun step that no launcher started (see slurm.hpp). Every task
// computes the same MASTER_PORT, token and run id from what SLURM gives all of them (job and step
// ids, the step's node list), so they meet without any exchange; rank 0 hosts the store there.
#include <cstdint>
#include <cstdlib>

#include "genesis/core/error.hpp"
#include "genesis/launch/job_identity.hpp"
#include "genesis/launch/slurm.hpp"

namespace genesis::launch {
namespace {

// SLURM's tasks-per-node list, "2(x3),1": the count of node `node` (1 when it cannot be read).
int tasks_on_node(const std::string& list, int node) {
  int seen = 0;
  std::size_t at = 0;
  while (at < list.size()) {
    const std::size_t comma = list.find(',', at);
    const std::string item = list.substr(at, comma == std::string::npos ? comma : comma - at);
    const std::size_t paren = item.find("(x");
    const int count = std::atoi(item.substr(0, paren).c_str());
    const int repeat = paren == std::string::npos ? 1 : std::atoi(item.c_str() + paren + 2);
    if (node < seen + repeat) return count > 0 ? count : 1;
    seen += repeat;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return 1;
}

}  // namespace

std::optional<std::vector<std::pair<std::string, std::string>>> slurm_world_env(
    const EnvLookup& env) {
  const auto mapping = map_slurm_env(env);
  if (!mapping || mapping->world_size <= 1) return std::nullopt;
  const std::string nodes =
      env("SLURM_STEP_NODELIST").value_or(env("SLURM_JOB_NODELIST").value_or(""));
  GENESIS_CHECK(!nodes.empty(), InvalidArgument,
                "srun started " + std::to_string(mapping->world_size) + " tasks, but neither "
                "SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST says on which hosts: cannot find "
                "rank 0's host (use genesis launch, or set MASTER_ADDR, MASTER_PORT and RANK)");
  // MASTER_ADDR and MASTER_PORT the job exported win, as under torch's env:// and Lightning's
  // SLURM support: a script that picks its port keeps it.
  const std::string given_addr = env("MASTER_ADDR").value_or("");
  const std::string given_port = env("MASTER_PORT").value_or("");
  const std::string master = given_addr.empty() ? first_host(nodes) : given_addr;
  const std::string tasks_per_node =
      env("SLURM_STEP_TASKS_PER_NODE").value_or(env("SLURM_TASKS_PER_NODE").value_or("1"));
  const std::string job = env("SLURM_JOB_ID").value_or("0");
  const std::string step = env("SLURM_STEP_ID").value_or("0");
  const std::string words = "slurm|" + job + "|" + step + "|" + nodes;
  // Else a port of kSlurmPortFirst..kSlurmPortLast that other steps (other job or step ids)
  // almost never share.
  const std::uint64_t hash = std::stoull(derived_hex("port|" + words, 1).substr(0, 8), nullptr, 16);
  const std::string port =
      !given_port.empty()
          ? given_port
          : std::to_string(kSlurmPortFirst + hash % (kSlurmPortLast + 1 - kSlurmPortFirst));
  return std::vector<std::pair<std::string, std::string>>{
      {"RANK", std::to_string(mapping->rank)},
      {"LOCAL_RANK", std::to_string(mapping->local_rank)},
      {"WORLD_SIZE", std::to_string(mapping->world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(tasks_on_node(tasks_per_node, mapping->node_rank))},
      {"GROUP_RANK", std::to_string(mapping->node_rank)},
      {"MASTER_ADDR", master},
      {"MASTER_PORT", port},
      {"GENESIS_STORE_TOKEN", derived_hex("token|" + words, 2)},
      {"GENESIS_RUN_ID", job + "." + step},
  };
}

bool adopt_slurm_world() {
  const auto world = slurm_world_env(env::process_lookup());
  if (!world) return false;
  for (const auto& [name, value] : *world) ::setenv(name.c_str(), value.c_str(), 1);
  return true;
}

}  // namespace genesis::launch
