// Supervised fine-tuning data: (prompt, response) pairs from JSONL files or from a built-in
// generator of small instruction tasks, and their encoding into fixed-length training rows whose
// loss covers the response only. One example per row, padded (no packing), so every row starts
// at its prompt and evaluation can feed the same prompts to generation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "genesis/data/dataset.hpp"
#include "genesis/data/text_tokenizer.hpp"

namespace genesis::data {

struct SftExample {
  std::string prompt;
  std::string response;
  // Where it came from, for errors about it: "FILE:LINE" from read_sft_jsonl, the task and its
  // prompt from generate_sft_tasks; "" names it by its position in the list instead.
  std::string origin{};
  std::string task{};  // the built-in task's name ("add"); empty for examples from a file
};

// One JSON object per line: {"prompt": ..., "response": ...} or the chat form {"messages":
// [{"role": ..., "content": ...}, ...]} whose last message is the assistant's response and whose
// earlier messages become the prompt ("user: ...\nassistant: "). Blank lines are skipped. Any
// other line throws ConfigError naming the file and line number and what is wrong; each example
// keeps its "FILE:LINE" as origin, for the errors found later (a prompt too long to encode).
std::vector<SftExample> read_sft_jsonl(const std::filesystem::path& path);

// The built-in tasks, each a deterministic function of its input:
//   reverse "reverse: kitten\n" -> "nettik"     sort  "sort: kitten\n" -> "eiknott"
//   copy    "copy: kitten\n" -> "kitten"        upper "upper: kitten\n" -> "KITTEN"
//   add     "add: 27+385\n" -> "412"           first "first: kitten\n" -> "k"
//   last    "last: kitten\n" -> "n"
// first and last are learned in a few hundred steps; copying a whole word takes thousands.
std::vector<std::string> sft_task_names();
// `count` examples cycling through `tasks` (names from sft_task_names(); InvalidArgument for
// another), words and numbers drawn from Generator(seed). Prompts listed in `exclude` are
// skipped (and drawn again), which keeps held-out evaluation prompts out of training.
std::vector<SftExample> generate_sft_tasks(const std::vector<std::string>& tasks, std::int64_t count,
                                           std::uint64_t seed,
                                           const std::vector<std::string>& exclude = {});

inline constexpr std::int64_t kIgnoreIndex = -100;

struct SftEncoding {
  TensorDataset rows;                  // inputs, targets: i64 (N, block_size)
  std::int64_t truncated = 0;          // responses cut to fit block_size
  std::int64_t block_size_needed = 0;  // the block_size that would fit every example whole
  std::int64_t response_tokens = 0;    // targets that are not kIgnoreIndex
};

// Every example's tokens, one after another: prompt (with the tokenizer's leading special
// tokens), response and end-of-text. What the token cache keeps: compact, and independent of
// block_size's padding.
struct SftTokens {
  std::vector<std::int32_t> ids;
  std::vector<std::int64_t> starts;          // example i is ids[starts[i], starts[i + 1])
  std::vector<std::int64_t> prompt_lengths;  // of each example
};
// Tokenizes on every core (a tokenizer encodes on many threads at once).
SftTokens tokenize_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer);
// The rows of encode_sft from tokens; `examples` name an example in errors, `pad` fills rows.
SftEncoding sft_rows(const SftTokens& tokens, const std::vector<SftExample>& examples,
                     std::int64_t pad, std::int64_t block_size);

// Each example becomes prompt (with the tokenizer's leading special tokens) + response +
// end-of-text, inputs the first block_size tokens of it padded with the pad id, targets the next
// token wherever that token belongs to the response (or is the end-of-text) and kIgnoreIndex
// elsewhere. A response that does not fit is truncated (counted);
// an empty prompt, or one that leaves no room for a response token, throws ConfigError naming
// the example by its origin.
SftEncoding encode_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                       std::int64_t block_size);

}  // namespace genesis::data
