// Tensor copies between devices (host and CUDA, or two GPUs), behind Tensor::copy_ and to. Copies
// within one device are the op table's copy kernel. Across the host boundary the host does layout
// and dtype work on its side and the transfer moves one contiguous block; across GPUs a
// contiguous block moves peer to peer.
#pragma once

#include <string_view>

#include "genesis/tensor/tensor.hpp"

namespace genesis::cuda {

// dst <- src where dst or src (or both) is on a CUDA device; src already has dst's shape (a
// broadcast is an expanded view). `op` names the caller in errors ("copy_", "to", "clone").
void copy_tensor(const Tensor& dst, const Tensor& src, std::string_view op);

}  // namespace genesis::cuda
