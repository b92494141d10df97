// Model, data and objective per model.kind; the config validator has already checked values.
#include "task.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "classification_objective.hpp"
#include "dpo_objective.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/preset_paths.hpp"
#include "genesis/data/packing.hpp"
#include "genesis/data/preference.hpp"
#include "genesis/data/sft_layout.hpp"
#include "genesis/data/synthetic.hpp"
#include "genesis/data/token_cache.hpp"
#include "genesis/tokenizer/tokenize_jsonl.hpp"
#include "genesis/nn/lora.hpp"
#include "genesis/nn/mlp.hpp"
#include "grpo_objective.hpp"
#include "language_model_objective.hpp"
#include "lora_model.hpp"
#include "model_choice.hpp"
#include "ppo_objective.hpp"
#include "reward_objective.hpp"
#include "rollouts.hpp"

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

// Whether data.source names a data file: "jsonl:FILE" or "json:FILE".
bool is_data_file(const std::string& source) {
  return source.rfind("jsonl:", 0) == 0 || source.rfind("json:", 0) == 0;
}

data::RowFile data_format(const std::string& source) {
  return source.rfind("json:", 0) == 0 ? data::RowFile::json : data::RowFile::jsonl;
}

// data.source's file, in the working directory or beside the presets (the sample data).
std::filesystem::path data_file(const std::string& source) {
  return find_beside_presets(source.substr(source.find(':') + 1));
}

data::SftLoss sft_loss(const DataConfig& d) {
  return {.completion_only = d.completion_only_loss, .assistant_only = d.assistant_only_loss,
          .truncation = d.truncation_mode};
}

// Examples of the built-in tasks data.source names after its prefix ("tasks:a,b", "pairs:a,b";
// "all": every task): the eval share with seed + 1, then the rest with `train_seed`, skipping the
// held-out prompts. `generate` is data::generate_sft_tasks or data::generate_preference_pairs.
template <class Example, class Generate>
void generate_split(const Config& config, std::uint64_t train_seed, Generate generate,
                    std::vector<Example>& train, std::vector<Example>& eval) {
  const DataConfig& d = config.data;
  std::vector<std::string> names = split_list(d.source.substr(d.source.find(':') + 1));
  if (names == std::vector<std::string>{"all"})
    names = d.source.rfind("chat:", 0) == 0 ? data::chat_task_names() : data::sft_task_names();
  const auto n_eval = static_cast<std::int64_t>(
      std::llround(static_cast<double>(d.num_samples) * d.eval_fraction));
  try {
    eval = generate(names, n_eval, config.seed + 1, {});
    std::vector<std::string> held_out;
    for (const auto& e : eval) held_out.push_back(e.prompt);
    train = generate(names, d.num_samples - n_eval, train_seed, held_out);
  } catch (const InvalidArgument& e) {
    throw ConfigError("data.source = \"" + d.source + "\": " + e.what());
  }
}

// A file's examples with its last eval_fraction held out.
template <class Example>
void split_tail(std::vector<Example> all, double eval_fraction, std::vector<Example>& train,
                std::vector<Example>& eval) {
  const auto held = static_cast<std::ptrdiff_t>(
      std::llround(static_cast<double>(all.size()) * eval_fraction));
  eval.assign(all.end() - held, all.end());
  train.assign(all.begin(), all.end() - held);
}

// The rows of SFT data, and the held-out examples whose prompts evaluation completes.
struct SftData {
  data::TensorDataset train, eval;
  std::vector<data::SftExample> prompts;
  std::vector<std::int64_t> row_tokens;  // each training row's inputs that are not padding
};

// data.packing's training rows from the unpacked ones, with a line saying what it saved.
void pack_train_rows(SftData& data, std::int64_t pad, std::int64_t block_size) {
  const std::int64_t examples = data.train.size();
  data::PackedRows packed = data::pack_rows(data.train, data.row_tokens, pad);
  std::int64_t real = 0;
  for (const std::int64_t n : packed.row_tokens) real += n;
  const auto fill = [&](std::int64_t rows) {
    return 100.0 * static_cast<double>(real) / static_cast<double>(rows * block_size);
  };
  spdlog::info("data.packing: {} examples in {} rows of {} tokens ({:.1f}% of tokens real, "
               "{:.1f}% unpacked)",
               examples, packed.rows.size(), block_size, fill(packed.rows.size()),
               fill(examples));
  data.train = std::move(packed.rows);
  data.row_tokens = std::move(packed.row_tokens);
}

