// Tensor copies and fills that involve a CUDA tensor, for Tensor::copy_/fill_/to/clone until the
// op table has CUDA kernels. They move contiguous bytes only: host-side layout and dtype changes
// happen on the host first, while a strided or converting copy *on the device* is NotSupported
// naming the op (it needs a device kernel, which the full CUDA backend brings).
#pragma once

#include <string_view>

#include "genesis/tensor/tensor.hpp"

namespace genesis::cuda {

// dst <- src where dst or src (or both) is on a CUDA device; src already has dst's shape (a
// broadcast is an expanded view). `op` names the caller in errors ("copy_", "to", "clone").
void copy_tensor(const Tensor& dst, const Tensor& src, std::string_view op);
// Every element of the CUDA tensor dst set to value: cudaMemset for +0, a host pattern copied up
// otherwise.
void fill_tensor(const Tensor& dst, double value);

}  // namespace genesis::cuda
