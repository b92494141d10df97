// Model and data construction per model.kind; the config validator has already checked values.
#include "genesis/train/task.hpp"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/synthetic.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::train {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// A data file named relatively is looked up in the working directory, then next to the presets
// (where the sample data ships), so `data.source = "jsonl:sft-sample.jsonl"` works anywhere.
std::filesystem::path data_file(const std::string& name) {
  const std::filesystem::path path(name);
  if (path.is_absolute() || std::filesystem::exists(path)) return path;
  for (const auto& dir : preset_dirs())
    if (std::filesystem::exists(dir / path)) return dir / path;
  return path;
}

// SFT examples from data.source: "tasks:a,b" generates num_samples examples with the eval share
// held out as distinct prompts; "jsonl:FILE" reads the file and holds out its last lines.
void load_sft_data(const Config& config, Task& task) {
  const DataConfig& d = config.data;
  const auto n_eval = static_cast<std::int64_t>(
      std::llround(static_cast<double>(d.num_samples) * d.eval_fraction));
  std::vector<data::SftExample> train, eval;
  if (d.source.rfind("tasks:", 0) == 0) {
    std::vector<std::string> names = split_list(d.source.substr(6));
    if (names == std::vector<std::string>{"all"}) names = data::sft_task_names();
    try {
      eval = data::generate_sft_tasks(names, n_eval, config.seed + 1);
      std::vector<std::string> held_out;
      for (const auto& e : eval) held_out.push_back(e.prompt);
      train = data::generate_sft_tasks(names, d.num_samples - n_eval, config.seed + 2, held_out);
    } catch (const InvalidArgument& e) {
      throw ConfigError("data.source = \"" + d.source + "\": " + e.what());
    }
  } else {
    std::vector<data::SftExample> all = data::read_sft_jsonl(data_file(d.source.substr(6)));
    const auto held = static_cast<std::int64_t>(
        std::llround(static_cast<double>(all.size()) * d.eval_fraction));
    eval.assign(all.end() - held, all.end());
    train.assign(all.begin(), all.end() - held);
  }
  GENESIS_CHECK(!train.empty(), ConfigError,
                "data.source = \"" + d.source + "\" leaves no training examples: raise "
                "data.num_samples or lower data.eval_fraction");
  const data::ByteTokenizer tokenizer;
  const data::SftEncoding encoded = data::encode_sft(train, tokenizer, config.model.block_size);
  if (encoded.truncated > 0)
    spdlog::warn("{} of {} SFT responses were cut to fit model.block_size = {}", encoded.truncated,
                 train.size(), config.model.block_size);
  task.train = encoded.rows;
  if (!eval.empty()) task.eval = data::encode_sft(eval, tokenizer, config.model.block_size).rows;
  task.generation_eval = std::move(eval);
}

}  // namespace

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
    nn::GPTConfig g{m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size, m.dropout};
    auto gpt = std::make_shared<nn::GPT>(g, init);
    gpt->set_gradient_checkpointing(config.training.gradient_checkpointing);
    task.flops_per_token = gpt->flops_per_token(m.block_size);
    task.model = gpt;
    if (d.source == "synthetic:tokens") {
      std::tie(task.train, task.eval) = data::make_synthetic_tokens(
          d.num_samples, m.block_size, m.vocab_size, d.eval_fraction, config.seed + 1);
    } else {
      load_sft_data(config, task);
      task.masked_targets = true;
    }
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

double scored_targets(const Tensor& host_targets) {
  const Tensor t = host_targets.contiguous();
  const std::int64_t* v = t.data<std::int64_t>();
  return static_cast<double>(
      std::count_if(v, v + t.numel(), [](std::int64_t x) { return x != data::kIgnoreIndex; }));
}

BatchScore score_logits(const Tensor& low_or_f32_logits, const Tensor& targets, double scored) {
  // Under autocast the logits come out in bf16/fp16; the loss (and fp16's scaled loss, far past
  // fp16's range) is computed from an f32 copy, as torch.autocast runs cross_entropy in f32.
  const Tensor logits = low_or_f32_logits.dtype() == DType::f32 ? low_or_f32_logits
                                                                : low_or_f32_logits.to(DType::f32);
  BatchScore s;
  s.loss = cross_entropy(logits, targets);
  NoGradGuard no_grad;
  Tensor hits = eq(argmax(logits, -1), targets);
  s.correct = sum(hits).item<double>();  // ignored targets are never hit (argmax >= 0)
  s.predictions = scored;
  return s;
}

}  // namespace genesis::train
