#include "host_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace genesis::dist::detail {

bool HostLayout::uniform() const {
  return std::all_of(hosts.begin(), hosts.end(),
                     [&](const auto& h) { return h.size() == hosts.front().size(); });
}

std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(name) + "/" + boot_id;
}

HostLayout discover_hosts(rendezvous::Store& store, int rank, int size) {
  store.set("host/" + std::to_string(rank), host_identity());
  std::vector<std::string> ids;
  HostLayout layout;
  for (int r = 0; r < size; ++r) {
    const std::string id = store.get("host/" + std::to_string(r));
    auto it = std::find(ids.begin(), ids.end(), id);
    if (it == ids.end()) {
      ids.push_back(id);
      layout.hosts.emplace_back();
      it = ids.end() - 1;
    }
    const auto h = static_cast<std::size_t>(it - ids.begin());
    if (r == rank) {
      layout.host = static_cast<int>(h);
      layout.local_rank = static_cast<int>(layout.hosts[h].size());
    }
    layout.hosts[h].push_back(r);
  }
  return layout;
}

}  // namespace genesis::dist::detail
