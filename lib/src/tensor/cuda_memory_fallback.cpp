// cuda_memory.hpp in a build without CUDA: no device memory is ever held.
#ifndef GENESIS_WITH_CUDA
#include "genesis/tensor/cuda_memory.hpp"

namespace genesis::cuda {

MemoryStats memory_stats(int) { return {}; }
void reset_peak_memory_stats(int) {}
void empty_cache() {}

}  // namespace genesis::cuda
#endif
