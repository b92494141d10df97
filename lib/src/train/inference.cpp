// generate and score over JSONL (inference.hpp). Lines are read and checked one by one; the valid
// ones go through the model in batches, and every output line is written in input order.
#include "genesis/train/inference.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "device_choice.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/chat/chat_template.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/export.hpp"
#include "genesis/ckpt/lora_adapter.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/text_tokenizer.hpp"
#include "genesis/tokenizer/tokenize_jsonl.hpp"
#include "genesis/ops/ops.hpp"
#include "init_weights.hpp"
#include "log_probs.hpp"
#include "model_choice.hpp"

namespace genesis::train {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Tokens = std::vector<std::int64_t>;

// The run's model config: a run directory's or a checkpoint's manifest.
Config run_config(const std::string& name) {
  const fs::path dir = ckpt::resolve_checkpoint(fs::path(name));
  const ckpt::Manifest manifest = ckpt::read_manifest(dir);
  GENESIS_CHECK(!manifest.config_toml.empty(), ConfigError,
                "'" + name + "': the checkpoint keeps no config, so its model is unknown");
  Config config = parse_config_toml(manifest.config_toml, "'" + dir.string() + "' config");
  const ModelConfig& m = config.model;
  GENESIS_CHECK(m.kind == "gpt" || m.kind == "hf", ConfigError,
                "'" + name + "' holds a model.kind = \"" + m.kind + "\", not a language model");
  return config;
}

// Copies every tensor `weights` has for `model` into it.
void load_weights(nn::CausalLM& model, const std::string& name) {
  InitWeights weights(name, model, "MODEL");
  NoGradGuard no_grad;
  for (auto& [param, t] : model.named_parameters())
    if (weights.contains("model." + param)) t.copy_(weights.read_full("model." + param));
}

// A line's token ids: "ids" (`ids_key`), or text (`text_key`) through the model's tokenizer.
Tokens line_tokens(const Json& line, const InferenceModel& m, const char* ids_key,
                   const char* text_key) {
  GENESIS_CHECK(line.is_object(), InvalidArgument, "expected a JSON object");
  Tokens ids;
  if (line.contains(ids_key)) {
    const Json& list = line.at(ids_key);
    GENESIS_CHECK(list.is_array(), InvalidArgument,
                  std::string("\"") + ids_key + "\" is not a list");
    for (const Json& id : list) {
      GENESIS_CHECK(id.is_number_integer(), InvalidArgument,
                    std::string("\"") + ids_key + "\" holds a non-integer");
      ids.push_back(id.get<std::int64_t>());
    }
  } else if (line.contains("messages") && std::string(text_key) == "prompt") {
    GENESIS_CHECK(m.chat != nullptr, InvalidArgument,
                  "\"messages\" needs the model's chat template, and its tokenizer has none: give "
                  "\"prompt\" or \"ids\"");
    const bool generation_prompt = line.value("add_generation_prompt", true);
    const auto messages = nlohmann::ordered_json::parse(line.at("messages").dump());
    GENESIS_CHECK(messages.is_array(), InvalidArgument, "\"messages\" is not a list");
    try {
      ids = m.chat->encode_continuation(m.chat->render_chat(messages, generation_prompt).text);
    } catch (const ConfigError& e) {
      throw InvalidArgument(e.what());
    }
  } else if (line.contains(text_key)) {
    GENESIS_CHECK(line.at(text_key).is_string(), InvalidArgument,
                  std::string("\"") + text_key + "\" is not a string");
    const std::string& text = line.at(text_key).get_ref<const std::string&>();
    if (m.tokenizer) {
      const std::vector<std::int32_t> encoded = m.tokenizer->encode(text);
      ids.assign(encoded.begin(), encoded.end());
    } else if (m.byte_tokenizer) {
      ids = data::ByteTokenizer().encode(text);
    } else {
      throw InvalidArgument(std::string("\"") + text_key +
                            "\" needs the model's tokenizer, and its directory has no "
                            "tokenizer.json: give \"" + ids_key + "\"");
    }
  } else {
    throw InvalidArgument(std::string("no \"") + ids_key + "\" or \"" + text_key + "\"");
  }
  const std::int64_t V = m.model->vocab_size();
  for (std::int64_t id : ids)
    GENESIS_CHECK(id >= 0 && id < V, InvalidArgument,
                  "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                      std::to_string(V) + ")");
  GENESIS_CHECK(static_cast<std::int64_t>(ids.size()) <= m.model->max_positions(), InvalidArgument,
                std::to_string(ids.size()) + " tokens, more than the model's " +
                    std::to_string(m.model->max_positions()) + " positions");
  return ids;
}

// Reads the lines of `in`; each valid line's tokens go to `valid` (with its index among all
// lines), each invalid one's reason to `errors` at its index. Blank lines count as lines.
struct Lines {
  std::vector<std::string> errors;  // per line; "" for valid lines
  std::vector<std::pair<std::size_t, Tokens>> valid;
};

template <class Parse>
Lines read_lines(std::istream& in, Parse&& parse) {
  Lines lines;
  std::string text;
  while (std::getline(in, text)) {
    const std::size_t index = lines.errors.size();
    lines.errors.emplace_back();
    const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    try {
      GENESIS_CHECK(!j.is_discarded(), InvalidArgument, "not valid JSON");
      lines.valid.emplace_back(index, parse(j));
    } catch (const Error& e) {
      lines.errors[index] = e.what();
    }
  }
  return lines;
}

// Writes every line: outputs[i] for valid lines, {"error"} for the others; reports the failures.
std::int64_t write_lines(std::ostream& out, const Lines& lines, const std::vector<Json>& outputs,
                         const LineErrorSink& on_error) {
  std::int64_t failed = 0;
  for (std::size_t i = 0; i < lines.errors.size(); ++i) {
    if (lines.errors[i].empty()) {
      // A completion's bytes need not be UTF-8: invalid sequences are written as U+FFFD.
      out << outputs[i].dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
      continue;
    }
    ++failed;
    out << Json{{"error", lines.errors[i]}}.dump() << "\n";
    if (on_error) on_error(static_cast<std::int64_t>(i) + 1, lines.errors[i]);
  }
  out.flush();
  return failed;
}

// The chat template of the tokenizer `setting` names (or `file`), when there is one, and its
// end-of-turn token among the stop ids. A tokenizer that cannot render chats (no template, no
// eos_token) leaves out.chat empty: its {"messages"} lines are refused one by one.
void add_chat(InferenceModel& out, const std::string& setting, const std::string& file) {
  try {
    if (file.empty()) {
      const fs::path dir = fs::is_directory(setting) ? fs::path(setting) : fs::path(setting).parent_path();
      if (fs::exists(setting) && !chat::ChatTemplate::find(dir)) return;
    }
    out.chat = data::make_text_tokenizer(setting, "MODEL", file);
  } catch (const ConfigError&) {
    return;
  }
  for (std::int64_t id : out.chat->stop_ids())
    if (std::find(out.eos_token_ids.begin(), out.eos_token_ids.end(), id) == out.eos_token_ids.end())
      out.eos_token_ids.push_back(id);
}

}  // namespace

