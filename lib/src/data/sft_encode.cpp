// Rows for next-token training with the loss on the response only: row t predicts token t + 1,
// and that target is kept only where token t + 1 is part of the response or its end-of-text.
// Each example is tokenized once, on every core (a tokenizer encodes on many threads at once):
// the longest sets the block_size that fits every one whole.
#include <algorithm>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::data {

SftTokens tokenize_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer) {
  const std::size_t n = examples.size();
  std::vector<std::vector<std::int64_t>> sequences(n);
  std::vector<std::int64_t> prompts(n);
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
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::max<std::size_t>(1, n / 64));
  const std::size_t per = (n + threads - 1) / threads;
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < threads; ++t)
      pool.emplace_back(encode_range, std::min(n, t * per), std::min(n, (t + 1) * per));
    encode_range(0, std::min(n, per));
  }
  SftTokens out;
  out.prompt_lengths = std::move(prompts);
  out.starts.reserve(n + 1);
  out.starts.push_back(0);
  for (const auto& tokens : sequences) {
    out.ids.insert(out.ids.end(), tokens.begin(), tokens.end());
    out.starts.push_back(static_cast<std::int64_t>(out.ids.size()));
  }
  return out;
}

SftEncoding sft_rows(const SftTokens& tokens, const std::vector<SftExample>& examples,
                     std::int64_t pad, std::int64_t block_size) {
  GENESIS_CHECK(!examples.empty(), ConfigError, "the SFT dataset is empty");
  GENESIS_CHECK(block_size >= 2, InvalidArgument, "block_size must be at least 2");
  const auto n = static_cast<std::int64_t>(examples.size());
  GENESIS_CHECK(static_cast<std::int64_t>(tokens.prompt_lengths.size()) == n &&
                    static_cast<std::int64_t>(tokens.starts.size()) == n + 1,
                InvalidArgument, "SFT tokens and examples differ in number");
  SftEncoding enc;
  // block_size inputs predict block_size targets, so n tokens fit whole in block_size n - 1.
  for (std::int64_t i = 0; i < n; ++i)
    enc.block_size_needed =
        std::max(enc.block_size_needed, tokens.starts[i + 1] - tokens.starts[i] - 1);
  enc.rows.inputs = Tensor::full({n, block_size}, static_cast<double>(pad), DType::i64);
  enc.rows.targets = Tensor::full({n, block_size}, static_cast<double>(kIgnoreIndex), DType::i64);
  auto* inputs = enc.rows.inputs.data<std::int64_t>();
  auto* targets = enc.rows.targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const SftExample& e = examples[static_cast<std::size_t>(i)];
    const std::int32_t* seq = tokens.ids.data() + tokens.starts[i];
    const std::int64_t prompt = tokens.prompt_lengths[static_cast<std::size_t>(i)];
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
    std::int64_t used = tokens.starts[i + 1] - tokens.starts[i];
    if (used > block_size + 1) {
      used = block_size + 1;
      ++enc.truncated;
    }
    for (std::int64_t t = 0; t + 1 < used; ++t) {
      inputs[i * block_size + t] = seq[t];
      if (t + 1 >= prompt) {
        targets[i * block_size + t] = seq[t + 1];
        ++enc.response_tokens;
      }
    }
  }
  return enc;
}

SftEncoding encode_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                       std::int64_t block_size) {
  GENESIS_CHECK(!examples.empty(), ConfigError, "the SFT dataset is empty");
  return sft_rows(tokenize_sft(examples, tokenizer), examples, tokenizer.pad(), block_size);
}

}  // namespace genesis::data
