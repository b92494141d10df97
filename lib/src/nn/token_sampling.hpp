// Picking the next token from one row of logits under SamplingOptions, on the host: the rows of a
// generation step come back from the device together, and a draw per row from one Generator in
// row order is what makes a seeded run's completions reproducible on any device.
#pragma once

#include <cstdint>
#include <span>

#include "genesis/nn/causal_lm.hpp"
#include "genesis/tensor/random.hpp"

namespace genesis::nn {

// Greedy: the first index of the largest logit. Otherwise the draw of SamplingOptions: the
// logits over temperature, then top_k (ties with the k-th kept), then top_p over what is left.
std::int64_t pick_token(std::span<const float> logits, const SamplingOptions& options,
                        Generator& gen);

}  // namespace genesis::nn