Device inference_device(DeviceKind kind) { return training_device(kind); }

// A LoRA run's checkpoint holds its adapters only: the model's tensors it has, by the model's names.
std::map<std::string, Tensor> checkpoint_model_tensors(const std::string& name) {
  const ckpt::Checkpoint checkpoint(ckpt::resolve_checkpoint(fs::path(name)));
  std::map<std::string, Tensor> out;
  for (const std::string& entry : checkpoint.names("model.")) {
    const std::string name = entry.substr(6);
    // A PPO policy's critic is training's, as an export leaves it out.
    if (!name.starts_with("v_head.") && !name.starts_with("critic."))
      out.emplace(name, checkpoint.read_full(entry));
  }
  return out;
}

InferenceModel load_inference_model(const std::string& name, Device device,
                                    const std::string& adapter) {
  ModelConfig m;
  std::optional<Config> lora_run;  // a run that trained LoRA adapters: its base and settings
  bool reward = false;             // a reward model: an rm run, a *ForSequenceClassification
  InferenceModel out;
  std::string text_setting, chat_file;  // the tokenizer a run's text went through, its template
  // A Hub id that is not cached goes to resolve_pretrained too, whose error says how to fetch it.
  if (names_hf_model(name) || (looks_like_hub_id(name) && !fs::exists(name))) {
    m.kind = "hf";
    m.init_from = name;
    m.block_size = 1;
  } else {
    GENESIS_CHECK(fs::exists(name), ConfigError,
                  "MODEL '" + name + "' is no Hugging Face directory, Hub id, run or checkpoint");
    const Config run = run_config(name);
    m = run.model;
    reward = run.training.algorithm == Algorithm::rm;
    if (run.lora.enabled()) lora_run = run;
    // An hf run keeps its model's config in <run>/hf, whatever became of model.init_from.
    const fs::path kept =
        ckpt::run_hf_dir(ckpt::resolve_checkpoint(fs::path(name))) / "config.json";
    if (m.kind == "hf" && fs::exists(kept)) {
      m.config = kept.string();
      m.init_from.clear();
    }
    // The run's text went through data.tokenizer: an hf model's own (kept in <run>/hf) by
    // default, else the byte tokenizer; its responses end with that tokenizer's end of text.
    std::string text = run.data.tokenizer;
    if (text.empty()) text = m.kind == "hf" && tokenizer::holds_tokenizer(kept.parent_path())
                                 ? kept.parent_path().string() : "byte";
    if (text == "byte") {
      out.byte_tokenizer = true;
      out.eos_token_ids = {data::ByteTokenizer::kEndOfText};
      out.chat = std::make_shared<data::ByteTextTokenizer>();
    } else {
      text_setting = text;
      chat_file = run.data.chat_template;
      out.tokenizer = std::make_shared<const tokenizer::Tokenizer>(
          tokenizer::load_tokenizer(text, "the run's data.tokenizer"));
      if (auto eos = out.tokenizer->special_tokens().eos) out.eos_token_ids = {*eos};
    }
  }
  const ModelChoice choice(m, "MODEL");
  GENESIS_CHECK(!(lora_run && !adapter.empty()), ConfigError,
                "MODEL '" + name + "' holds LoRA adapters already: give --adapter with its base");
  if (choice.hf() && !choice.hf()->architectures.empty() &&
      choice.hf()->architectures.front().ends_with("ForSequenceClassification")) {
    reward = true;
    if (!lora_run && m.init_from == name) out.score_skips = choice.hf()->pad_token_id;
  }
  // A LoRA run's base is the one it trained over: model.init_from's, or the seed's (the model
  // built as training built it, the adapters drawn apart).
  Generator init(lora_run ? lora_run->seed : 0);
  out.model = choice.build({.value_head = reward}, init);
  if (lora_run) {
    Generator unused(0);
    // A reward model's score head is among its trained modules; a ppo run's critic stays out.
    const Algorithm trained = reward ? Algorithm::rm : Algorithm::sft;
    nn::add_lora(*out.model, "", choice.lora_spec(lora_run->lora, trained), unused,
                 std::make_shared<Generator>(0));
    if (!lora_run->model.init_from.empty()) load_weights(*out.model, lora_run->model.init_from);
    ckpt::load_adapter_tensors(*out.model, checkpoint_model_tensors(name), "MODEL '" + name + "'");
  } else if (!adapter.empty()) {
    const ckpt::LoraAdapterFiles files = ckpt::read_lora_adapter(adapter, choice.hf());
    Generator unused(0);
    nn::add_lora(*out.model, "", files.spec, unused, std::make_shared<Generator>(0));
    load_weights(*out.model, name);
    ckpt::load_adapter_tensors(*out.model, files.tensors, "--adapter '" + adapter + "'");
  } else {
    load_weights(*out.model, name);
  }
  out.model->to(device);
  out.model->eval();
  if (choice.hf() && !out.byte_tokenizer && !out.tokenizer) {
    out.eos_token_ids = nn::hf_eos_token_ids(choice.hf_dir(), *choice.hf());
    if (tokenizer::holds_tokenizer(choice.hf_dir()))
      out.tokenizer = std::make_shared<const tokenizer::Tokenizer>(
          tokenizer::Tokenizer::load(choice.hf_dir()));
  }
  if (text_setting.empty() && out.tokenizer && choice.hf()) text_setting = choice.hf_dir().string();
  if (!out.chat && !text_setting.empty()) add_chat(out, text_setting, chat_file);
  out.description = choice.description();
  return out;
}