// A jsonl data file's rows through the token cache (data.cache_dir): read when an entry for
// this file's contents, this tokenizer and these settings exists, else built by `encode` and
// kept. Generated tasks are cheaper to encode than to look up and are not cached. `note` gets the
// log line saying which, for the caller to log once the rows are made (an error about the data
// stays the only line).
data::CachedRows cached_rows(const Config& config, const data::TextTokenizer& tokenizer,
                             const std::string& kind, const std::function<data::CachedRows()>& encode,
                             std::string& note) {
  const DataConfig& d = config.data;
  if (!is_data_file(d.source)) return encode();
  const std::filesystem::path file = data_file(d.source);
  // SFT keeps token ids, which block_size does not change; pairs keep their rows.
  const std::string key = "genesis token cache v3\nkind " + kind + "\nfile " +
                          std::string(d.source, 0, d.source.find(':')) + " " +
                          data::file_fingerprint(file) + "\ntokenizer " +
                          tokenizer.fingerprint() + "\neval_fraction " +
                          std::to_string(d.eval_fraction) + "\nloss " +
                          std::to_string(d.completion_only_loss) +
                          std::to_string(d.assistant_only_loss) + "\n" +
                          (kind == "sft" ? std::string()
                                         : "block_size " + std::to_string(config.model.block_size) +
                                               "\n");
  const data::TokenCache cache(d.cache_dir);
  const auto start = std::chrono::steady_clock::now();
  data::CacheOutcome outcome{};
  data::CachedRows rows = cache.get_or_build(key, encode, outcome);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string entry = cache.entry_path(key).string();
  note = outcome == data::CacheOutcome::kHit
             ? fmt::format("token cache hit: {} read in {:.2f} s from {}", file.string(), seconds,
                           entry)
             : fmt::format("token cache miss: {} tokenized in {:.2f} s, kept in {}",
                           file.string(), seconds, entry);
  return rows;
}

void put_rows(data::CachedRows& rows, const std::string& name, const data::TensorDataset& set) {
  rows.tensors.emplace_back(name + ".inputs", set.inputs);
  rows.tensors.emplace_back(name + ".targets", set.targets);
  if (set.extra.defined()) rows.tensors.emplace_back(name + ".extra", set.extra);
}

void put_tokens(data::CachedRows& rows, const std::string& name, const data::SftTokens& tokens) {
  const auto count = [](const auto& v) { return static_cast<std::int64_t>(v.size()); };
  rows.tensors.emplace_back(name + ".ids", Tensor::from_vector(tokens.ids, {count(tokens.ids)}));
  rows.tensors.emplace_back(name + ".starts",
                            Tensor::from_vector(tokens.starts, {count(tokens.starts)}));
  Tensor trained = Tensor::empty({count(tokens.trained)}, DType::boolean);
  std::copy(tokens.trained.begin(), tokens.trained.end(), static_cast<std::uint8_t*>(trained.raw_data()));
  rows.tensors.emplace_back(name + ".trained", trained);
}

data::SftTokens take_tokens(const data::CachedRows& rows, const std::string& name) {
  data::SftTokens tokens;
  for (const auto& [tensor_name, t] : rows.tensors) {
    if (tensor_name == name + ".ids")
      tokens.ids.assign(t.data<std::int32_t>(), t.data<std::int32_t>() + t.numel());
    if (tensor_name == name + ".starts")
      tokens.starts.assign(t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel());
    if (tensor_name == name + ".trained") {
      const auto* flags = static_cast<const std::uint8_t*>(t.raw_data());
      tokens.trained.assign(flags, flags + t.numel());
    }
  }
  return tokens;
}

data::TensorDataset take_rows(const data::CachedRows& rows, const std::string& name) {
  data::TensorDataset set;
  for (const auto& [tensor_name, tensor] : rows.tensors) {
    if (tensor_name == name + ".inputs") set.inputs = tensor;
    if (tensor_name == name + ".targets") set.targets = tensor;
    if (tensor_name == name + ".extra") set.extra = tensor;
  }
  return set;
}

