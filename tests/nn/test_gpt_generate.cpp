// Cached generation must compute what the plain forward computes: logits of the prompt and of
// each fed token equal the full-sequence forward's, and greedy decoding with the cache picks the
// tokens that re-running the whole sequence each step picks. A batch of left-padded prompts
// completes as each prompt alone; sampling follows its options and its generator.
#include <catch2/catch.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"
#include "nn/token_sampling.hpp"
#include "support/gpu_required.hpp"

#include <algorithm>
#include <cmath>
#include <set>

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

namespace genesis {
namespace {

nn::GPT trained_like_gpt() {
  // Larger weights than the init's 0.02 make the next-token distribution far from uniform, so
  // greedy choices are clear and sampling tests see distinct probabilities.
  Generator init(5);
  nn::GPT gpt(kConfig, init);
  NoGradGuard no_grad;
  for (auto& [name, p] : gpt.named_parameters()) p.copy_(mul(p, 20.0));
  gpt.eval();
  return gpt;
}

TEST_CASE("a batch of prompts of different lengths completes as each prompt alone", "[generate]") {
  nn::GPT gpt = trained_like_gpt();
  const std::vector<std::vector<std::int64_t>> prompts{{5, 2, 9}, {1}, {7, 7, 3, 0, 11, 4}, {19, 2}};
  Generator unused;
  const auto batch = gpt.generate(prompts, {.max_new_tokens = 5}, unused);
  REQUIRE(batch.size() == prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    INFO("prompt " << i);
    CHECK(batch[i] == gpt.generate(prompts[i], 5));
  }
  // The padded rows' logits are those of the unpadded forward, to float rounding: the masked
  // attention sums in another order than the fused kernel, and these weights make logits large.
  NoGradGuard no_grad;
  const auto matches = [](const Tensor& got, const Tensor& expected) {
    float largest = 1.0f;
    for (float v : expected.contiguous().to_vector()) largest = std::max(largest, std::abs(v));
    return max_difference(got, expected) < 1e-6f * largest;
  };
  nn::KVCache cache;
  cache.pads = {3, 0};
  Tensor ids = Tensor::from_vector<std::int64_t>({0, 0, 0, 8, 6, 1, 2, 3, 4, 5}, {2, 5});
  Tensor logits = gpt.forward_cached(ids, cache);
  CHECK(matches(logits.slice(0, 0, 1).slice(1, 3, 5),
                gpt(Tensor::from_vector<std::int64_t>({8, 6}, {1, 2}))));
  CHECK(matches(logits.slice(0, 1, 2), gpt(ids.slice(0, 1, 2))));
  Tensor step = gpt.forward_cached(Tensor::from_vector<std::int64_t>({13, 17}, {2, 1}), cache);
  CHECK(matches(step.slice(0, 0, 1),
                gpt(Tensor::from_vector<std::int64_t>({8, 6, 13}, {1, 3})).slice(1, 2, 3)));
}

TEST_CASE("a batch whose prompt pass runs in blocks of rows completes as each prompt alone",
          "[generate]") {
  // 300 prompts of up to 6 tokens: the prompt pass goes about 85 rows at a time, each block
  // writing its rows of one cache that the decode steps then read whole.
  nn::GPT gpt = trained_like_gpt();
  std::vector<std::vector<std::int64_t>> prompts;
  for (std::int64_t i = 0; i < 300; ++i) {
    std::vector<std::int64_t> prompt;
    for (std::int64_t t = 0; t <= i % 6; ++t) prompt.push_back((i * 7 + t * 5) % kConfig.vocab_size);
    prompts.push_back(prompt);
  }
  Generator unused;
  const auto batch = gpt.generate(prompts, {.max_new_tokens = 4}, unused);
  for (std::size_t i = 0; i < prompts.size(); i += 37) {
    INFO("prompt " << i);
    CHECK(batch[i] == gpt.generate(prompts[i], 4));
  }
  CHECK(batch.back() == gpt.generate(prompts.back(), 4));
}

TEST_CASE("a prompt repeated on consecutive rows runs through the model once, with the same "
          "completions", "[generate]") {
  // Four prompts three times each, as GRPO groups them (one prompt pass per group), against the
  // same twelve rows interleaved (each row its own prompt pass): row by row the same samples,
  // each row drawing from its own generator.
  nn::GPT gpt = trained_like_gpt();
  const std::vector<std::vector<std::int64_t>> distinct{{5, 2, 9}, {1}, {7, 7, 3, 0, 11}, {19, 2}};
  std::vector<std::vector<std::int64_t>> grouped, interleaved;
  std::vector<Generator> grouped_gens, interleaved_gens;
  for (std::size_t p = 0; p < distinct.size(); ++p)
    for (std::uint64_t copy = 0; copy < 3; ++copy) {
      grouped.push_back(distinct[p]);
      grouped_gens.emplace_back(100 * p + copy);
    }
  for (std::uint64_t copy = 0; copy < 3; ++copy)
    for (std::size_t p = 0; p < distinct.size(); ++p) {
      interleaved.push_back(distinct[p]);
      interleaved_gens.emplace_back(100 * p + copy);
    }
  const nn::SamplingOptions sampled{.max_new_tokens = 6, .temperature = 1.0};
  const auto a = gpt.generate(grouped, sampled, grouped_gens);
  const auto b = gpt.generate(interleaved, sampled, interleaved_gens);
  for (std::size_t p = 0; p < distinct.size(); ++p)
    for (std::size_t copy = 0; copy < 3; ++copy) {
      INFO("prompt " << p << ", copy " << copy);
      CHECK(a[p * 3 + copy] == b[copy * distinct.size() + p]);
    }
  // Greedy: every copy completes as its prompt alone.
  Generator unused;
  const auto greedy = gpt.generate(grouped, {.max_new_tokens = 6}, unused);
  for (std::size_t r = 0; r < grouped.size(); ++r) CHECK(greedy[r] == gpt.generate(grouped[r], 6));
}

TEST_CASE("batched generation stops each row at its stop token, limit and block_size", "[generate]") {
  nn::GPT gpt = trained_like_gpt();
  Generator unused;
  const std::vector<std::vector<std::int64_t>> prompts{{5, 2, 9}, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}};
  const auto free_run = gpt.generate(prompts, {.max_new_tokens = 8}, unused);
  CHECK(free_run[0].size() == 8);
  CHECK(free_run[1].size() == 2);  // 11 prompt tokens in a block of 12: 12 - 11 + 1
  // Stop at the latest token that first appears there: the row ends right after it.
  std::size_t last_new = 0;
  for (std::size_t i = 0; i < free_run[0].size(); ++i)
    if (std::find(free_run[0].begin(), free_run[0].begin() + i, free_run[0][i]) ==
        free_run[0].begin() + i)
      last_new = i;
  const auto stopped = gpt.generate(
      prompts, {.max_new_tokens = 8, .stop_token = free_run[0][last_new]}, unused, {8, 1});
  CHECK(stopped[0] == std::vector<std::int64_t>(free_run[0].begin(), free_run[0].begin() + last_new + 1));
  CHECK(stopped[1].size() == 1);
  CHECK(gpt.generate(prompts, {.max_new_tokens = 0}, unused)[0].empty());
  CHECK_THROWS_AS(gpt.generate({{1, 2}, {}}, {}, unused), InvalidArgument);
  CHECK_THROWS_AS(gpt.generate(prompts, {}, unused, {1, 2, 3}), InvalidArgument);
}

TEST_CASE("sampling is reproducible from the generator and follows the options", "[generate]") {
  nn::GPT gpt = trained_like_gpt();
  const std::vector<std::vector<std::int64_t>> prompts(8, std::vector<std::int64_t>{4, 1});
  const nn::SamplingOptions hot{.max_new_tokens = 6, .temperature = 1.5};
  Generator a(3), b(3), c(4);
  const auto first = gpt.generate(prompts, hot, a);
  CHECK(first == gpt.generate(prompts, hot, b));
  CHECK(first != gpt.generate(prompts, hot, c));
  std::set<std::vector<std::int64_t>> distinct(first.begin(), first.end());
  CHECK(distinct.size() > 1);  // one prompt, 8 different completions
  // top_k = 1 and a tiny top_p leave only the most likely token: greedy, whatever the draw.
  Generator d(9), e(10), unused;
  const auto greedy = gpt.generate(prompts, {.max_new_tokens = 6}, unused);
  CHECK(gpt.generate(prompts, {.max_new_tokens = 6, .temperature = 1.5, .top_k = 1}, d) == greedy);
  CHECK(gpt.generate(prompts, {.max_new_tokens = 6, .temperature = 1.5, .top_p = 1e-6}, e) == greedy);
}

TEST_CASE("pick_token draws from softmax(logits / temperature) cut by top_k and top_p", "[generate]") {
  const std::vector<float> logits{2.0f, 1.0f, 0.0f, 1.0f, -1.0f};
  auto frequencies = [&](const nn::SamplingOptions& o) {
    Generator gen(17);
    std::vector<double> f(logits.size());
    const int n = 40000;
    for (int i = 0; i < n; ++i) f[static_cast<std::size_t>(nn::pick_token(logits, o, gen))] += 1.0 / n;
    return f;
  };
  auto softmax_of = [&](const std::vector<int>& kept, double temperature) {
    std::vector<double> p(logits.size());
    double total = 0;
    for (int i : kept) total += p[i] = std::exp(logits[i] / temperature);
    for (double& x : p) x /= total;
    return p;
  };
  auto close = [](const std::vector<double>& got, const std::vector<double>& want) {
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::abs(got[i] - want[i]) > 0.01) return false;
    return true;
  };
  CHECK(close(frequencies({.temperature = 1.0}), softmax_of({0, 1, 2, 3, 4}, 1.0)));
  CHECK(close(frequencies({.temperature = 2.0}), softmax_of({0, 1, 2, 3, 4}, 2.0)));
  // top_k 2: the largest and both tokens tied for second.
  CHECK(close(frequencies({.temperature = 1.0, .top_k = 2}), softmax_of({0, 1, 3}, 1.0)));
  // p = (0.53, 0.20, 0.07, 0.20, 0.03): top_p 0.6 keeps the first two by probability.
  CHECK(close(frequencies({.temperature = 1.0, .top_p = 0.6}), softmax_of({0, 1}, 1.0)));
  Generator gen(1);
  CHECK(nn::pick_token(logits, {}, gen) == 0);  // greedy
}

TEST_CASE("batched greedy generation on the GPU picks the CPU's tokens", "[cuda][generate]") {
  if (testing::skip_without_gpu("batched generation on the GPU")) return;
  nn::GPT gpt = trained_like_gpt();
  const std::vector<std::vector<std::int64_t>> prompts{{5, 2, 9}, {1}, {7, 7, 3, 0, 11, 4}};
  Generator unused;
  const auto cpu = gpt.generate(prompts, {.max_new_tokens = 5}, unused);
  gpt.to(Device::cuda(0));
  CHECK(gpt.generate(prompts, {.max_new_tokens = 5}, unused) == cpu);
}

}  // namespace
}  // namespace genesis
