// Each group of CPU kernels fills its rows of the CPU kernel table (cpu_kernels.cpp).
#pragma once

#include "genesis/tensor/op_table.hpp"

namespace genesis::cpu {

void register_data_movement(KernelTable& t);  // copy, fill, concat
void register_elementwise(KernelTable& t);    // binary, scalar, unary maps and their backwards
void register_reduce(KernelTable& t);         // sum_dim, max_dim, argmax_dim
void register_linalg(KernelTable& t);         // matmul, linear
void register_nn(KernelTable& t);             // softmax family, cross_entropy, layer_norm, embedding, dropout
void register_attention(KernelTable& t);      // attention and its backward
void register_optim(KernelTable& t);          // adamw_step

}  // namespace genesis::cpu
