// The two synthetic generators. Global structure (cluster centres, embedding map, labels, Markov
// transition table) comes from Generator(seed); each example then draws from its own generator
// seeded by (seed, index), so examples are generated in parallel and still come out identical on
// any thread count.
#include "genesis/data/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/tensor/random.hpp"
#include "uniform_index.hpp"

namespace genesis::data {

namespace {

// Classification geometry: centres are N(0, 1) per latent dim. kClusterNoise was tuned so that
// the mlp preset (784-512-256-10, 18k examples, 600 AdamW steps) reaches ~98% eval accuracy while
// softmax regression plateaus near 65%: the mixtures overlap a little and are not linearly
// separable. kFeatureNoise barely matters to either (784 noisy views of 16 latent dims).
constexpr std::int64_t kLatentDims = 16;
constexpr std::int64_t kClustersPerClass = 4;
constexpr double kClusterNoise = 0.65;
constexpr double kFeatureNoise = 0.5;

// Markov chain: successors per token, and the chance of a uniformly random next token instead.
constexpr std::int64_t kSuccessors = 4;
constexpr float kTokenNoise = 0.05f;

Generator example_generator(std::uint64_t seed, std::int64_t index) {
  return Generator(mix64(mix64(seed) + static_cast<std::uint64_t>(index)));
}

std::int64_t eval_rows(std::int64_t n, double eval_fraction, const char* who) {
  GENESIS_CHECK(eval_fraction >= 0.0 && eval_fraction < 1.0, InvalidArgument,
                std::string(who) + ": eval_fraction must be in [0, 1), got " +
                    std::to_string(eval_fraction));
  return std::llround(static_cast<double>(n) * eval_fraction);
}

std::pair<TensorDataset, TensorDataset> split(const Tensor& inputs, const Tensor& targets,
                                              std::int64_t n_eval) {
  const std::int64_t n = inputs.size(0);
  const std::int64_t n_train = n - n_eval;
  return {TensorDataset{inputs.slice(0, 0, n_train), targets.slice(0, 0, n_train)},
          TensorDataset{inputs.slice(0, n_train, n), targets.slice(0, n_train, n)}};
}

}  // namespace

std::pair<TensorDataset, TensorDataset> make_synthetic_classification(
    std::int64_t num_samples, std::int64_t features, std::int64_t classes, double eval_fraction,
    std::uint64_t seed) {
  GENESIS_CHECK(num_samples >= 1 && features >= 1 && classes >= 2, InvalidArgument,
                "make_synthetic_classification: needs num_samples >= 1, features >= 1, "
                "classes >= 2");
  const std::int64_t n_eval = eval_rows(num_samples, eval_fraction, "make_synthetic_classification");
  const std::int64_t d = std::min(features, kLatentDims);
  const std::int64_t clusters = classes * kClustersPerClass;

  Generator gen(seed);
  std::vector<float> centres(static_cast<std::size_t>(clusters * d));  // (clusters, d)
  for (float& c : centres) c = gen.normal();
  // embed (features, d), scaled so a feature's variance stays near 1 whatever d is.
  std::vector<float> embed(static_cast<std::size_t>(features * d));
  const float embed_scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (float& a : embed) a = gen.normal() * embed_scale;
  // Balanced labels in a random order.
  Tensor targets = Tensor::empty({num_samples}, DType::i64);
  std::int64_t* y = targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < num_samples; ++i) y[i] = i % classes;
  for (std::int64_t i = num_samples - 1; i > 0; --i)
    std::swap(y[i], y[detail::uniform_index(gen, i + 1)]);