// The examples data.source names: "tasks:a,b" or "chat:a,b" generates num_samples with the eval
// share held out as distinct prompts; a data file is read by `read` with its last lines held out.
// ConfigError when no training example is left.
using ReadExamples = std::vector<data::SftExample> (*)(const std::filesystem::path&, data::RowFile);
void source_examples(const Config& config, ReadExamples read, std::vector<data::SftExample>& train,
                     std::vector<data::SftExample>& eval) {
  const DataConfig& d = config.data;
  if (d.source.rfind("tasks:", 0) == 0)
    generate_split(config, config.seed + 2, data::generate_sft_tasks, train, eval);
  else if (d.source.rfind("chat:", 0) == 0)
    generate_split(config, config.seed + 2, data::generate_chat_tasks, train, eval);
  else if (is_data_file(d.source))
    split_tail(read(data_file(d.source), data_format(d.source)), d.eval_fraction, train, eval);
  else
    throw ConfigError("data.source = \"" + d.source + "\" holds no examples: \"tasks:a,b\", "
                      "\"chat:a,b\", \"jsonl:FILE\" or \"json:FILE\"");
  GENESIS_CHECK(!train.empty(), ConfigError,
                "data.source = \"" + d.source + "\" leaves no training examples: raise "
                "data.num_samples or lower data.eval_fraction");
}

// SFT examples from data.source (source_examples), as rows, and the held-out examples whose
// prompts evaluation completes.
SftData load_sft_data(const Config& config, const data::TextTokenizer& tokenizer) {
  const DataConfig& d = config.data;
  std::vector<data::SftExample> train, eval;
  source_examples(config, data::read_sft_examples, train, eval);
  std::string note;
  const data::SftLoss loss = sft_loss(d);
  const data::CachedRows tokens = cached_rows(config, tokenizer, "sft", [&] {
    data::CachedRows out;
    put_tokens(out, "train", data::tokenize_sft(train, tokenizer, loss));
    if (!eval.empty()) put_tokens(out, "eval", data::tokenize_sft(eval, tokenizer, loss));
    return out;
  }, note);
  const std::int64_t T = config.model.block_size;
  const data::SftTokens train_tokens = take_tokens(tokens, "train");
  const data::SftEncoding encoded =
      data::sft_rows(train_tokens, train, tokenizer.pad(), T, loss.truncation);
  if (encoded.truncated > 0)
    spdlog::warn("{} of {} SFT responses were cut to fit model.block_size = {} (--set "
                 "model.block_size={} fits every example whole)",
                 encoded.truncated, train.size(), T, encoded.block_size_needed);
  SftData out{.train = encoded.rows,
              .eval = {},
              .prompts = {},
              .row_tokens = data::sft_row_tokens(train_tokens, T)};
  if (!eval.empty())
    out.eval = data::sft_rows(take_tokens(tokens, "eval"), eval, tokenizer.pad(), T,
                              loss.truncation).rows;
  if (!note.empty()) spdlog::info("{}", note);
  // Generation is checked on examples with a prompt whose answer fits the block; a text, or a
  // conversation too long, is only scored by the eval loss.
  std::int64_t unfit = 0;
  for (auto& e : eval) {
    if (e.form == data::ExampleForm::text) continue;
    const data::PromptAnswer pa = data::prompt_and_answer(e, tokenizer);
    if (static_cast<std::int64_t>(pa.prompt.size() + pa.answer.size()) > T) {
      ++unfit;
      continue;
    }
    out.prompts.push_back(std::move(e));
  }
  if (unfit > 0)
    spdlog::warn("{} of {} held-out examples have a prompt and answer longer than "
                 "model.block_size = {}: exact match leaves them out", unfit, eval.size(), T);
  return out;
}

// The prompts of grpo and ppo: the built-in tasks' ("tasks:a,b") or a data file's in TRL's
// prompt-only, prompt-completion or conversational formats, the last eval_fraction held out.
OnlineData load_online_data(const Config& config, std::shared_ptr<const data::TextTokenizer> tokenizer,
                            const ModelChoice& choice, data::TensorDataset& train_rows) {
  std::vector<data::SftExample> train, eval;
  source_examples(config, data::read_prompt_examples, train, eval);
  const std::int64_t T = config.model.block_size;
  PromptRows rows = prompt_rows(train, *tokenizer, T);
  train_rows = std::move(rows.rows);
  // Evaluation completes the held-out prompts whose expected answer (or one token) fits.
  std::erase_if(eval, [&](const data::SftExample& e) {
    const data::PromptAnswer pa = data::prompt_and_answer(e, *tokenizer);
    return static_cast<std::int64_t>(pa.prompt.size() + std::max<std::size_t>(1, pa.answer.size())) > T;
  });
  std::vector<std::int64_t> stops = generation_stops(*tokenizer, choice);
  return {.train = std::move(rows.items), .eval = std::move(eval), .tokenizer = std::move(tokenizer),
          .stops = std::move(stops)};
}

