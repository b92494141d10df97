// Rewards from a reward model (reward.model): the policy's model (gpt or an hf family) with a
// value head trained by training.algorithm = "rm", loaded from its run, checkpoint or export,
// scoring prompt + completion by its value at the completion's last token, as it was trained to
// score a response (its end-of-text or end-of-turn was a target there, never an input).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "genesis/nn/causal_lm.hpp"
#include "model_choice.hpp"

namespace genesis::train {

class RewardModel {
 public:
  // The policy's model with a value head, scoring sequences of block_size tokens. ConfigError
  // when the path has no such model, or no trained value head.
  RewardModel(const std::string& path, const ModelChoice& shape, std::int64_t block_size,
              Device device);
  // completions without the stop token they ended on.
  std::vector<double> score(const std::vector<std::vector<std::int64_t>>& prompts,
                            const std::vector<std::vector<std::int64_t>>& completions) const;

 private:
  std::shared_ptr<nn::CausalLM> model_;
  std::int64_t block_size_;
  Device device_;
};

}  // namespace genesis::train
