// Which ranks of a group share a host: every rank publishes its host's identity on the group's
// store and reads everyone's. A host is its name together with the kernel's boot id, so two
// machines that happen to share a name are still two hosts, and simulated hosts (one kernel, a
// host name each) are several. Used to pick shared memory within a host and the network across.
#pragma once

#include <string>
#include <vector>

#include "genesis/rendezvous/store.hpp"

namespace genesis::dist::detail {

struct HostLayout {
  std::vector<std::vector<int>> hosts;  // each host's ranks, ascending; hosts by lowest rank
  int host = 0;                         // this rank's host
  int local_rank = 0;                   // its place among that host's ranks

  int local_size() const { return static_cast<int>(hosts[static_cast<std::size_t>(host)].size()); }
  // Every host has the same number of ranks.
  bool uniform() const;
};

std::string host_identity();

// Blocks until all `size` ranks have published theirs (the store's timeout).
HostLayout discover_hosts(rendezvous::Store& store, int rank, int size);

}  // namespace genesis::dist::detail