// Preference pairs: generated from data.source = "pairs:a,b" (the SFT task names) with the eval
// share held out as distinct prompts, or read from "jsonl:FILE" with its last lines held out:
// rows of encode_preference_pairs, and the held-out prompts with their chosen responses.
struct PairData {
  data::TensorDataset train, eval;
  std::vector<data::SftExample> prompts;
};

PairData load_pairs(const Config& config, const data::TextTokenizer& tokenizer) {
  const DataConfig& d = config.data;
  std::vector<data::PreferencePair> train, eval;
  if (is_data_file(d.source))
    split_tail(data::read_preference_pairs(data_file(d.source), data_format(d.source)),
               d.eval_fraction, train, eval);
  else
    generate_split(config, config.seed + 3, data::generate_preference_pairs, train, eval);
  GENESIS_CHECK(!train.empty() && !eval.empty(), ConfigError,
                "data.source = \"" + d.source + "\" leaves no training or no eval pairs: add "
                "pairs, or move data.eval_fraction away from 0 and 1");
  std::string note;
  const data::CachedRows rows = cached_rows(config, tokenizer, "pairs", [&] {
    data::CachedRows out;
    put_rows(out, "train", data::encode_preference_pairs(train, tokenizer, config.model.block_size));
    put_rows(out, "eval", data::encode_preference_pairs(eval, tokenizer, config.model.block_size));
    return out;
  }, note);
  if (!note.empty()) spdlog::info("{}", note);
  PairData out{.train = take_rows(rows, "train"), .eval = take_rows(rows, "eval"), .prompts = {}};
  for (const auto& pair : eval) out.prompts.push_back(data::preference_side(pair));
  return out;
}

// The mlp and its classification data.
Task make_classifier(const Config& config, Generator& init) {
  const ModelConfig& m = config.model;
  const DataConfig& d = config.data;
  GENESIS_CHECK(d.source == "synthetic:classification", ConfigError,
                "model.kind = \"mlp\" trains on data.source = \"synthetic:classification\", got \"" +
                    d.source + "\"");
  Task task;
  task.model = std::make_shared<nn::MLP>(m.input_size, m.hidden_sizes, m.num_classes, init);
  auto [train, eval] = data::make_synthetic_classification(d.num_samples, m.input_size,
                                                           m.num_classes, d.eval_fraction, config.seed + 1);
  task.train = std::move(train);
  task.eval_examples = eval.size();
  task.objective = std::make_unique<ClassificationObjective>(std::move(eval));
  task.flops_per_token = 6.0 * static_cast<double>(task.model->num_parameters());
  task.description = "mlp " + std::to_string(m.input_size);
  for (auto h : m.hidden_sizes) task.description += "-" + std::to_string(h);
  task.description += "-" + std::to_string(m.num_classes);
  return task;
}

// The run's model with `heads` from `init` (with lora.r > 0, its adapters: lora_model.hpp), with
// the run's gradient checkpointing.
std::shared_ptr<nn::CausalLM> build_model(const Config& config, const ModelChoice& choice,
                                          const nn::ModelHeads& heads, Generator& init) {
  auto model = config.lora.enabled() ? build_lora_model(config, choice, heads, init)
                                     : choice.build(heads, init);
  model->set_gradient_checkpointing(config.training.gradient_checkpointing);
  return model;
}

// The frozen reference DPO, GRPO (beta > 0) and PPO compare the policy with: the run's model
// without a value head, whose values come from model.init_from.
std::function<std::shared_ptr<nn::Module>()> frozen_reference(const Config& config,
                                                              const ModelChoice& choice) {
  return [choice, seed = config.seed]() -> std::shared_ptr<nn::Module> {
    Generator gen(seed);
    return choice.build({}, gen);
  };
}

// The tokenizer of text data (data.tokenizer; by default an hf model's own, else the byte
// tokenizer); null for token data. Its ids must all be in the model's vocabulary.
std::shared_ptr<const data::TextTokenizer> text_tokenizer(const ModelChoice& choice,
                                                          const Config& config) {
  if (config.data.source == "synthetic:tokens") return nullptr;
  std::string setting = config.data.tokenizer;
  if (setting.empty())
    setting = choice.hf() && !choice.hf_dir().empty() && tokenizer::holds_tokenizer(choice.hf_dir())
                  ? choice.hf_dir().string()
                  : "byte";
  auto tokenizer = data::make_text_tokenizer(setting, "data.tokenizer", config.data.chat_template);
  GENESIS_CHECK(choice.vocab_size() >= tokenizer->vocab_size(), ConfigError,
                "data.source = \"" + config.data.source + "\" is text, tokenized by " +
                    tokenizer->description() + ", more ids than this model's vocabulary of " +
                    std::to_string(choice.vocab_size()) +
                    (setting == "byte" ? "" : " (data.tokenizer = \"" + setting + "\")"));
  if (setting != "byte") spdlog::info("text data: {}", tokenizer->description());
  return tokenizer;
}

