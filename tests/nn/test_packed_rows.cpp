// The promise of data.packing at the model: each example's loss is the same packed with others
// into rows as alone in its own padded row (within 1e-5 relative, f32), for a small GPT (learned
// positions) and small Llama- and Mistral-shaped Hugging Face models built from config.json
// (rotary positions, grouped-query heads, a sliding window shorter than the examples), and the
// gradient of the summed losses is the same too, with gradient checkpointing as without.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "genesis/data/packing.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/hf_config.hpp"
#include "genesis/nn/hf_models.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"

using namespace genesis;

namespace {

constexpr std::int64_t kVocab = 50, kBlock = 32;

// 13 examples of 3 to 30 tokens (end-of-text included) drawn from `seed`, prompts of 1 to 5
// tokens that leave each example a response to score.
data::SftTokens random_examples(std::uint64_t seed) {
  Generator gen(seed);
  data::SftTokens t;
  t.starts.push_back(0);
  for (int i = 0; i < 13; ++i) {
    const auto n = 3 + static_cast<std::int64_t>(gen.uniform() * 28);
    const double most = static_cast<double>(std::min<std::int64_t>(5, n - 2));
    const std::int64_t prompt = 1 + static_cast<std::int64_t>(gen.uniform() * most);
    for (std::int64_t j = 0; j < n; ++j) {
      t.ids.push_back(static_cast<std::int32_t>(gen.uniform() * (kVocab - 1)));
      t.trained.push_back(j >= prompt ? 1 : 0);
    }
    t.starts.push_back(static_cast<std::int64_t>(t.ids.size()));
  }
  return t;
}

// Example e's summed cross-entropy over its scored targets, from logits of its columns
// [begin, begin + len) of row r.
Tensor example_loss(const Tensor& logits, const Tensor& targets, std::int64_t r,
                    std::int64_t begin, std::int64_t len) {
  const Tensor l = logits.select(0, r).slice(0, begin, begin + len);
  const Tensor t = targets.select(0, r).slice(0, begin, begin + len).contiguous();
  const std::vector<float> tv = t.to(DType::f32).to_vector();
  double scored = 0;
  for (float x : tv) scored += x != static_cast<float>(data::kIgnoreIndex);
  return mul(cross_entropy(l, t), scored);
}

struct Losses {
  std::vector<double> per_example;
  std::vector<Tensor> grads;  // of their sum, per parameter
};

// Every example's summed loss, and their sum's gradient, from one forward over `rows`: packed
// (positions in rows.extra, examples per row in `layout`) or one example per row.
Losses losses_of(nn::CausalLM& model, const data::TensorDataset& rows,
                 const std::vector<std::vector<std::int64_t>>& layout,
                 const std::vector<std::int64_t>& lengths, std::size_t examples) {
  for (Tensor& p : model.parameters()) p.set_grad(Tensor());
  const bool packed = rows.extra.defined();
  const Tensor logits =
      packed ? model.forward_packed(rows.inputs, rows.extra) : model.forward(rows.inputs);
  Losses out;
  out.per_example.assign(examples, 0.0);
  Tensor total;
  for (std::size_t r = 0; r < layout.size(); ++r) {
    std::int64_t at = 0;
    for (const std::int64_t e : layout[r]) {
      const std::int64_t len = lengths[static_cast<std::size_t>(e)];
      Tensor loss = example_loss(logits, rows.targets, static_cast<std::int64_t>(r), at, len);
      out.per_example[static_cast<std::size_t>(e)] = loss.item<float>();
      total = total.defined() ? add(total, loss) : loss;
      at += len;
    }
  }
  total.backward();
  for (const Tensor& p : model.parameters()) out.grads.push_back(p.grad().clone());
  return out;
}

void check_packing_keeps_losses(nn::CausalLM& model) {
  const data::SftTokens tokens = random_examples(7);
  const std::vector<data::SftExample> examples(13, data::SftExample{"p", "r"});
  const data::SftEncoding unpacked = data::sft_rows(tokens, examples, kVocab - 1, kBlock);
  const data::PackedRows packed = data::pack_sft(tokens, examples, kVocab - 1, kBlock);
  const std::vector<std::int64_t> lengths = data::sft_row_tokens(tokens, kBlock);
  REQUIRE(packed.rows.size() < unpacked.rows.size());  // some rows do hold several examples
  std::vector<std::vector<std::int64_t>> one_each;
  for (std::int64_t e = 0; e < 13; ++e) one_each.push_back({e});

  const Losses alone = losses_of(model, unpacked.rows, one_each, lengths, 13);
  const Losses together = losses_of(model, packed.rows, packed.examples, lengths, 13);
  for (std::size_t e = 0; e < 13; ++e) {
    INFO("example " << e << ": alone " << alone.per_example[e] << ", packed "
                    << together.per_example[e]);
    CHECK(std::abs(together.per_example[e] - alone.per_example[e]) <=
          1e-5 * std::abs(alone.per_example[e]));
  }
  REQUIRE(alone.grads.size() == together.grads.size());
  for (std::size_t p = 0; p < alone.grads.size(); ++p) {
    const std::vector<float> a = alone.grads[p].to_vector(), b = together.grads[p].to_vector();
    double scale = 0;
    for (float x : a) scale = std::max(scale, static_cast<double>(std::abs(x)));
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("parameter " << p << " element " << i << ": " << a[i] << " vs " << b[i]);
      REQUIRE(std::abs(a[i] - b[i]) <= 1e-4 * scale + 1e-7);
    }
  }
}

std::shared_ptr<nn::CausalLM> hf_model(const std::string& config_json) {
  Generator gen(3);
  return nn::build_hf_model(nn::parse_hf_config_text(config_json, "'test/config.json'"), {}, gen);
}

const char* kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 50,
  "initializer_range": 0.2})";

// A window of 6 positions, shorter than most examples: it must count within each example.
const char* kTinyMistral = R"({
  "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 32,
  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 1, "max_position_embeddings": 64, "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0, "sliding_window": 6, "tie_word_embeddings": true, "vocab_size": 50,
  "initializer_range": 0.2})";

}  // namespace

TEST_CASE("packed rows keep each example's loss and the gradient: gpt", "[nn][packing]") {
  const bool checkpointing = GENERATE(false, true);
  INFO("gradient checkpointing " << checkpointing);
  Generator gen(1);
  nn::GPT model({.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = kBlock,
                 .vocab_size = kVocab},
                gen);
  model.set_gradient_checkpointing(checkpointing);
  check_packing_keeps_losses(model);
}

TEST_CASE("packed rows keep each example's loss and the gradient: hf llama and mistral",
          "[nn][packing]") {
  const bool mistral = GENERATE(false, true);
  INFO((mistral ? "mistral, sliding window 6" : "llama, grouped-query"));
  const auto model = hf_model(mistral ? kTinyMistral : kTinyLlama);
  check_packing_keeps_losses(*model);
}
