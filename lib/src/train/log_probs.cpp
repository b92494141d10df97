// The target's log-probability is picked with a one-hot mask over the vocabulary (the op table has
// no gather): (R, T, V) extra elements, small next to the logits it is made from.
#include "log_probs.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ops/ops.hpp"
#include "pair_rows.hpp"

namespace genesis::train {

Tensor vocabulary_log_probs(const Tensor& logits, double temperature) {
  const Tensor f32 = logits.dtype() == DType::f32 ? logits : logits.to(DType::f32);
  return log_softmax(temperature == 1.0 ? f32 : mul(f32, 1.0 / temperature));
}

Tensor target_log_probs(const Tensor& log_probs, const Tensor& targets) {
  Tensor pick;
  {
    NoGradGuard no_grad;
    const Tensor t = targets.to(DType::f32).unsqueeze(-1);  // (R, T, 1)
    pick = eq(Tensor::arange(log_probs.size(-1), DType::f32, log_probs.device()), t);
  }
  return sum(mul(log_probs, pick), {-1});
}

Tensor token_log_probs(const Tensor& logits, const Tensor& targets, double temperature) {
  return target_log_probs(vocabulary_log_probs(logits, temperature), targets);
}

Tensor sequence_log_probs(const Tensor& logits, const Tensor& targets, bool mean) {
  const Tensor total = sum(token_log_probs(logits, targets), {-1});  // (R)
  if (!mean) return total;
  Tensor scored;
  {
    NoGradGuard no_grad;
    scored = sum(scored_targets(targets), {-1});
  }
  return div(total, maximum(scored, Tensor::ones({}, DType::f32, logits.device())));
}

}  // namespace genesis::train