// A gpt with a value head, scoring preference pairs (training.algorithm = "rm").
Task make_reward_model(const Config& config, const ModelChoice& choice, Generator& init,
               const data::TextTokenizer* tokenizer) {
  const ModelConfig& m = config.model;
  auto gpt = build_model(config, choice, {.value_head = true}, init);
  PairData pairs = load_pairs(config, *tokenizer);
  Task task;
  task.flops_per_token = gpt->flops_per_token(m.block_size);
  task.model = gpt;
  task.train = std::move(pairs.train);
  task.eval_examples = pairs.eval.size();
  task.objective = std::make_unique<RewardObjective>(std::move(pairs.eval));
  task.tokens_per_example = 2 * m.block_size;  // a pair's two sequences
  task.description = choice.description() + ", value head";
  return task;
}

// A gpt policy trained by DPO on preference pairs against a frozen copy of its init.
Task make_dpo(const Config& config, const ModelChoice& choice, Generator& init,
               const data::TextTokenizer* tokenizer) {
  const ModelConfig& m = config.model;
  auto gpt = build_model(config, choice, {}, init);
  PairData pairs = load_pairs(config, *tokenizer);
  Task task;
  // A held reference's forward adds a third of the policy's forward and backward.
  task.flops_per_token = gpt->flops_per_token(m.block_size) *
                         (config.dpo.precompute_ref_log_probs ? 1.0 : 4.0 / 3.0);
  task.model = gpt;
  task.train = std::move(pairs.train);
  task.eval_examples = pairs.eval.size();
  task.objective = std::make_unique<DpoObjective>(std::move(pairs.eval), std::move(pairs.prompts),
                                                  config.dpo);
  if (!config.dpo.precompute_ref_log_probs)
    task.make_reference = frozen_reference(config, choice);
  task.tokens_per_example = 2 * m.block_size;
  task.description = choice.description() + ", dpo against a frozen reference";
  return task;
}

// A policy trained by GRPO on prompts (their answers, where they have them, score the exact
// reward), with a frozen copy of its init when grpo.beta > 0.
Task make_grpo(const Config& config, const ModelChoice& choice, Generator& init,
               std::shared_ptr<const data::TextTokenizer> tokenizer) {
  const ModelConfig& m = config.model;
  auto gpt = build_model(config, choice, {}, init);
  Task task;
  OnlineData data = load_online_data(config, std::move(tokenizer), choice, task.train);
  const auto G = static_cast<double>(config.grpo.num_generations);
  task.flops_per_token = gpt->flops_per_token(m.block_size);
  task.model = gpt;
  task.eval_examples = data.eval.size();
  task.objective = std::make_unique<GrpoObjective>(std::move(data), config.grpo,
                                                   config.reward, config.seed, m.block_size,
                                                   choice);
  if (config.grpo.beta > 0)
    task.make_reference = frozen_reference(config, choice);
  // Each prompt trains num_generations rows of block_size tokens.
  task.tokens_per_example = static_cast<std::int64_t>(G) * m.block_size;
  task.description = choice.description() + ", grpo with " + std::to_string(config.grpo.num_generations) +
                     " completions a prompt";
  return task;
}

