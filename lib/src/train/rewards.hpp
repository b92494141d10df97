// Rewards of sampled completions for the online algorithms (reward.functions): built-in functions
// of a completion's tokens and its prompt's expected answer, each with a weight, summed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "genesis/data/text_tokenizer.hpp"
#include "genesis/data/tokenizer.hpp"

namespace genesis::train {

// How the rewards read a completion: the ids that end one (its last token when it ended), and
// the tokenizer that gives its text. The byte tokenizer's by default.
struct CompletionReading {
  std::vector<std::int64_t> stops{data::ByteTokenizer::kEndOfText};
  const data::TextTokenizer* tokenizer = nullptr;  // null: the tokens are bytes
  bool stopped(const std::vector<std::int64_t>& completion) const;
};

struct RewardFunction {
  std::string name;  // "exact", "chars", "format"
  double weight = 1.0;
};

// "exact:1.0" entries of reward.functions; ConfigError naming a bad entry (unknown name, a weight
// that is not a number).
std::vector<RewardFunction> parse_reward_functions(const std::vector<std::string>& specs);

// One completion's rewards: values[i] of functions[i], and their weighted sum.
struct Rewards {
  std::vector<double> values;
  double total = 0;
};

// exact: 1 when `completion` is `answer` (the expected tokens, its stop id included), else 0.
// chars: the share of positions where completion and answer hold the same token, over the longer
// one's length (partial credit: 1 only for the answer, 0.75 for "124" + end-of-text against "123").
// format: 1 when the completion ends with a stop id and its text before it is printable: bytes
// from ' ' to '~' or a newline, or with a tokenizer, whole UTF-8 characters (no U+FFFD) without
// control characters but newlines and tabs; else 0.
Rewards score_completion(const std::vector<RewardFunction>& functions,
                         const std::vector<std::int64_t>& completion,
                         const std::vector<std::int64_t>& answer,
                         const CompletionReading& reading = {});

// Whether any of `functions` compares a completion with an expected answer (exact, chars).
bool needs_answers(const std::vector<RewardFunction>& functions);

}  // namespace genesis::train
