// The policy without its adapters as the reference (see adapters_off_reference.hpp).
#include "adapters_off_reference.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/lora.hpp"

namespace genesis::train {

Tensor AdaptersOffReference::forward(const Tensor& input, bool sync_gradients) {
  NoGradGuard no_grad;
  const nn::AdaptersDisabled off;
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

void AdaptersOffReference::refuse() {
  throw InvalidArgument("the LoRA reference (the policy without its adapters) is never trained");
}

}  // namespace genesis::train
