// Device parsing and printing.
#include "genesis/tensor/device.hpp"

#include <charconv>

#include "genesis/core/error.hpp"

namespace genesis {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    std::string_view num = text.substr(5);
    int index = -1;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
    if (ec == std::errc() && ptr == num.data() + num.size() && index >= 0) return cuda(index);
  }
  throw InvalidArgument("unknown device '" + std::string(text) + "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

#ifndef GENESIS_WITH_CUDA
int cuda_device_count() { return 0; }
CudaDeviceInfo cuda_device_info(int) {
  throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
}
void use_cuda_device(int) {
  throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
}
void cuda_synchronize(int) {
  throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
}
#endif

}  // namespace genesis
