// Milliseconds: the one duration type of every timeout in the library (stores, process groups,
// collectives, the launcher), so a timeout passes from one layer to the next without casts.
#pragma once

#include <chrono>

namespace genesis {

using Milliseconds = std::chrono::milliseconds;

}  // namespace genesis
