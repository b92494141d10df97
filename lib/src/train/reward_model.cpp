#include "reward_model.hpp"

#include <algorithm>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "init_weights.hpp"

namespace genesis::train {

RewardModel::RewardModel(const std::string& path, const ModelChoice& shape,
                         std::int64_t block_size, Device device)
    : block_size_(block_size), device_(device) {
  Generator unused(0);
  model_ = shape.build({.value_head = true}, unused);
  InitWeights weights(path, *model_, "reward.model");
  if (!weights.fresh().empty())
    throw ConfigError("reward.model = \"" + path + "\" has no trained value head (" +
                      weights.fresh()[0] + "): train one with `genesis launch --nproc 2 train --preset rm`");
  NoGradGuard no_grad;
  for (auto& [name, p] : model_->named_parameters()) p.copy_(weights.read_full("model." + name));
  model_->to(device);
  model_->eval();
}

std::vector<double> RewardModel::score(const std::vector<std::vector<std::int64_t>>& prompts,
                                       const std::vector<std::vector<std::int64_t>>& completions) const {
  NoGradGuard no_grad;
  const std::int64_t T = block_size_;
  const auto B = static_cast<std::int64_t>(prompts.size());
  // Positions after a row's last token never reach its value (causal attention): any id pads.
  std::vector<std::int64_t> ids(static_cast<std::size_t>(B * T), 0);
  std::vector<std::int64_t> last(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<std::int64_t> seq = prompts[b];
    seq.insert(seq.end(), completions[b].begin(), completions[b].end());
    const auto n = std::min<std::int64_t>(T, static_cast<std::int64_t>(seq.size()));
    std::copy(seq.begin(), seq.begin() + n, ids.begin() + b * T);
    last[b] = b * T + n - 1;
  }
  const Tensor values = (*model_)(Tensor::from_vector(ids, {B, T}).to(device_));  // (B, T)
  const std::vector<float> v = values.to(DType::f32).to(Device::cpu()).contiguous().to_vector();
  std::vector<double> out;
  for (std::int64_t i : last) out.push_back(v[static_cast<std::size_t>(i)]);
  return out;
}

}  // namespace genesis::train