// A policy with a critic (a head on its trunk or a model of its own) trained by PPO on prompts,
// against a frozen copy of its init.
Task make_ppo(const Config& config, const ModelChoice& choice, Generator& init,
               std::shared_ptr<const data::TextTokenizer> tokenizer) {
  const ModelConfig& m = config.model;
  const nn::ModelHeads heads{.critic = true,
                             .critic_model = config.ppo.critic == CriticKind::model,
                             .critic_lr_scale = config.ppo.critic_lr_scale};
  auto gpt = build_model(config, choice, heads, init);
  Task task;
  OnlineData data = load_online_data(config, std::move(tokenizer), choice, task.train);
  task.flops_per_token = gpt->flops_per_token(m.block_size);
  task.model = gpt;
  task.eval_examples = data.eval.size();
  task.objective = std::make_unique<PpoObjective>(std::move(data), config.ppo,
                                                  config.reward, config.seed, m.block_size,
                                                  choice);
  task.make_reference = frozen_reference(config, choice);
  if (heads.critic_model && !m.init_from.empty()) {
    // It starts as the reward model, as TRL's value model does, or else as the policy (its
    // value head fresh).
    const bool rm = !config.reward.model.empty();
    task.init_parts.push_back({.prefix = "critic.",
                               .path = rm ? config.reward.model : m.init_from,
                               .key = rm ? "reward.model" : "model.init_from"});
  }
  task.tokens_per_example = m.block_size;
  task.description = choice.description() + (heads.critic_model ? ", ppo with a critic model"
                                                                  : ", ppo with a critic head");
  return task;
}

// The gpt and its token or SFT data.
Task make_language_model(const Config& config, const ModelChoice& choice, Generator& init,
               const data::TextTokenizer* tokenizer) {
  const ModelConfig& m = config.model;
  const DataConfig& d = config.data;
  auto gpt = build_model(config, choice, {}, init);
  Task task;
  task.flops_per_token = gpt->flops_per_token(m.block_size);
  task.model = gpt;
  SftData rows;
  const bool sft = d.source != "synthetic:tokens";
  if (sft) {  // data.packing is validated to come with SFT data
    rows = load_sft_data(config, *tokenizer);
    if (d.packing) pack_train_rows(rows, tokenizer->pad(), m.block_size);
  } else {
    std::tie(rows.train, rows.eval) = data::make_synthetic_tokens(
        d.num_samples, m.block_size, choice.vocab_size(), d.eval_fraction, config.seed + 1);
  }
  task.train = std::move(rows.train);
  task.row_tokens = std::move(rows.row_tokens);
  task.eval_examples = rows.eval.size();
  task.objective = std::make_unique<LanguageModelObjective>(
      std::move(rows.eval), std::move(rows.prompts), sft, d.packing);
  task.tokens_per_example = m.block_size;
  task.description = choice.description();
  return task;
}

}  // namespace

std::int64_t Task::real_tokens(const std::vector<std::int64_t>& rows) const {
  if (row_tokens.empty()) return static_cast<std::int64_t>(rows.size()) * tokens_per_example;
  std::int64_t sum = 0;
  for (const std::int64_t r : rows) sum += row_tokens[static_cast<std::size_t>(r)];
  return sum;
}

Task make_task(const Config& config) {
  Generator init(config.seed);
  Task task;
  const Algorithm algorithm = config.training.algorithm;
  if (config.model.kind == "mlp" && algorithm == Algorithm::sft) {
    task = make_classifier(config, init);
  } else if (config.model.kind == "gpt" || config.model.kind == "hf") {
    const ModelChoice choice(config.model);
    const auto tokenizer = text_tokenizer(choice, config);
    if (algorithm == Algorithm::dpo)
      task = make_dpo(config, choice, init, tokenizer.get());
    else if (algorithm == Algorithm::grpo)
      task = make_grpo(config, choice, init, tokenizer);
    else if (algorithm == Algorithm::ppo)
      task = make_ppo(config, choice, init, tokenizer);
    else if (algorithm == Algorithm::rm)
      task = make_reward_model(config, choice, init, tokenizer.get());
    else
      task = make_language_model(config, choice, init, tokenizer.get());
    if (config.lora.enabled()) {
      const nn::LoraSummary lora = nn::summarize_lora(*task.model);
      task.lora = lora.str();
      if (!config.lora.init_from.empty())
        task.lora += "; adapters from " + config.lora.init_from;
      task.description += ", LoRA r=" + std::to_string(config.lora.r) + " on " +
                          std::to_string(lora.adapted) + " modules";
      // A frozen weight's product has no weight gradient: 4 FLOPs a parameter a token, not 6.
      task.flops_per_token -= 2.0 * static_cast<double>(lora.total - lora.trainable);
    }
    task.hf_dir = choice.hf_dir();
    task.tokenizer = tokenizer;
    if (tokenizer) task.stop_ids = generation_stops(*tokenizer, choice);
  } else {
    throw ConfigError("unknown model.kind \"" + config.model.kind + "\" (expected mlp, gpt or hf)");
  }
  GENESIS_CHECK(task.train.size() > 0, ConfigError,
                "the training split is empty: raise data.num_samples or lower data.eval_fraction");
  return task;
}

}  // namespace genesis::train
