// Routing an op to the kernel of the device its tensors live on.
#include "genesis/tensor/op_table.hpp"

#include <string>

#include "genesis/core/error.hpp"

namespace genesis {

const OpInfo& op_info(OpId id) { return kOpInfo[static_cast<int>(id)]; }

// No CUDA kernels are registered yet in either build; dispatch() refuses CUDA tensors clearly.
const KernelTable* cuda_kernels() { return nullptr; }

void dispatch(OpId id, std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Tensor* first = !out.empty() && out[0].defined() ? &out[0] : nullptr;
  for (const Tensor& t : in)
    if (first == nullptr && t.defined()) first = &t;
  GENESIS_CHECK(first != nullptr, InvalidArgument,
                "op " + std::string(op_info(id).name) + " called with no tensors");
  const Device device = first->device();
  auto check_device = [&](const Tensor& t) {
    GENESIS_CHECK(!t.defined() || t.device() == device, InvalidArgument,
                  "op " + std::string(op_info(id).name) + ": tensors on " + device.str() +
                      " and " + t.device().str());
  };
  for (const Tensor& t : in) check_device(t);
  for (const Tensor& t : out) check_device(t);

  const KernelTable* table = device.is_cpu() ? &cpu_kernels() : cuda_kernels();
  if (table == nullptr) {
#ifdef GENESIS_WITH_CUDA
    throw NotSupported("op " + std::string(op_info(id).name) + " on " + device.str() +
                       ": the CUDA kernels are not built yet; compute on the CPU (device = \"cpu\")");
#else
    throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
  }
  Kernel kernel = (*table)[static_cast<int>(id)];
  if (kernel == nullptr)
    throw NotSupported("op " + std::string(op_info(id).name) + " has no kernel on " + device.str());
  kernel(in, out, args);
}

}  // namespace genesis
