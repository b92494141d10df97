// Log-probabilities of a sequence's scored targets under a language model's logits, shared by the
// objectives that compare policies token by token (GRPO) or sequence by sequence (DPO). Targets
// are -1 (or any negative index) where a position is not scored.
#pragma once

#include "genesis/tensor/tensor.hpp"

namespace genesis::train {

// log softmax of logits (R, T, V) over the vocabulary, in f32; with a temperature, of the logits
// divided by it: the distribution completions were sampled from, which the online algorithms'
// ratios and KL terms must use (as TRL's trainers do).
Tensor vocabulary_log_probs(const Tensor& logits, double temperature = 1.0);

// log_probs (R, T, V) from vocabulary_log_probs and targets (R, T) -> (R, T): each scored
// position's log-probability of its target, 0 elsewhere. Differentiable in log_probs.
Tensor target_log_probs(const Tensor& log_probs, const Tensor& targets);

// target_log_probs of the logits (divided by `temperature`).
Tensor token_log_probs(const Tensor& logits, const Tensor& targets, double temperature = 1.0);

// (R): the sum over each row's scored positions, or with `mean` their mean (IPO's).
Tensor sequence_log_probs(const Tensor& logits, const Tensor& targets, bool mean);

}  // namespace genesis::train
