// Each group of CUDA kernels fills its rows of the CUDA kernel table (cuda_kernels.cpp), the
// same groups as the CPU backend's (backends/cpu/register.hpp).
#pragma once

#include "genesis/tensor/op_table.hpp"

namespace genesis::cuda {

void register_data_movement(KernelTable& t);  // copy, fill, concat
void register_elementwise(KernelTable& t);    // binary, scalar, unary maps and their backwards
void register_reduce(KernelTable& t);         // sum_dim, max_dim, argmax_dim
void register_linalg(KernelTable& t);         // matmul, linear (cuBLASLt)
void register_nn(KernelTable& t);             // softmax family, cross_entropy, layer_norm, embedding, dropout
void register_attention(KernelTable& t);      // attention and its backward (fused)
void register_optim(KernelTable& t);          // adamw_step (fused)

}  // namespace genesis::cuda
