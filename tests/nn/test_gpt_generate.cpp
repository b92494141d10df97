// Cached generation must compute what the plain forward computes: logits of the prompt and of
// each fed token equal the full-sequence forward's, and greedy decoding with the cache picks the
// tokens that re-running the whole sequence each step picks.
#include <catch2/catch.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis {
namespace {

constexpr nn::GPTConfig kConfig{.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 12,
                                .vocab_size = 20, .dropout = 0.0};

nn::GPT make_gpt() {
  Generator init(11);
  return nn::GPT(kConfig, init);
}

float max_difference(const Tensor& a, const Tensor& b) {
  const auto x = a.contiguous().to_vector(), y = b.contiguous().to_vector();
  REQUIRE(x.size() == y.size());
  float worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

TEST_CASE("cached forward gives the full forward's logits", "[generate]") {
  nn::GPT gpt = make_gpt();
  gpt.eval();
  NoGradGuard no_grad;
  const std::vector<std::int64_t> ids{3, 7, 1, 19, 4, 4, 0, 12};
  Tensor all = Tensor::from_vector(ids, {1, 8});
  Tensor full = gpt(all);  // (1, 8, vocab)
  nn::KVCache cache;
  Tensor prompt = gpt.forward_cached(all.slice(1, 0, 5), cache);
  CHECK(max_difference(prompt, full.slice(1, 0, 5)) < 1e-5f);
  for (std::int64_t t = 5; t < 8; ++t) {
    Tensor step = gpt.forward_cached(all.slice(1, t, t + 1), cache);
    CHECK(max_difference(step, full.slice(1, t, t + 1)) < 1e-5f);
  }
  CHECK(cache.length == 8);
  CHECK_THROWS_AS(gpt.forward_cached(Tensor::from_vector(ids, {1, 8}).slice(1, 0, 5), cache),
                  InvalidArgument);  // 8 + 5 tokens is past block_size 12

  // Several new tokens after a cached prefix attend causally among themselves.
  nn::KVCache chunked;
  gpt.forward_cached(all.slice(1, 0, 3), chunked);
  CHECK(max_difference(gpt.forward_cached(all.slice(1, 3, 8), chunked), full.slice(1, 3, 8)) < 1e-5f);
}

TEST_CASE("greedy generation with the cache matches re-running the sequence", "[generate]") {
  nn::GPT gpt = make_gpt();
  gpt.eval();
  const std::vector<std::int64_t> prompt{5, 2, 9};
  const std::vector<std::int64_t> generated = gpt.generate(prompt, 6);
  REQUIRE(generated.size() == 6);
  std::vector<std::int64_t> sequence = prompt;
  NoGradGuard no_grad;
  for (std::int64_t expected : generated) {
    Tensor logits = gpt(Tensor::from_vector(sequence, {1, static_cast<std::int64_t>(sequence.size())}));
    const std::int64_t next = argmax(logits.select(1, logits.size(1) - 1), -1).item<std::int64_t>();
    CHECK(next == expected);
    sequence.push_back(next);
  }
  // A stop token ends the output (and is its last token); block_size bounds it.
  CHECK(gpt.generate(prompt, 6, generated[0]) == std::vector<std::int64_t>{generated[0]});
  CHECK(gpt.generate(prompt, 100).size() == static_cast<std::size_t>(kConfig.block_size) - prompt.size() + 1);
  CHECK_THROWS_AS(gpt.generate({}, 3), InvalidArgument);
}

}  // namespace
}  // namespace genesis
