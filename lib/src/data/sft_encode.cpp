// Rows for next-token training with the loss on the response only: row t predicts token t + 1,
// and that target is kept only where token t + 1 is part of the response or its end-of-text.
// Each example is tokenized once, on every core (a tokenizer encodes on many threads at once):
// the longest sets the block_size that fits every one whole.
#include <algorithm>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::data {

SftEncoding encode_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                       std::int64_t block_size) {
  GENESIS_CHECK(!examples.empty(), ConfigError, "the SFT dataset is empty");
  GENESIS_CHECK(block_size >= 2, InvalidArgument, "block_size must be at least 2");
  const auto n = static_cast<std::int64_t>(examples.size());
  // Each example's tokens (prompt, response, end-of-text) and its prompt's length.
  std::vector<std::vector<std::int64_t>> sequences(examples.size());
  std::vector<std::int64_t> prompts(examples.size());
  auto encode_range = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      std::vector<std::int64_t>& tokens = sequences[i];
      tokens = tokenizer.encode_prompt(examples[i].prompt);
      prompts[i] = static_cast<std::int64_t>(tokens.size());
      for (std::int64_t id : tokenizer.encode_continuation(examples[i].response))
        tokens.push_back(id);
      tokens.push_back(tokenizer.end_of_text());
    }
  };
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1,
                                                      std::max<std::size_t>(1, n / 64));
  const std::size_t per = (examples.size() + threads - 1) / threads;
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < threads; ++t)
      pool.emplace_back(encode_range, std::min(examples.size(), t * per),
                        std::min(examples.size(), (t + 1) * per));
    encode_range(0, std::min(examples.size(), per));
  }
  SftEncoding enc;
  // block_size inputs predict block_size targets, so n tokens fit whole in block_size n - 1.
  for (const auto& tokens : sequences)
    enc.block_size_needed =
        std::max(enc.block_size_needed, static_cast<std::int64_t>(tokens.size()) - 1);
  enc.rows.inputs = Tensor::full({n, block_size}, static_cast<double>(tokenizer.pad()), DType::i64);
  enc.rows.targets = Tensor::full({n, block_size}, static_cast<double>(kIgnoreIndex), DType::i64);
  auto* inputs = enc.rows.inputs.data<std::int64_t>();
  auto* targets = enc.rows.targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const SftExample& e = examples[static_cast<std::size_t>(i)];
    std::vector<std::int64_t>& tokens = sequences[static_cast<std::size_t>(i)];
    const std::int64_t prompt = prompts[static_cast<std::size_t>(i)];
    GENESIS_CHECK(prompt >= 1 && prompt < block_size, ConfigError,
                  (e.origin.empty() ? "SFT example " + std::to_string(i + 1) : e.origin) +
                      ": the prompt is " + std::to_string(prompt) +
                      " tokens, which leaves no room for a response in "
                      "model.block_size = " + std::to_string(block_size) +
                      (prompt == 0 ? " (an empty prompt has nothing to condition on)"
                                   : "; --set model.block_size=" +
                                         std::to_string(enc.block_size_needed) +
                                         " fits every example whole"));
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
