// A Task is what the trainer trains: a model built from the config, the rows the loop draws
// training batches from, and the objective that turns them into a loss and evaluates the model
// on its held-out data. make_task picks the objective the model and data call for, so the loop
// never branches on either.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/data/dataset.hpp"
#include "genesis/nn/module.hpp"
#include "init_weights.hpp"
#include "objective.hpp"

namespace genesis::train {

struct Task {
  std::shared_ptr<nn::Module> model;
  data::TensorDataset train;
  std::int64_t eval_examples = 0;        // held out for the objective's evaluation
  std::unique_ptr<Objective> objective;
  // Builds the frozen reference model the objective compares with (DPO), which the run loads
  // from model.init_from and hands to objective->set_reference; empty: none. Called outside the
  // deferred-init scope, so the policy's sharding never sees it.
  std::function<std::shared_ptr<nn::Module>()> make_reference;
  // Parts of the model that model.init_from does not give (a PPO critic model's "critic."), each
  // read from its own source when the run starts from model.init_from.
  std::vector<InitPart> init_parts;
  std::int64_t tokens_per_example = 1;  // sequence length for language models
  // Each training row's input tokens that are not padding (SFT rows, packed or not); empty:
  // every row holds tokens_per_example.
  std::vector<std::int64_t> row_tokens;
  // The real (not padding) input tokens of training rows `rows`.
  std::int64_t real_tokens(const std::vector<std::int64_t>& rows) const;
  double flops_per_token = 0;           // training FLOPs per token (forward + backward)
  std::string description;              // one line for the start-up banner
  // With lora.r > 0: PEFT's print_trainable_parameters line; empty otherwise.
  std::string lora;
  // A Hugging Face model's directory (its config.json, generation_config.json and tokenizer
  // files): the run keeps a copy in <run>/hf, which export and inference read. Empty: none.
  std::filesystem::path hf_dir;
  // The tokenizer of its text data (data.tokenizer); null for a model without text.
  std::shared_ptr<const data::TextTokenizer> tokenizer;
  std::vector<std::int64_t> stop_ids;  // what generation stops at (generation_stops)
};

// Builds the model (initialised from config.seed) and generates the data (from config.seed + 1):
// model.kind "mlp" trains a ClassificationObjective, "gpt" a LanguageModelObjective (with
// masked targets and exact-match generation on SFT data).
Task make_task(const Config& config);

}  // namespace genesis::train
