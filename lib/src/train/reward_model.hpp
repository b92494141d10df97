// Rewards from a reward model (reward.model): a gpt with a value head trained by
// training.algorithm = "rm", loaded from its run, checkpoint or export, scoring prompt +
// completion by its value at the completion's last token before end-of-text, as it was trained to
// score a response.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "genesis/nn/gpt.hpp"

namespace genesis::train {

class RewardModel {
 public:
  // `shape`: the model's (the policy's shape with a value head). ConfigError when the path has no
  // such model, or no trained value head.
  RewardModel(const std::string& path, nn::GPTConfig shape, Device device);
  std::vector<double> score(const std::vector<std::vector<std::int64_t>>& prompts,
                            const std::vector<std::vector<std::int64_t>>& completions) const;

 private:
  std::shared_ptr<nn::GPT> model_;
  Device device_;
};

}  // namespace genesis::train
