// Numbers as people read them in genesis's output.
#pragma once

#include <chrono>
#include <string>

namespace genesis {

// "512 B", "1.50 MiB", "23.5 GiB", "944 MiB": binary units, three significant digits.
std::string format_bytes(double bytes);

// "12 s": a wait or a timeout in whole seconds, rounded to the nearest.
std::string format_seconds(std::chrono::milliseconds duration);

}  // namespace genesis
