// The prompts of the online algorithms (grpo, ppo): each as its tokens, the answer the exact and
// chars rewards expect, and the data file's row a reward.command program receives. A training
// row holds only its prompt's index, so the data order, the ranks' shards and a resume treat
// prompts as any other rows while the prompts themselves keep their own lengths.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/data/dataset.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/data/text_tokenizer.hpp"

namespace genesis::train {

using Tokens = std::vector<std::int64_t>;
using DataRow = std::shared_ptr<const nlohmann::ordered_json>;

struct PromptItem {
  Tokens prompt;
  Tokens answer;  // through its stop id; empty for a prompt-only row
  DataRow row;    // null for the built-in tasks
};

struct PromptRows {
  data::TensorDataset rows;  // inputs and targets (N, 1) i64: the prompt's index in `items`
  std::shared_ptr<const std::vector<PromptItem>> items;
};

// The examples' prompts and answers, leaving out (with a warning) those whose prompt leaves no
// room for a completion in block_size tokens. ConfigError when none is left.
PromptRows prompt_rows(const std::vector<data::SftExample>& examples,
                       const data::TextTokenizer& tokenizer, std::int64_t block_size);

// What grpo and ppo sample from and how they read what they sample.
struct OnlineData {
  std::shared_ptr<const std::vector<PromptItem>> train;  // the prompts the rows index
  std::vector<data::SftExample> eval;  // held-out prompts evaluation completes greedily
  std::shared_ptr<const data::TextTokenizer> tokenizer;
  std::vector<std::int64_t> stops;  // the ids a completion ends at (generation_stops)
};

// A micro-batch's prompts, answers and rows, each repeated `copies` times in a row.
struct PromptSet {
  std::vector<Tokens> prompts, answers;
  std::vector<DataRow> rows;  // empty, or one per prompt
};
PromptSet prompts_of(const data::TensorDataset& rows, const std::vector<PromptItem>& items,
                     std::int64_t copies);

}  // namespace genesis::train