std::int64_t generate_jsonl(InferenceModel& m, std::istream& in, std::ostream& out,
                            const GenerateOptions& options, const LineErrorSink& on_error) {
  if (m.model->has_value_head())
    throw ConfigError("the model is a reward model, which generates nothing: genesis score gives "
                      "its rewards");
  Lines lines = read_lines(in, [&](const Json& j) {
    Tokens ids = line_tokens(j, m, "ids", "prompt");
    GENESIS_CHECK(!ids.empty(), InvalidArgument, "the prompt is empty");
    return ids;
  });
  nn::SamplingOptions sampling = options.sampling;
  sampling.stop_tokens.insert(sampling.stop_tokens.end(), m.eos_token_ids.begin(),
                              m.eos_token_ids.end());
  std::vector<Json> outputs(lines.errors.size());
  const auto batch = static_cast<std::size_t>(std::max<std::int64_t>(1, options.batch_size));
  for (std::size_t first = 0; first < lines.valid.size(); first += batch) {
    const std::size_t end = std::min(lines.valid.size(), first + batch);
    std::vector<Tokens> prompts;
    std::vector<Generator> generators;
    for (std::size_t i = first; i < end; ++i) {
      prompts.push_back(lines.valid[i].second);
      generators.emplace_back(options.seed + lines.valid[i].first);
    }
    const auto completions = m.model->generate(prompts, sampling, generators);
    for (std::size_t i = first; i < end; ++i) {
      Json line{{"ids", completions[i - first]}};
      if (m.tokenizer) {
        const std::vector<std::int32_t> ids(completions[i - first].begin(),
                                            completions[i - first].end());
        line["text"] = m.tokenizer->decode(ids);
      } else if (m.byte_tokenizer) {
        line["text"] = data::ByteTextTokenizer().decode(completions[i - first]);
      }
      outputs[lines.valid[i].first] = std::move(line);
    }
  }
  return write_lines(out, lines, outputs, on_error);
}

