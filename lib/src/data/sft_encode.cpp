// Rows for next-token training with the loss on the trained tokens only: row t predicts token
// t + 1, and that target is kept only where token t + 1 is trained (a completion, an assistant
// turn, its end-of-text). Each example is tokenized once, on every core (a tokenizer encodes on
// many threads at once): the longest sets the block_size that fits every one whole.
#include <algorithm>
#include <exception>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/data/sft_layout.hpp"

namespace genesis::data {

SftTokens tokenize_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                       const SftLoss& loss) {
  const std::size_t n = examples.size();
  std::vector<ExampleTokens> each(n);
  auto encode_range = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      each[i] = tokenize_example(example_text(examples[i], tokenizer, loss), tokenizer);
  };
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::max<std::size_t>(1, n / 64));
  const std::size_t per = (n + threads - 1) / threads;
  {
    // A data error on any thread reaches the caller (the first one, by example order).
    std::vector<std::exception_ptr> errors(threads);
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          encode_range(std::min(n, t * per), std::min(n, (t + 1) * per));
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    try {
      encode_range(0, std::min(n, per));
    } catch (...) {
      errors[0] = std::current_exception();
    }
    pool.clear();
    for (const auto& error : errors)
      if (error) std::rethrow_exception(error);
  }
  SftTokens out;
  out.starts.reserve(n + 1);
  out.starts.push_back(0);
  for (const ExampleTokens& t : each) {
    out.ids.insert(out.ids.end(), t.ids.begin(), t.ids.end());
    out.trained.insert(out.trained.end(), t.trained.begin(), t.trained.end());
    out.starts.push_back(static_cast<std::int64_t>(out.ids.size()));
  }
  return out;
}

namespace {

// Why an example's row trains nothing: a prompt that fills the block, or nothing trained at all.
std::string nothing_trained(const SftExample& e, std::int64_t i, const SftTokens& tokens,
                            std::int64_t used, std::int64_t block_size, TruncationMode truncation,
                            std::int64_t block_size_needed) {
  const std::string name = e.origin.empty() ? "SFT example " + std::to_string(i + 1) : e.origin;
  const std::string fits =
      "; --set model.block_size=" + std::to_string(block_size_needed) + " fits every example whole";
  const std::int64_t length = tokens.starts[i + 1] - tokens.starts[i];
  std::int64_t prompt = 0;
  while (prompt < length && tokens.trained[tokens.starts[i] + prompt] == 0) ++prompt;
  if (prompt < length && truncation == TruncationMode::keep_start)
    return name + ": the prompt is " + std::to_string(prompt) +
           " tokens, which leaves no room for a response in model.block_size = " +
           std::to_string(block_size) + fits;
  if (prompt < length)
    return name + ": the " + std::to_string(used) + " tokens model.block_size = " +
           std::to_string(block_size) + " keeps of its end (data.truncation_mode = keep_end) "
           "train none" + fits;
  return name + ": no token of it is trained (an empty completion or assistant turn)";
}

}  // namespace

SftEncoding sft_rows(const SftTokens& tokens, const std::vector<SftExample>& examples,
                     std::int64_t pad, std::int64_t block_size, TruncationMode truncation) {
  GENESIS_CHECK(!examples.empty(), ConfigError, "the SFT dataset is empty");
  GENESIS_CHECK(block_size >= 2, InvalidArgument, "block_size must be at least 2");
  const auto n = static_cast<std::int64_t>(examples.size());
  GENESIS_CHECK(static_cast<std::int64_t>(tokens.starts.size()) == n + 1 &&
                    tokens.trained.size() == tokens.ids.size(),
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
    // block_size inputs predict block_size targets: at most block_size + 1 tokens are used.
    std::int64_t first = tokens.starts[i], used = tokens.starts[i + 1] - tokens.starts[i];
    if (used > block_size + 1) {
      if (truncation == TruncationMode::keep_end) first += used - (block_size + 1);
      used = block_size + 1;
      ++enc.truncated;
    }
    const std::int32_t* seq = tokens.ids.data() + first;
    const std::uint8_t* trained = tokens.trained.data() + first;
    std::int64_t kept = 0;
    for (std::int64_t t = 0; t + 1 < used; ++t) {
      inputs[i * block_size + t] = seq[t];
      if (trained[t + 1] != 0) {
        targets[i * block_size + t] = seq[t + 1];
        ++kept;
      }
    }
    if (kept == 0) throw ConfigError(nothing_trained(e, i, tokens, used, block_size, truncation,
                                                     enc.block_size_needed));
    enc.response_tokens += kept;
  }
  return enc;
}

SftEncoding encode_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                       std::int64_t block_size, const SftLoss& loss) {
  GENESIS_CHECK(!examples.empty(), ConfigError, "the SFT dataset is empty");
  return sft_rows(tokenize_sft(examples, tokenizer, loss), examples, tokenizer.pad(), block_size,
                  loss.truncation);
}

}  // namespace genesis::data
