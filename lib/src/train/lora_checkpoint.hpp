// A LoRA run's checkpoints hold its adapters (and modules_to_save) with their optimizer state,
// not the frozen base: the base comes from model.init_from (or the seed) as the run starts, and
// the checkpoint records which base it was (its path and a hash of its config.json and tensor
// headers), so a resume onto another base is refused instead of silently mixing them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/state_piece.hpp"
#include "genesis/core/config.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::train {

// The pieces without the model's frozen parameters.
std::vector<ckpt::StatePiece> without_frozen(std::vector<ckpt::StatePiece> pieces,
                                             const nn::Module& model);

// {"base": model.init_from or "seed N", "base_hash": 16 hex digits} of the run's base model.
nlohmann::json lora_base_identity(const Config& config, const nn::Module& model);

// ConfigError when a checkpoint's recorded base (its info["lora"]) is not `current`'s.
void check_lora_base(const nlohmann::json& saved, const nlohmann::json& current,
                     const std::string& checkpoint);

// A checkpoint of a LoRA run as a full state: its own tensors, and the model's frozen parameters
// as they are now (loaded from the base before the checkpoint).
class WithFrozenBase : public ckpt::StateSource {
 public:
  WithFrozenBase(const ckpt::StateSource& checkpoint, const nn::Module& model);
  bool contains(const std::string& name) const override;
  Shape shape(const std::string& name) const override;
  Tensor read(const std::string& name, std::int64_t offset, std::int64_t numel) const override;

 private:
  const ckpt::StateSource& checkpoint_;
  std::map<std::string, Tensor> frozen_;  // "model.<name>" -> the live parameter
};

}  // namespace genesis::train
