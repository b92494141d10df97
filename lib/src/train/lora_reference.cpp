// The policy as it started as the reference (see lora_reference.hpp).
#include "lora_reference.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"

namespace genesis::train {

Tensor LoraReference::forward(const Tensor& input, bool sync_gradients) {
  NoGradGuard no_grad;
  const nn::UseAdapters as_started(use_);
  nn::Module& model = policy_.module();
  const bool training = model.is_training();
  model.eval();  // a reference draws no dropout masks, and leaves the policy's stream alone
  Tensor out;
  try {
    out = policy_.forward(input, sync_gradients);
  } catch (...) {
    model.train(training);
    throw;
  }
  model.train(training);
  return out;
}

void LoraReference::refuse() {
  throw InvalidArgument("the LoRA reference (the policy as it started) is never trained");
}

}  // namespace genesis::train
