// The model of a LoRA run (lora.r > 0): the family's model with adapters on the targeted linear
// layers (nn/lora.hpp), each unit announced while the model is built adapted (and its base
// frozen, and stored as lora.base_dtype says) before a sharding strategy sees it, the rest once
// it is built; the adapters start from lora.init_from's when it names one. ConfigError, before
// anything trains, for targets that name nothing and a starting adapter that does not fit.
#pragma once

#include <memory>

#include "genesis/core/config.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "model_choice.hpp"

namespace genesis::train {

std::shared_ptr<nn::CausalLM> build_lora_model(const Config& config, const ModelChoice& choice,
                                               const nn::ModelHeads& heads, Generator& init);

}  // namespace genesis::train
