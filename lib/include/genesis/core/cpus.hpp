// How many CPUs this process may run on: the launcher divides them among its ranks, and the shm
// backend polls rather than sleeps while every rank of its group has one to itself.
#pragma once

namespace genesis {

// The CPUs in this process's affinity mask (the online CPUs if it cannot be read), at least 1.
int usable_cores();

}  // namespace genesis
