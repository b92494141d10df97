#include "prompt_rows.hpp"

#include <spdlog/spdlog.h>

#include "genesis/core/error.hpp"
#include "genesis/data/sft_layout.hpp"

namespace genesis::train {

PromptRows prompt_rows(const std::vector<data::SftExample>& examples,
                       const data::TextTokenizer& tokenizer, std::int64_t block_size) {
  auto items = std::make_shared<std::vector<PromptItem>>();
  std::int64_t too_long = 0, cut = 0;
  for (const data::SftExample& e : examples) {
    data::PromptAnswer pa = data::prompt_and_answer(e, tokenizer);
    const auto length = static_cast<std::int64_t>(pa.prompt.size());
    if (length >= block_size) {
      ++too_long;
      continue;
    }
    if (length + static_cast<std::int64_t>(pa.answer.size()) > block_size) ++cut;
    items->push_back({std::move(pa.prompt), std::move(pa.answer), e.row});
  }
  if (too_long > 0)
    spdlog::warn("{} of {} prompts leave no room for a completion in model.block_size = {}: "
                 "left out", too_long, examples.size(), block_size);
  if (cut > 0)
    spdlog::warn("{} of {} prompts leave too little room for their whole expected answer in "
                 "model.block_size = {}: the exact reward cannot reach 1 on them",
                 cut, examples.size(), block_size);
  GENESIS_CHECK(!items->empty(), ConfigError,
                "no prompt fits model.block_size = " + std::to_string(block_size) +
                    " with room for a completion");
  const auto n = static_cast<std::int64_t>(items->size());
  std::vector<std::int64_t> index(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) index[static_cast<std::size_t>(i)] = i;
  return {{Tensor::from_vector(index, {n, 1}), Tensor::from_vector(index, {n, 1})},
          std::move(items)};
}

PromptSet prompts_of(const data::TensorDataset& rows, const std::vector<PromptItem>& items,
                     std::int64_t copies) {
  const Tensor index = rows.inputs.to(Device::cpu()).contiguous();
  PromptSet set;
  for (std::int64_t r = 0; r < index.size(0); ++r) {
    const std::int64_t i = index.data<std::int64_t>()[r * index.size(1)];
    GENESIS_CHECK(i >= 0 && i < static_cast<std::int64_t>(items.size()), InvalidArgument,
                  "a prompt row names prompt " + std::to_string(i) + " of " +
                      std::to_string(items.size()));
    const PromptItem& item = items[static_cast<std::size_t>(i)];
    for (std::int64_t g = 0; g < copies; ++g) {
      set.prompts.push_back(item.prompt);
      set.answers.push_back(item.answer);
      set.rows.push_back(item.row);
    }
  }
  return set;
}

}  // namespace genesis::train
