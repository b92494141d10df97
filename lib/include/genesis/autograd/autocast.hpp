// Autocast, torch.autocast's lower half: while an AutocastGuard for bf16 or f16 is alive on a
// thread, matmul, linear, scaled_dot_product_attention and packed_attention cast their floating
// inputs (weights and biases included) to that type with the differentiable Tensor::to, so their
// results are stored in it and their gradients pass through it back to fp32 master weights.
// Every other op is unaffected and keeps its own dtype rule. The state is per thread, like grad
// mode; the backward engine switches it off, and gradient checkpointing restores the forward's.
// It lives beside grad mode in autograd/, below the ops that consult it; the namespace stays amp::
// because that is the public name (torch.amp.autocast). amp/ keeps the GradScaler.
#pragma once

#include <optional>

#include "genesis/tensor/dtype.hpp"

namespace genesis::amp {

// The reduced-precision type the autocast ops cast to on this thread; nullopt when autocast is off.
std::optional<DType> autocast_dtype();

// bf16 or f16 turns autocast on; nullopt or f32 turns it off; any other type is InvalidArgument.
void set_autocast_dtype(std::optional<DType> dtype);

// Sets the autocast state for its lifetime and restores the previous one, so guards nest.
// `AutocastGuard guard(DType::bf16)` enables it; `AutocastGuard off(std::nullopt)` (or
// DType::f32) disables it inside an enabled region.
class AutocastGuard {
 public:
  explicit AutocastGuard(std::optional<DType> dtype) : previous_(autocast_dtype()) {
    set_autocast_dtype(dtype);
  }
  ~AutocastGuard() { set_autocast_dtype(previous_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> previous_;
};

}  // namespace genesis::amp
