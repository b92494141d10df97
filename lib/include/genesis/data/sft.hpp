// Supervised fine-tuning data: examples in TRL's formats from JSONL or JSON files, or from a
// built-in generator of small instruction tasks, and their encoding into fixed-length training
// rows whose loss covers the trained tokens only (a completion, the assistant's turns). One
// example per row, padded, so every row starts at its prompt and evaluation can feed the same
// prompts to generation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/core/config.hpp"
#include "genesis/data/dataset.hpp"
#include "genesis/data/text_tokenizer.hpp"

namespace genesis::data {

// What an example's text is, after TRL's dataset types: a prompt and its completion (strings),
// a text trained whole (language modelling), or a conversation (a message list, with or without
// a prompt part).
enum class ExampleForm { prompt_completion, text, conversation };

struct SftExample {
  // prompt_completion: the two strings. text: response holds it. conversation: "role: content"
  // lines up to the last assistant message, and that message's content, for logs and reports
  // (the tokenizer renders `messages` itself).
  std::string prompt;
  std::string response;
  // Where it came from, for errors about it: "FILE:LINE" from a data file, the task and its
  // prompt from generate_sft_tasks; "" names it by its position in the list instead.
  std::string origin{};
  std::string task{};  // the built-in task's name ("add"); empty for examples from a file
  ExampleForm form = ExampleForm::prompt_completion;
  // conversation: the messages as read (key order kept, as templates' tojson shows it), and how
  // many of them are the prompt of TRL's prompt-completion form; 0 for {"messages": [...]}.
  std::shared_ptr<const nlohmann::ordered_json> messages{};
  std::size_t prompt_messages = 0;
  // The data file's row as read, every key kept: what a reward.command program receives beside
  // a completion of its prompt. Null for the built-in tasks.
  std::shared_ptr<const nlohmann::ordered_json> row{};
};

// Whether the example holds an answer to train on or to match: a prompt-only row (a prompt of
// grpo and ppo) holds none.
bool has_answer(const SftExample& example);

// The data file formats data.source names: "jsonl:FILE" (one object per line) and "json:FILE"
// (one array of objects).
enum class RowFile { jsonl, json };

// TRL's SFT formats, recognised by their keys: {"text"}; {"prompt", "completion"} and
// {"prompt", "response"} as strings or message lists; {"messages": [...]} with any number of
// turns. Blank lines are skipped. Anything else (preference or prompt-only rows among them)
// throws ConfigError naming the file and line, the keys found and the keys expected; each
// example keeps its "FILE:LINE" as origin, for the errors found later.
std::vector<SftExample> read_sft_examples(const std::filesystem::path& path, RowFile format);
// The prompts of grpo and ppo: TRL's prompt-only {"prompt"} (a string or a message list) with
// any other keys, and the SFT formats above, whose answer (the completion, the last assistant
// message) is the one the exact and chars rewards expect; a {"messages"} row that does not end
// with an assistant message is all prompt. Every example keeps its row. ConfigError as above.
std::vector<SftExample> read_prompt_examples(const std::filesystem::path& path, RowFile format);
inline std::vector<SftExample> read_sft_jsonl(const std::filesystem::path& path) {
  return read_sft_examples(path, RowFile::jsonl);
}

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

// The same rules over whole words, as single-turn conversations for a subword tokenizer
// (data.source = "chat:a,b"), words from a fixed list of common English words:
//   reverse "Reverse the order of these words: moon river" -> "river moon"
//   sort    "Sort these words alphabetically: moon river apple" -> "apple moon river"
//   copy    "Repeat these words: moon river" -> "moon river"
//   upper   "Write these words in capital letters: moon" -> "MOON"
//   add     "What is 27 plus 38?" -> "65"
// InvalidArgument for an unknown name; `exclude` as for generate_sft_tasks (their prompt).
std::vector<std::string> chat_task_names();
std::vector<SftExample> generate_chat_tasks(const std::vector<std::string>& tasks,
                                            std::int64_t count, std::uint64_t seed,
                                            const std::vector<std::string>& exclude = {});

inline constexpr std::int64_t kIgnoreIndex = -100;

struct SftEncoding {
  TensorDataset rows;                  // inputs, targets: i64 (N, block_size)
  std::int64_t truncated = 0;          // responses cut to fit block_size
  std::int64_t block_size_needed = 0;  // the block_size that would fit every example whole
  std::int64_t response_tokens = 0;    // targets that are not kIgnoreIndex
};

// Which tokens the loss covers (data.completion_only_loss, data.assistant_only_loss) and which
// end of a long example is kept (data.truncation_mode).
struct SftLoss {
  bool completion_only = true;
  bool assistant_only = true;
  TruncationMode truncation = TruncationMode::keep_start;
};

// Every example's tokens, one after another (sft_layout.hpp says how an example becomes tokens),
// and whether each is a training target. What the token cache keeps: compact, and independent of
// block_size's padding.
struct SftTokens {
  std::vector<std::int32_t> ids;
  std::vector<std::int64_t> starts;   // example i is ids[starts[i], starts[i + 1])
  std::vector<std::uint8_t> trained;  // per id: 1 where the model is trained to predict it
};
// Tokenizes on every core (a tokenizer encodes on many threads at once).
SftTokens tokenize_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                       const SftLoss& loss = {});
// The rows of encode_sft from tokens; `examples` name an example in errors, `pad` fills rows.
SftEncoding sft_rows(const SftTokens& tokens, const std::vector<SftExample>& examples,
                     std::int64_t pad, std::int64_t block_size,
                     TruncationMode truncation = TruncationMode::keep_start);

// Each example's tokens, inputs the first block_size of them (the last, with keep_end) padded
// with the pad id, targets the next token wherever that token is trained and kIgnoreIndex
// elsewhere. An example that does not fit is truncated (counted); one whose kept part trains
// no token throws ConfigError naming the example by its origin.
SftEncoding encode_sft(const std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                       std::int64_t block_size, const SftLoss& loss = {});

}  // namespace genesis::data
