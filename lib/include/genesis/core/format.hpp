// Numbers as people read them in genesis's output.
#pragma once

#include <string>

namespace genesis {

// "512 B", "1.50 MiB", "23.5 GiB", "944 MiB": binary units, three significant digits.
std::string format_bytes(double bytes);

}  // namespace genesis
