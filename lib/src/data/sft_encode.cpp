// Rows for next-token training with the loss on the response only: row t predicts token t + 1,
// and that target is kept only where token t + 1 is part of the response or its end-of-text.
#include <algorithm>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::data {

namespace {

// block_size inputs predict block_size targets, so an example of n tokens (prompt, response and
// end-of-text) fits whole in block_size n - 1.
std::int64_t block_size_for_all(const std::vector<SftExample>& examples,
                                const ByteTokenizer& tokenizer) {
  std::size_t most = 0;
  for (const SftExample& e : examples)
    most = std::max(most, tokenizer.encode(e.prompt).size() + tokenizer.encode(e.response).size());
  return static_cast<std::int64_t>(most);
}

}  // namespace

SftEncoding encode_sft(const std::vector<SftExample>& examples, const ByteTokenizer& tokenizer,
                       std::int64_t block_size) {
  GENESIS_CHECK(!examples.empty(), ConfigError, "the SFT dataset is empty");
  GENESIS_CHECK(block_size >= 2, InvalidArgument, "block_size must be at least 2");
  const auto n = static_cast<std::int64_t>(examples.size());
  SftEncoding enc;
  enc.block_size_needed = block_size_for_all(examples, tokenizer);
  enc.rows.inputs = Tensor::full({n, block_size}, static_cast<double>(ByteTokenizer::kPad), DType::i64);
  enc.rows.targets = Tensor::full({n, block_size}, static_cast<double>(kIgnoreIndex), DType::i64);
  auto* inputs = enc.rows.inputs.data<std::int64_t>();
  auto* targets = enc.rows.targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const SftExample& e = examples[static_cast<std::size_t>(i)];
    std::vector<std::int64_t> tokens = tokenizer.encode(e.prompt);
    const auto prompt = static_cast<std::int64_t>(tokens.size());
    GENESIS_CHECK(prompt >= 1 && prompt < block_size, ConfigError,
                  (e.origin.empty() ? "SFT example " + std::to_string(i + 1) : e.origin) +
                      ": the prompt is " + std::to_string(prompt) +
                      " tokens, which leaves no room for a response in "
                      "model.block_size = " + std::to_string(block_size) +
                      (prompt == 0 ? " (an empty prompt has nothing to condition on)"
                                   : "; --set model.block_size=" +
                                         std::to_string(enc.block_size_needed) +
                                         " fits every example whole"));
    for (std::int64_t id : tokenizer.encode(e.response)) tokens.push_back(id);
    tokens.push_back(ByteTokenizer::kEndOfText);
    // block_size inputs predict block_size targets: at most block_size + 1 tokens are used.
    if (static_cast<std::int64_t>(tokens.size()) > block_size + 1) {
      tokens.resize(static_cast<std::size_t>(block_size + 1));
      ++enc.truncated;
    }
    const auto used = static_cast<std::int64_t>(tokens.size());
    for (std::int64_t t = 0; t + 1 < used; ++t) {
      inputs[i * block_size + t] = tokens[static_cast<std::size_t>(t)];
      if (t + 1 >= prompt) {
        targets[i * block_size + t] = tokens[static_cast<std::size_t>(t + 1)];
        ++enc.response_tokens;
      }
    }
  }
  return enc;
}

}  // namespace genesis::data
