// Preference data for reward models (and DPO): a prompt with a chosen and a rejected response,
// generated from the built-in tasks, and their encoding into pairs of rows laid out as SFT's, so
// that one pair's two sequences run through the model in one batch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "genesis/data/dataset.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/data/text_tokenizer.hpp"

namespace genesis::data {

struct PreferencePair {
  std::string prompt;
  std::string chosen;
  std::string rejected;
  std::string origin{};  // for errors about it, as SftExample's
  // How much more the chosen is preferred (TRL's optional "margin" column): a reward model is
  // asked for r_chosen - r_rejected above it. 0 for generated pairs.
  double margin = 0;
  std::string task{};  // as SftExample's: the built-in task's name, empty for a file's pairs
  // Conversational pairs: the prompt's messages followed by the chosen's, and by the rejected's,
  // and how many are the prompt's (prompt, chosen and rejected above then show them as text).
  std::shared_ptr<const nlohmann::ordered_json> chosen_messages{}, rejected_messages{};
  std::size_t prompt_messages = 0;
};

// TRL's preference type, as strings or message lists, with an optional numeric "margin":
// {"prompt", "chosen", "rejected"}, or with the prompt implicit, {"chosen", "rejected"}, whose
// shared start is the prompt, as TRL's extract_prompt finds it (the leading messages both lists
// share; for strings, the common prefix less a space it ends with). Blank lines are skipped; a
// row of another type, or a bad field, throws ConfigError naming the file, line and keys. An
// empty response is left for encode_preference_pairs to name.
std::vector<PreferencePair> read_preference_pairs(const std::filesystem::path& path,
                                                  RowFile format);
inline std::vector<PreferencePair> read_preference_jsonl(const std::filesystem::path& path) {
  return read_preference_pairs(path, RowFile::jsonl);
}

// `count` pairs from the built-in SFT tasks (generate_sft_tasks, the same names and `exclude`):
// chosen is the task's answer, rejected a plausible wrong one drawn from Generator(seed + 1): a
// digit off by one, two neighbouring letters swapped, one letter changed, or the answer cut short.
// Never equal to chosen.
std::vector<PreferencePair> generate_preference_pairs(const std::vector<std::string>& tasks,
                                                      std::int64_t count, std::uint64_t seed,
                                                      const std::vector<std::string>& exclude = {});

// Rows of pairs: inputs and targets i64 (N, 2, block_size), [:, 0] the chosen and [:, 1] the
// rejected sequence, each encoded as encode_sft encodes a prompt and its completion (for
// conversations, TRL's: the prompt rendered with its generation prompt, the completion what the
// whole conversation adds to it): targets score the completion and its end (end-of-text, or the
// template's end of turn), so a sequence's last scored position is its last completion token.
// When a pair has a margin, extra holds every pair's, (N) f32. An empty chosen or rejected
// response, or a pair whose longer sequence does not fit block_size, throws ConfigError naming
// the pair.
TensorDataset encode_preference_pairs(const std::vector<PreferencePair>& pairs,
                                      const TextTokenizer& tokenizer, std::int64_t block_size);

// A pair's chosen side as an SFT example (a prompt and its completion), for generation from its
// prompt and for encoding; the rejected side when `rejected`.
SftExample preference_side(const PreferencePair& pair, bool rejected = false);

}  // namespace genesis::data
