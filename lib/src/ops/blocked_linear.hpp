// A frozen weight stored in bf16 or f16 (a LoRA run's base) meeting an f32 input in the CPU's
// f32 kernel: converted a block of output rows at a time, in forward and in backward, so that no
// f32 copy of the whole weight exists beside the step (the tied head of a 151936-token vocabulary
// at hidden 1024 would be a 594 MiB copy, made twice a step).
#pragma once

#include "genesis/tensor/tensor.hpp"

namespace genesis::detail {

// Whether linear(x, weight, bias) takes the blocked path: a CPU product outside autocast of an
// f32 input with a low-precision weight of at least 4M elements, neither it nor the bias trained.
bool takes_blocked_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// x W^T + b (f32), the gradient flowing to x only.
Tensor blocked_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// The two products of blocked_linear outside autograd: x2 (N, K) f32 times weight (O, K)
// transposed, plus bias (or undefined) -> (N, O) f32; and dy (N, O) f32 times weight -> (N, K).
Tensor blocked_product(const Tensor& x2, const Tensor& weight, const Tensor& bias);
Tensor blocked_input_grad(const Tensor& dy, const Tensor& weight);

}  // namespace genesis::detail
