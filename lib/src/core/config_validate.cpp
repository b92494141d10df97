// Checks across keys, run once after every layer is applied (a preset may set n_head and a
// --set fix n_embd): each message names where the offending key was last set. Single-value
// rules (types, ranges, choices) are checked as values are assigned, in config_value.cpp.
#include <algorithm>

#include "config_schema.hpp"
#include "config_value.hpp"
#include "genesis/core/error.hpp"

namespace genesis::config_detail {
namespace {

Location origin_of(const Origins& origins, std::string_view first, std::string_view second) {
  if (auto it = origins.find(first); it != origins.end()) return it->second;
  if (auto it = origins.find(second); it != origins.end()) return it->second;
  return Location{};
}

// An hf model's heads follow from training.algorithm (rm: the score head), not model.head.
bool is_hf(const Config& config) { return config.model.kind == "hf"; }

// "jsonl:FILE" or "json:FILE": rows in TRL's formats.
bool data_file_source(const std::string& source) {
  return source.rfind("jsonl:", 0) == 0 || source.rfind("json:", 0) == 0;
}

// Examples with prompts and answers: the built-in tasks ("tasks:", "chat:") or a data file.
bool example_source(const std::string& source) {
  return source.rfind("tasks:", 0) == 0 || source.rfind("chat:", 0) == 0 ||
         data_file_source(source);
}

// What training.algorithm needs of the model and data: rm, a gpt with a value head on
// preference pairs; dpo, the language-model head on preference pairs, from a trained model;
// sft, the language-model head on anything but pairs.
void validate_algorithm(const Config& config, const Origins& origins, bool pairs) {
  const Algorithm algorithm = config.training.algorithm;
  const std::string name = "training.algorithm = \"" + std::string(to_string(algorithm)) + "\"";
  const auto at = [&](const char* key) {
    return key_at(origin_of(origins, key, "training.algorithm"), key);
  };
  if (algorithm == Algorithm::rm || algorithm == Algorithm::dpo) {
    if (algorithm == Algorithm::rm && !is_hf(config) &&
        (config.model.kind != "gpt" || config.model.head != ModelHead::value))
      throw ConfigError(at("model.head") + ": " + name + " scores sequences with a gpt's value "
                        "head: set model.kind = \"gpt\" and model.head = \"value\"");
    if (algorithm == Algorithm::dpo && !is_hf(config) &&
        (config.model.kind != "gpt" || config.model.head != ModelHead::lm))
      throw ConfigError(at("model.head") + ": " + name + " trains a gpt's language-model head: "
                        "set model.kind = \"gpt\" and model.head = \"lm\"");
    if (!pairs && !data_file_source(config.data.source))
      throw ConfigError(at("data.source") + " = \"" + config.data.source + "\": " + name +
                        " trains on preference pairs: \"pairs:reverse,sort\" (generated) or "
                        "\"jsonl:FILE\" or \"json:FILE\" ({\"prompt\", \"chosen\", "
                        "\"rejected\"} rows)");
  }
  if (algorithm == Algorithm::dpo && config.model.init_from.empty())
    throw ConfigError(at("model.init_from") + " is empty: " + name + " improves a trained "
                      "policy, which is also its reference: set model.init_from to a run, e.g. "
                      "\"runs/sft\", which `genesis launch --nproc 2 train --preset sft` makes");
  if (config.dpo.label_smoothing >= 0.5)
    throw ConfigError(at("dpo.label_smoothing") + " = " +
                      std::to_string(config.dpo.label_smoothing) + " must be below 0.5");
  if (algorithm == Algorithm::sft) {
    if (!is_hf(config) && config.model.head != ModelHead::lm)
      throw ConfigError(at("model.head") + " = \"value\" scores sequences, which "
                        "training.algorithm = \"rm\" trains (this run's is \"sft\")");
    if (pairs)
      throw ConfigError(at("data.source") + " = \"" + config.data.source + "\" is preference "
                        "data, which training.algorithm = \"rm\" trains (this run's is \"sft\")");
  }
}

// What GRPO and PPO share: a language-model head sampling answers to prompts (with or without
// expected answers), from a policy that already answers some, with a reward to learn from.
void validate_online(const Config& config, const Origins& origins) {
  const auto at = [&](const char* key) {
    return key_at(origin_of(origins, key, "training.algorithm"), key);
  };
  const std::string name =
      "training.algorithm = \"" + std::string(to_string(config.training.algorithm)) + "\"";
  if (!is_hf(config) && (config.model.kind != "gpt" || config.model.head != ModelHead::lm))
    throw ConfigError(at("model.head") + ": " + name + " samples from a gpt's language-model "
                      "head: set model.kind = \"gpt\" and model.head = \"lm\"");
  const std::string& source = config.data.source;
  if (!example_source(source))
    throw ConfigError(at("data.source") + " = \"" + source + "\": " + name + " samples answers "
                      "to prompts: \"tasks:reverse,sort\" (generated) or \"jsonl:FILE\" "
                      "({\"prompt\"} per line, with any other keys the rewards read)");
  if (config.model.init_from.empty())
    throw ConfigError(at("model.init_from") + " is empty: " + name + " improves a policy that "
                      "already answers some prompts: set model.init_from to a run, e.g. "
                      "\"runs/sft\", which `genesis launch --nproc 2 train --preset sft` makes");
  if (config.reward.functions.empty() && config.reward.command.empty() &&
      config.reward.model.empty())
    throw ConfigError(at("reward.functions") + " is empty and neither reward.command nor "
                      "reward.model is set: " + name + " needs a reward, e.g. [\"exact:1.0\"]");
}

void validate_grpo(const Config& config, const Origins& origins) {
  const auto at = [&](const char* key) {
    return key_at(origin_of(origins, key, "training.algorithm"), key);
  };
  validate_online(config, origins);
  if (config.grpo.num_generations < 2)
    throw ConfigError(at("grpo.num_generations") + " = " +
                      std::to_string(config.grpo.num_generations) + ": a completion's advantage is "
                      "its reward against its group's mean, so a group of one learns nothing: use "
                      "2 or more");
  if (config.grpo.top_p > 1.0)
    throw ConfigError(at("grpo.top_p") + " = " + std::to_string(config.grpo.top_p) +
                      " must be in (0, 1]");
}

void validate_ppo(const Config& config, const Origins& origins) {
  const auto at = [&](const char* key) {
    return key_at(origin_of(origins, key, "training.algorithm"), key);
  };
  validate_online(config, origins);
  const std::int64_t micro = config.training.per_device_train_batch_size;
  if (micro % config.ppo.num_mini_batches != 0)
    throw ConfigError(at("ppo.num_mini_batches") + " = " +
                      std::to_string(config.ppo.num_mini_batches) + " does not divide "
                      "training.per_device_train_batch_size = " + std::to_string(micro) +
                      ": each step trains on one equal part of every micro-batch's rollout");
  if (config.ppo.lam > 1.0 || config.ppo.gamma > 1.0)
    throw ConfigError(at("ppo.lam") + " and ppo.gamma must be in [0, 1]");
  if (config.ppo.critic == CriticKind::model && config.ppo.critic_lr_scale != 1.0)
    throw ConfigError(at("ppo.critic_lr_scale") + " scales a critic head; a critic model "
                      "(ppo.critic = \"model\") learns at the policy's rate: set it to 1 "
                      "(--set ppo.critic_lr_scale=1)");
}

// jsonl is always written; tensorboard is the one other writer built in. Weights & Biases and
// the like upload over the network, which genesis does not, so they are refused by name. A
// single-value rule, here because assigning checks no choices for a list's entries.
// data.packing packs SFT text examples for the sft objective; the others (their pairs, their
// rollouts) and data without padding (synthetic tokens, the mlp's features) have no use for it.
void validate_packing(const Config& config, const Origins& origins) {
  if (!config.data.packing) return;
  const std::string at = key_at(origin_of(origins, "data.packing", "training.algorithm"),
                                "data.packing");
  const Algorithm algorithm = config.training.algorithm;
  if (algorithm != Algorithm::sft)
    throw NotSupported(at + " = true is not supported with training.algorithm = " +
                       std::string(to_string(algorithm)) +
                       ": it packs SFT examples for the sft objective only");
  const std::string& source = config.data.source;
  if (!example_source(source))
    throw NotSupported(at + " = true packs SFT text examples (data.source = \"tasks:...\", "
                       "\"chat:...\" or \"jsonl:FILE\"); data.source = \"" + source +
                       "\" has none");
}

void validate_report_to(const Config& config, const Origins& origins) {
  const std::vector<std::string> supported{"jsonl", "tensorboard"};
  for (const std::string& target : config.training.report_to) {
    if (std::find(supported.begin(), supported.end(), target) != supported.end()) continue;
    const bool online = target == "wandb" || target == "mlflow" || target == "comet_ml";
    const std::string why =
        online ? " (it uploads to an online service; genesis writes local files only)" : "";
    const auto set_at = origins.find("training.report_to");
    throw ConfigError(key_at(set_at == origins.end() ? Location{} : set_at->second,
                             "training.report_to") +
                      ": \"" + target + "\" is not supported" + why + ": supported are "
                      "\"jsonl\" (metrics.jsonl, always written) and \"tensorboard\"" +
                      did_you_mean(target, supported));
  }
}

// A range of steps the run has, so that a trace is never silently not written.
void validate_profile_steps(const Config& config, const Origins& origins) {
  const auto set_at = origins.find("training.profile_steps");
  const std::string key =
      key_at(set_at == origins.end() ? Location{} : set_at->second, "training.profile_steps");
  std::optional<StepRange> range;
  try {
    range = parse_step_range(config.training.profile_steps);
  } catch (const ConfigError& e) {
    throw ConfigError(key + ": " + e.what());
  }
  if (range && range->last > config.training.max_steps)
    throw ConfigError(key + " = \"" + config.training.profile_steps + "\" ends after the last "
                      "step: training.max_steps = " + std::to_string(config.training.max_steps));
}

// LoRA adapts the linear layers of a gpt or hf model; its keys mean nothing without a rank.
void validate_lora(const Config& config, const Origins& origins) {
  const LoraConfig& lora = config.lora;
  if (!lora.enabled()) {
    // A saved config writes every key, so a key counts as set where its value is not the default.
    const Config defaults;
    for (const auto& key : config_schema()) {
      if (!key.name.starts_with("lora.") || key.name == "lora.r") continue;
      const std::string value = describe_node(*value_node(config, key));
      if (value == describe_node(*value_node(defaults, key))) continue;
      throw ConfigError(key_at(origin_of(origins, key.name, "lora.r"), key.name) + " = " + value +
                        ", but lora.r = 0 means no adapters: set lora.r (e.g. 16) to train LoRA "
                        "adapters");
    }
    return;
  }
  const std::string& kind = config.model.kind;
  if (kind != "gpt" && kind != "hf")
    throw ConfigError(key_at(origin_of(origins, "lora.r", "model.kind"), "lora.r") +
                      ": LoRA adapts the linear layers of a gpt or hf model, not model.kind = \"" +
                      kind + "\"");
}

}  // namespace

void validate_config(const Config& config, const Origins& origins) {
  const auto& m = config.model;
  if (m.kind == "gpt" && m.n_embd % m.n_head != 0)
    throw ConfigError(key_at(origin_of(origins, "model.n_embd", "model.n_head"), "model.n_embd") +
                      " must be divisible by model.n_head, got n_embd = " +
                      std::to_string(m.n_embd) + ", n_head = " + std::to_string(m.n_head));

  // Each source produces what one model kind consumes: labelled feature vectors for the mlp,
  // token sequences (synthetic, or SFT examples through the byte tokenizer) for the gpt.
  const std::string& source = config.data.source;
  const Location where = origin_of(origins, "data.source", "model.kind");
  const bool pairs = source.rfind("pairs:", 0) == 0;
  const bool sft = example_source(source) || pairs;
  const bool tokens = m.kind == "gpt" || m.kind == "hf";
  const bool fits = tokens ? source == "synthetic:tokens" || sft
                           : source == "synthetic:classification";
  if (!fits)
    throw ConfigError(key_at(where, "data.source") + " = \"" + source + "\" does not fit model.kind = \"" +
                      m.kind + "\" (use " +
                      (tokens ? "\"synthetic:tokens\", \"tasks:reverse,sort,copy,upper,add\", "
                                         "\"chat:reverse,sort,copy,upper,add\", "
                                         "\"pairs:reverse,sort,copy,upper,add\", \"jsonl:FILE\" or \"json:FILE\""
                                       : "\"synthetic:classification\"") +
                      ")");
  // SFT text is tokenized bytewise: 256 byte tokens, end-of-text and padding (an hf model's
  // vocabulary is its config.json's, checked when the model is built).
  const bool byte_text = config.data.tokenizer.empty() || config.data.tokenizer == "byte";
  if (sft && m.kind == "gpt" && byte_text && m.vocab_size < 258)
    throw ConfigError(key_at(origin_of(origins, "model.vocab_size", "data.source"), "model.vocab_size") +
                      " = " + std::to_string(m.vocab_size) + " is too small for SFT data, which uses "
                      "the byte tokenizer's 258 tokens: set model.vocab_size = 258");
  validate_packing(config, origins);
  validate_algorithm(config, origins, pairs);
  if (config.training.algorithm == Algorithm::grpo) validate_grpo(config, origins);
  if (config.training.algorithm == Algorithm::ppo) validate_ppo(config, origins);
  validate_report_to(config, origins);
  validate_lora(config, origins);
  validate_profile_steps(config, origins);
  if (config.training.gradient_checkpointing && !tokens)
    throw ConfigError(key_at(origin_of(origins, "training.gradient_checkpointing", "model.kind"),
                             "training.gradient_checkpointing") +
                      " recomputes transformer blocks and needs model.kind = \"gpt\" or \"hf\", "
                      "got \"" + m.kind + "\"");
  if (m.kind == "hf" && m.init_from.empty() && m.config.empty())
    throw ConfigError(key_at(origin_of(origins, "model.kind", "model.init_from"), "model.kind") +
                      " = \"hf\" needs model.init_from (a Hugging Face model directory or Hub "
                      "id) or model.config (a config.json for fresh weights)");
  if (!m.config.empty() && m.kind != "hf")
    throw ConfigError(key_at(origin_of(origins, "model.config", "model.kind"), "model.config") +
                      " builds a Hugging Face model: it needs model.kind = \"hf\", got \"" +
                      m.kind + "\"");
}

}  // namespace genesis::config_detail
