// CausalLM::LossTargets, the language-modelling loss taken inside the model's forward: the same
// loss, argmax hits and gradients as cross_entropy of the logits forward returns without it,
// for a GPT (tied head), Llama- and Mistral-shaped models (untied and tied) and a head with a
// LoRA adapter (the unfused path); and the whole logits never exist on the way.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/hf_config.hpp"
#include "genesis/nn/hf_models.hpp"
#include "genesis/nn/lora.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "genesis/tensor/random.hpp"

using namespace genesis;
using Catch::Contains;

namespace {

constexpr std::int64_t kVocab = 50;

struct Batch {
  Tensor idx, targets;
};

// (2, 12) token ids and their next tokens, a few ignored.
Batch random_batch(std::uint64_t seed) {
  Generator gen(seed);
  std::vector<std::int64_t> ids(24), next(24);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::int64_t>(gen.uniform() * (kVocab - 1));
    next[i] = i % 5 == 2 ? -100 : static_cast<std::int64_t>(gen.uniform() * (kVocab - 1));
  }
  return {Tensor::from_vector(ids, {2, 12}), Tensor::from_vector(next, {2, 12})};
}

struct Outcome {
  float loss = 0, hits = 0;
  std::vector<Tensor> grads;
};

Outcome step(nn::CausalLM& model, const Batch& b, bool in_model) {
  for (Tensor& p : model.parameters()) p.set_grad(Tensor());
  ScoredLoss s;
  if (in_model) {
    const nn::CausalLM::LossTargets targets(model, b.targets);
    s.loss = model.forward(b.idx);
    s.hits = targets.hits();
  } else {
    s = cross_entropy_scored(model.forward(b.idx), b.targets);
  }
  REQUIRE(s.loss.dim() == 0);
  s.loss.backward();
  Outcome out{s.loss.item<float>(), s.hits.item<float>(), {}};
  for (const Tensor& p : model.parameters())
    if (p.requires_grad()) out.grads.push_back(p.grad().clone());
  return out;
}

void check_same_as_logits(nn::CausalLM& model) {
  const Batch b = random_batch(5);
  const Outcome want = step(model, b, false), got = step(model, b, true);
  REQUIRE(got.loss == Approx(want.loss).epsilon(1e-5));
  REQUIRE(got.hits == want.hits);
  REQUIRE(got.grads.size() == want.grads.size());
  for (std::size_t p = 0; p < want.grads.size(); ++p) {
    const std::vector<float> a = want.grads[p].to_vector(), g = got.grads[p].to_vector();
    double scale = 0;
    for (float x : a) scale = std::max(scale, static_cast<double>(std::abs(x)));
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("parameter " << p << " element " << i << ": " << a[i] << " vs " << g[i]);
      REQUIRE(std::abs(a[i] - g[i]) <= 1e-5 * scale + 1e-8);
    }
  }
}

std::shared_ptr<nn::CausalLM> hf_model(const std::string& type, bool tied) {
  Generator gen(3);
  const std::string json =
      R"({"model_type": ")" + type + R"(", "hidden_size": 32, "intermediate_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "max_position_embeddings": 64, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
      "tie_word_embeddings": )" +
      (tied ? std::string("true") : std::string("false")) +
      R"(, "vocab_size": 50, "initializer_range": 0.2})";
  return nn::build_hf_model(nn::parse_hf_config_text(json, "'test/config.json'"), {}, gen);
}

}  // namespace

TEST_CASE("a loss taken in the model is the loss of its logits: gpt", "[nn][loss_targets]") {
  Generator gen(1);
  nn::GPT model({.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab_size = kVocab},
                gen);
  check_same_as_logits(model);
}

TEST_CASE("a loss taken in the model is the loss of its logits: llama and mistral",
          "[nn][loss_targets]") {
  const bool tied = GENERATE(false, true);
  INFO((tied ? "mistral, tied head" : "llama, untied head"));
  check_same_as_logits(*hf_model(tied ? "mistral" : "llama", tied));
}

TEST_CASE("a loss taken in the model through a head with an adapter", "[nn][loss_targets]") {
  auto model = hf_model("llama", false);
  nn::LoraSpec spec;
  spec.r = 4;
  spec.alpha = 8;
  spec.target_modules = {"lm_head", "q_proj"};
  Generator gen(9);
  nn::add_lora(*model, "", spec, gen, std::make_shared<Generator>(10));
  // B starts at zero; a head that skipped its adapter would only show once B is not.
  for (const auto& [path, linear] : nn::adapted_linears(*model)) {
    if (path != "lm_head") continue;
    NoGradGuard no_grad;
    linear->adapter()->B->weight.copy_(Tensor::randn(linear->adapter()->B->weight.shape(), gen));
  }
  check_same_as_logits(*model);
  // ... and the adapter does move this loss.
  const Batch b = random_batch(5);
  NoGradGuard no_grad;
  const float adapted = cross_entropy(model->forward(b.idx), b.targets).item<float>();
  const nn::UseAdapters base(nn::AdapterUse::none);
  const float plain = cross_entropy(model->forward(b.idx), b.targets).item<float>();
  REQUIRE(std::abs(adapted - plain) > 1e-3);
}

TEST_CASE("a loss taken in the model never holds the whole logits", "[nn][loss_targets]") {
  // 1024 positions over 32768 tokens: 128 MiB of f32 logits, twice the CPU's 64 MiB block.
  const std::int64_t vocab = 32768, T = 256;
  Generator gen(2);
  nn::GPT model({.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = T, .vocab_size = vocab},
                gen);
  std::vector<std::int64_t> ids(4 * T);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 37 % vocab);
  const Tensor idx = Tensor::from_vector(ids, {4, T});
  const std::size_t logits_bytes = ids.size() * vocab * sizeof(float);
  const std::size_t before = host_allocator::stats().allocated_bytes;
  REQUIRE(host_allocator::stats().peak_allocated_bytes < before + logits_bytes / 2);
  {
    const nn::CausalLM::LossTargets targets(model, idx);
    model.forward(idx).backward();
  }
  // One block of logits, turned into its gradient in place, and the model's gradients: the
  // logits and their gradient whole would be twice logits_bytes.
  const std::size_t peak = host_allocator::stats().peak_allocated_bytes;
  INFO("peak above the model: " << (peak - before) << " bytes; whole logits: " << logits_bytes);
  REQUIRE(peak - before < logits_bytes * 6 / 10);
}

TEST_CASE("a model with a value head refuses loss targets", "[nn][loss_targets]") {
  Generator gen(1);
  nn::GPT model({.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 16, .vocab_size = kVocab,
                 .value_head = true},
                gen);
  REQUIRE_THROWS_WITH(nn::CausalLM::LossTargets(model, random_batch(1).targets),
                      Contains("needs the language-model head"));
}
