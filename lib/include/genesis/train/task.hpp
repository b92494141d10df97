// A Task is what the trainer optimises: a model built from the config and its train/eval data.
// Both kinds score a batch the same way (cross-entropy over the last dim of the logits and the
// fraction of argmax hits), so the loop does not branch on the model kind.
#pragma once

#include <memory>
#include <string>

#include "genesis/core/config.hpp"
#include "genesis/data/dataset.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::train {

struct Task {
  std::shared_ptr<nn::Module> model;
  data::TensorDataset train;
  data::TensorDataset eval;
  std::int64_t tokens_per_example = 1;  // sequence length for language models
  double flops_per_token = 0;           // training FLOPs per token (forward + backward)
  std::string description;              // one line for the start-up banner
  // SFT: held-out examples whose prompts the model completes by greedy generation; evaluation
  // reports the fraction it answers exactly. Empty for the other tasks.
  std::vector<data::SftExample> generation_eval;
  // Targets hold the ignore index (SFT prompts and padding): batches of one size score different
  // numbers of targets, so the trainer weights each by its count (see trainer.cpp).
  bool masked_targets = false;
};

// Builds the model (initialised from config.seed) and generates the data (from config.seed + 1).
Task make_task(const Config& config);

struct BatchScore {
  Tensor loss;            // 0-d, differentiable
  double correct = 0;     // argmax hits in the batch
  double predictions = 0; // predictions scored (targets other than the ignore index)
};

// Targets other than the ignore index (an SFT prompt, padding) in a batch still on the host:
// the predictions it is scored on, counted before upload so no device reduction waits for it.
double scored_targets(const Tensor& host_targets);
// The loss (mean over scored targets) and argmax hits of `logits`; `scored` is
// scored_targets() of the same batch.
BatchScore score_logits(const Tensor& logits, const Tensor& targets, double scored);

}  // namespace genesis::train
