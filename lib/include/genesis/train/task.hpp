// A Task is what the trainer optimises: a model built from the config and its train/eval data.
// Both kinds score a batch the same way (cross-entropy over the last dim of the logits and the
// fraction of argmax hits), so the loop does not branch on the model kind.
#pragma once

#include <memory>
#include <string>

#include "genesis/core/config.hpp"
#include "genesis/data/dataset.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::train {

struct Task {
  std::shared_ptr<nn::Module> model;
  data::TensorDataset train;
  data::TensorDataset eval;
  std::int64_t tokens_per_example = 1;  // sequence length for language models
  double flops_per_token = 0;           // training FLOPs per token (forward + backward)
  std::string description;              // one line for the start-up banner
};

// Builds the model (initialised from config.seed) and generates the data (from config.seed + 1).
Task make_task(const Config& config);

struct BatchScore {
  Tensor loss;            // 0-d, differentiable
  double correct = 0;     // argmax hits in the batch
  double predictions = 0; // predictions scored
};

BatchScore score_batch(nn::Module& model, const Tensor& inputs, const Tensor& targets);
BatchScore score_logits(const Tensor& logits, const Tensor& targets);

}  // namespace genesis::train