  Tensor inputs = Tensor::empty({num_samples, features}, DType::f32);
  float* x = inputs.data<float>();
#pragma omp parallel for schedule(static) if (num_samples * features >= (1 << 16))
  for (std::int64_t i = 0; i < num_samples; ++i) {
    Generator eg = example_generator(seed, i);
    const std::int64_t cluster = y[i] * kClustersPerClass + detail::uniform_index(eg, kClustersPerClass);
    float z[kLatentDims];
    for (std::int64_t k = 0; k < d; ++k)
      z[k] = centres[cluster * d + k] + static_cast<float>(kClusterNoise) * eg.normal();
    float* row = x + i * features;
    for (std::int64_t f = 0; f < features; ++f) {
      const float* a = embed.data() + f * d;
      float v = 0.0f;
      for (std::int64_t k = 0; k < d; ++k) v += a[k] * z[k];
      row[f] = v + static_cast<float>(kFeatureNoise) * eg.normal();
    }
  }
  return split(inputs, targets, n_eval);
}

std::pair<TensorDataset, TensorDataset> make_synthetic_tokens(std::int64_t num_sequences,
                                                              std::int64_t block_size,
                                                              std::int64_t vocab_size,
                                                              double eval_fraction,
                                                              std::uint64_t seed) {
  GENESIS_CHECK(num_sequences >= 1 && block_size >= 1 && vocab_size >= 2, InvalidArgument,
                "make_synthetic_tokens: needs num_sequences >= 1, block_size >= 1, "
                "vocab_size >= 2");
  const std::int64_t n_eval = eval_rows(num_sequences, eval_fraction, "make_synthetic_tokens");
  const std::int64_t k = std::min(kSuccessors, vocab_size);

  // Transition table: each token's k distinct successors and their cumulative probabilities.
  Generator gen(seed);
  std::vector<std::int64_t> successor(static_cast<std::size_t>(vocab_size * k));
  std::vector<float> cumulative(static_cast<std::size_t>(vocab_size * k));
  for (std::int64_t v = 0; v < vocab_size; ++v) {
    std::int64_t* s = successor.data() + v * k;
    for (std::int64_t j = 0; j < k; ++j) {
      std::int64_t candidate;
      do {
        candidate = detail::uniform_index(gen, vocab_size);
      } while (std::find(s, s + j, candidate) != s + j);
      s[j] = candidate;
    }
    // Weights in [0.25, 1.25) keep every successor likely while making some clearly favourite.
    float* c = cumulative.data() + v * k;
    float total = 0.0f;
    for (std::int64_t j = 0; j < k; ++j) total += (c[j] = 0.25f + gen.uniform());
    float running = 0.0f;
    for (std::int64_t j = 0; j < k; ++j) c[j] = (running += c[j] / total);
    c[k - 1] = 1.0f;
  }

  const std::int64_t t1 = block_size + 1;
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(num_sequences * t1));
#pragma omp parallel for schedule(static) if (num_sequences * t1 >= (1 << 16))
  for (std::int64_t i = 0; i < num_sequences; ++i) {
    Generator eg = example_generator(seed, i);
    std::int64_t* seq = tokens.data() + i * t1;
    seq[0] = detail::uniform_index(eg, vocab_size);
    for (std::int64_t t = 1; t < t1; ++t) {
      const std::int64_t prev = seq[t - 1];
      if (eg.uniform() < kTokenNoise) {
        seq[t] = detail::uniform_index(eg, vocab_size);
        continue;
      }
      const float u = eg.uniform();
      const float* c = cumulative.data() + prev * k;
      std::int64_t j = 0;
      while (j + 1 < k && u >= c[j]) ++j;
      seq[t] = successor[prev * k + j];
    }
  }

  Tensor inputs = Tensor::empty({num_sequences, block_size}, DType::i64);
  Tensor targets = Tensor::empty({num_sequences, block_size}, DType::i64);
  std::int64_t* in = inputs.data<std::int64_t>();
  std::int64_t* out = targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < num_sequences; ++i) {
    std::copy_n(tokens.data() + i * t1, block_size, in + i * block_size);
    std::copy_n(tokens.data() + i * t1 + 1, block_size, out + i * block_size);
  }
  return split(inputs, targets, n_eval);
}

}  // namespace genesis::data