std::int64_t score_jsonl(InferenceModel& m, std::istream& in, std::ostream& out,
                         std::int64_t batch_size, const LineErrorSink& on_error) {
  Lines lines = read_lines(in, [&](const Json& j) { return line_tokens(j, m, "ids", "text"); });
  std::vector<Json> outputs(lines.errors.size());
  const auto batch = static_cast<std::size_t>(std::max<std::int64_t>(1, batch_size));
  NoGradGuard no_grad;
  const Device device = m.model->parameters().front().device();
  for (std::size_t first = 0; first < lines.valid.size(); first += batch) {
    const std::size_t end = std::min(lines.valid.size(), first + batch);
    std::size_t T = 1;
    for (std::size_t i = first; i < end; ++i) T = std::max(T, lines.valid[i].second.size());
    // Right-padded rows: a causal model's log-probs of a row's tokens never see what follows.
    const auto rows = static_cast<std::int64_t>(end - first);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(rows) * T, 0);
    for (std::size_t i = first; i < end; ++i)
      std::copy(lines.valid[i].second.begin(), lines.valid[i].second.end(),
                ids.begin() + static_cast<std::ptrdiff_t>((i - first) * T));
    const Tensor input = Tensor::from_vector(ids, {rows, static_cast<std::int64_t>(T)}).to(device);
    if (m.model->has_value_head()) {
      // A reward model's score of a line is its value at the line's last token, as transformers'
      // *ForSequenceClassification reads it at the last token that is not padding.
      const std::vector<float> values = (*m.model)(input).to(Device::cpu()).contiguous().to_vector();
      for (std::size_t i = first; i < end; ++i) {
        const Tokens& row = lines.valid[i].second;
        std::size_t last = row.empty() ? 0 : row.size() - 1;
        while (m.score_skips >= 0 && last > 0 && row[last] == m.score_skips) --last;
        outputs[lines.valid[i].first] =
            Json{{"score", std::vector<double>{values[(i - first) * T + last]}}};
      }
      continue;
    }
    const Tensor logits = (*m.model)(input);  // (rows, T, V)
    const auto Ti = static_cast<std::int64_t>(T);
    Tensor logp;
    if (Ti > 1) {
      const Tensor next = input.slice(1, 1, Ti);
      logp = token_log_probs(logits.slice(1, 0, Ti - 1), next).to(Device::cpu()).contiguous();
    }
    const std::vector<float> values = Ti > 1 ? logp.to_vector() : std::vector<float>();
    for (std::size_t i = first; i < end; ++i) {
      const std::size_t n = lines.valid[i].second.size();
      std::vector<double> row;
      for (std::size_t t = 0; t + 1 < n; ++t) row.push_back(values[(i - first) * (T - 1) + t]);
      outputs[lines.valid[i].first] = Json{{"logprobs", row}};
    }
  }
  return write_lines(out, lines, outputs, on_error);
}

}  // namespace genesis::train
