// Host allocation for Storage. Device allocation belongs to the CUDA backend, which this build
// may not have; asking for it then is a NotSupported error rather than a crash.
#include "genesis/tensor/storage.hpp"

#include <cstdlib>
#include <new>

#include "genesis/core/error.hpp"

namespace genesis {

namespace {
constexpr std::size_t kAlign = 64;
}

Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cuda()) {
#ifdef GENESIS_WITH_CUDA
    throw NotSupported("CUDA tensors are not available yet: this build has the CUDA runtime but "
                       "no CUDA tensor backend; train on device = \"cpu\"");
#else
    throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
  }
  std::size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  if (rounded == 0) rounded = kAlign;
  data_ = std::aligned_alloc(kAlign, rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Storage::~Storage() { std::free(data_); }

}  // namespace genesis
