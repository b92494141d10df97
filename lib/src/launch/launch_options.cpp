// Checks on LaunchOptions that hold for every way of launching (local, per node, under SLURM),
// and the parsers of the flags whose values have a syntax: each failure is an InvalidArgument
// naming the flag, so the CLI exits 2 before starting anything.
#include "genesis/launch/launch_options.hpp"

#include <charconv>

#include "genesis/core/error.hpp"

namespace genesis::launch {

int resolved_master_port(const LaunchOptions& options) {
  if (options.master_port >= 0) return options.master_port;
  return options.nnodes > 1 ? kDefaultMultiNodePort : 0;
}

void validate_launch_options(const LaunchOptions& options) {
  auto fail = [](const std::string& message) { throw InvalidArgument(message); };
  if (options.nproc_per_node < 1)
    fail("--nproc-per-node must be at least 1 (got " + std::to_string(options.nproc_per_node) + ")");
  if (options.nnodes < 1) fail("--nnodes must be at least 1 (got " + std::to_string(options.nnodes) + ")");
  if (options.node_rank < 0 || options.node_rank >= options.nnodes)
    fail("--node-rank " + std::to_string(options.node_rank) + " is out of range for --nnodes " +
         std::to_string(options.nnodes) + " (valid: 0.." + std::to_string(options.nnodes - 1) + ")");
  if (options.master_port > 65535)
    fail("--master-port must be 0..65535 (got " + std::to_string(options.master_port) + ")");
  if (options.nnodes > 1 && options.master_port == 0)
    fail("--master-port 0 (pick a free port) only works on one node: the other nodes could not "
         "know the port; give a fixed port");
  if (options.min_nnodes != 0 && (options.min_nnodes < 1 || options.min_nnodes > options.nnodes))
    fail("--nnodes " + std::to_string(options.min_nnodes) + ":" + std::to_string(options.nnodes) +
         ": MIN must be 1..MAX");
  if (options.master_addr.empty()) fail("--master-addr must not be empty");
  if (options.max_restarts < 0)
    fail("--max-restarts must be >= 0 (got " + std::to_string(options.max_restarts) + ")");
  if (!(options.grace_period_s >= 0)) fail("--grace-period must be >= 0 seconds");
  if (!(options.heartbeat_timeout_s >= 2)) fail("--heartbeat-timeout must be at least 2 seconds");
  if (options.timeout_s != -1 && options.timeout_s < 1) fail("--timeout must be at least 1 second");
  for (int rank : options.local_ranks_filter)
    if (rank >= options.nproc_per_node)
      fail("--local-ranks-filter names local rank " + std::to_string(rank) + " but there are only " +
           std::to_string(options.nproc_per_node) + " local ranks");
  if (options.command.empty())
    fail("nothing to launch: give a genesis command (genesis launch --nproc 2 train ...) or "
         "-- PROGRAM ARGS");
}

void parse_nnodes(const std::string& text, LaunchOptions& options) {
  auto number = [&](const std::string& part) {
    int value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size())
      throw InvalidArgument("--nnodes '" + text + "' is not N or MIN:MAX");
    return value;
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    options.nnodes = number(text);
    options.min_nnodes = 0;
    return;
  }
  options.min_nnodes = number(text.substr(0, colon));
  options.nnodes = number(text.substr(colon + 1));
}

std::vector<int> parse_rank_list(const std::string& text) {
  std::vector<int> ranks;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    int value = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0)
      throw InvalidArgument("--local-ranks-filter: '" + item + "' in '" + text +
                            "' is not a rank (expected a list like 0,1,3)");
    ranks.push_back(value);
    start = comma + 1;
  }
  return ranks;
}

Endpoint parse_rdzv_endpoint(const std::string& text) {
  auto fail = [&text](const std::string& why) -> Endpoint {
    throw InvalidArgument("--rdzv-endpoint '" + text + "': " + why + " (expected HOST or HOST:PORT)");
  };
  Endpoint endpoint;
  std::string port;
  if (text.starts_with("[")) {  // [v6 address], the only form whose host may hold colons
    const auto close = text.find(']');
    if (close == std::string::npos) return fail("no closing ']'");
    endpoint.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return fail("expected ':' after ']'");
      port = text.substr(close + 2);
      if (port.empty()) return fail("empty port");
    }
  } else {
    const auto colon = text.find(':');
    endpoint.host = text.substr(0, colon);
    if (colon != std::string::npos) {
      port = text.substr(colon + 1);
      if (port.find(':') != std::string::npos) return fail("an IPv6 address goes in brackets");
      if (port.empty()) return fail("empty port");
    }
  }
  if (endpoint.host.empty()) return fail("empty host");
  if (!port.empty()) {
    int value = -1;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535)
      return fail("port '" + port + "' is not 0..65535");
    endpoint.port = value;
  }
  return endpoint;
}

}  // namespace genesis::launch
