// Synthetic datasets generated from a seed, for training runs and tests that need data with
// structure a model can learn but cannot memorise trivially. Both return (train, eval) splits: the
// last round(num * eval_fraction) examples are the eval split. Same arguments -> same bytes on every
// machine and thread count.
#pragma once

#include <cstdint>
#include <utility>

#include "genesis/data/dataset.hpp"

namespace genesis::data {

// Classification: each class is a mixture of a few Gaussian clusters in a low-dimensional latent
// space, embedded into `features` dims by a fixed random linear map plus feature noise. A linear
// model cannot carve the mixtures apart (~65%); a 784-512-256-10 MLP reaches ~98% on 20k examples.
// inputs f32 (N, features), targets i64 (N) in [0, classes); every class has N/classes examples
// (+-1) before the split.
std::pair<TensorDataset, TensorDataset> make_synthetic_classification(
    std::int64_t num_samples, std::int64_t features, std::int64_t classes, double eval_fraction,
    std::uint64_t seed);

// Language modelling: sequences drawn from a fixed random sparse Markov chain (each token has a
// few likely successors, plus a little uniform noise), so the achievable loss (~1.7 nats) lies
// far below log(vocab_size). inputs i64 (N, block_size), targets i64 (N, block_size) = inputs
// shifted left by one (block_size + 1 tokens are drawn per sequence).
std::pair<TensorDataset, TensorDataset> make_synthetic_tokens(std::int64_t num_sequences,
                                                              std::int64_t block_size,
                                                              std::int64_t vocab_size,
                                                              double eval_fraction,
                                                              std::uint64_t seed);

}  // namespace genesis::data
