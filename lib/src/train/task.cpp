// Model and data construction per model.kind; the config validator has already checked values.
#include "genesis/train/task.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/synthetic.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/tensor/ops.hpp"

namespace genesis::train {

Task make_task(const Config& config) {
  const ModelConfig& m = config.model;
  const DataConfig& d = config.data;
  Generator init(config.seed);
  Task task;
  if (m.kind == "mlp") {
    GENESIS_CHECK(d.source == "synthetic:classification", ConfigError,
                  "model.kind = \"mlp\" trains on data.source = \"synthetic:classification\", got \"" +
                      d.source + "\"");
    task.model = std::make_shared<nn::MLP>(m.input_size, m.hidden_sizes, m.num_classes, init);
    std::tie(task.train, task.eval) = data::make_synthetic_classification(
        d.num_samples, m.input_size, m.num_classes, d.eval_fraction, config.seed + 1);
    task.flops_per_token = 6.0 * static_cast<double>(task.model->num_parameters());
    task.description = "mlp " + std::to_string(m.input_size);
    for (auto h : m.hidden_sizes) task.description += "-" + std::to_string(h);
    task.description += "-" + std::to_string(m.num_classes);
  } else if (m.kind == "gpt") {
    GENESIS_CHECK(d.source == "synthetic:tokens", ConfigError,
                  "model.kind = \"gpt\" trains on data.source = \"synthetic:tokens\", got \"" +
                      d.source + "\"");
    nn::GPTConfig g{m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size, m.dropout};
    auto gpt = std::make_shared<nn::GPT>(g, init);
    task.flops_per_token = gpt->flops_per_token(m.block_size);
    task.model = gpt;
    std::tie(task.train, task.eval) = data::make_synthetic_tokens(
        d.num_samples, m.block_size, m.vocab_size, d.eval_fraction, config.seed + 1);
    task.tokens_per_example = m.block_size;
    task.description = "gpt n_layer=" + std::to_string(m.n_layer) +
                       " n_head=" + std::to_string(m.n_head) + " n_embd=" + std::to_string(m.n_embd) +
                       " block_size=" + std::to_string(m.block_size) +
                       " vocab_size=" + std::to_string(m.vocab_size);
  } else {
    throw ConfigError("unknown model.kind \"" + m.kind + "\" (expected mlp or gpt)");
  }
  GENESIS_CHECK(task.train.size() > 0, ConfigError,
                "the training split is empty: raise data.num_samples or lower data.eval_fraction");
  return task;
}

BatchScore score_batch(nn::Module& model, const Tensor& inputs, const Tensor& targets) {
  return score_logits(model.forward(inputs), targets);
}

BatchScore score_logits(const Tensor& logits, const Tensor& targets) {
  BatchScore s;
  s.loss = cross_entropy(logits, targets);
  NoGradGuard no_grad;
  Tensor hits = eq(argmax(logits, -1), targets);
  s.correct = sum(hits).item<double>();
  s.predictions = static_cast<double>(targets.numel());
  return s;
}

}  // namespace genesis::train
