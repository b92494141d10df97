#include "genesis/core/format.hpp"

#include <cstdio>

namespace genesis {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, bytes < 10 ? "%.2f %s" : bytes < 100 ? "%.1f %s" : "%.0f %s",
                  bytes, units[u]);
  return buf;
}

std::string format_seconds(std::chrono::milliseconds duration) {
  return std::to_string((duration.count() + 500) / 1000) + " s";
}

}  // namespace genesis
