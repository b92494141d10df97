// Routing an op to the kernel of the device its tensors live on.
#include "genesis/tensor/op_table.hpp"

#include <optional>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/core/trace.hpp"
#ifdef GENESIS_WITH_CUDA
#include "backends/cuda/cuda_check.hpp"
#endif

namespace genesis {

const OpInfo& op_info(OpId id) { return kOpInfo[static_cast<int>(id)]; }

#ifndef GENESIS_WITH_CUDA
// A CUDA build gets its table from backends/cuda/cuda_kernels.cpp.
const KernelTable* cuda_kernels() { return nullptr; }
#endif

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
  // Under training.profile_steps every kernel is a span (on a GPU: its launch, not its run).
  std::optional<trace::Scope> span;
  if (trace::enabled()) span.emplace(std::string(op_info(id).name), "op");

  auto kernel_of = [&](const KernelTable& table) {
    Kernel kernel = table[static_cast<int>(id)];
    if (kernel == nullptr)
      throw NotSupported("op " + std::string(op_info(id).name) + " has no kernel on " +
                         device.str());
    return kernel;
  };
  if (device.is_cpu()) {
    kernel_of(cpu_kernels())(in, out, args);
    return;
  }
#ifdef GENESIS_WITH_CUDA
  // Kernels launch on the current device; the tensors' device is made current for the call.
  cuda::DeviceGuard guard(device.index);
  kernel_of(*cuda_kernels())(in, out, args);
#else
  throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
}

}  // namespace genesis
