// Storage allocation: host memory through the caching host allocator. Device allocation belongs
// to the CUDA backend, which this build may not have; asking for it then is a NotSupported error
// rather than a crash.
#include "genesis/tensor/storage.hpp"

#include "genesis/core/error.hpp"
#include "host_allocator.hpp"

namespace genesis {

Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cuda()) {
#ifdef GENESIS_WITH_CUDA
    throw NotSupported("CUDA tensors are not available yet: this build has the CUDA runtime but "
                       "no CUDA tensor backend; train on device = \"cpu\"");
#else
    throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
  }
  data_ = host_allocator::allocate(nbytes);
}

Storage::~Storage() { host_allocator::release(data_, nbytes_); }

}  // namespace genesis
