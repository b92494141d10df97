// Finding a model's chat template, parsing it once, and rendering it with the variables
// transformers' apply_chat_template passes: messages, tools (None when absent), documents
// (None), add_generation_prompt, then the special tokens and the caller's kwargs over them.
#include "genesis/chat/chat_template.hpp"

#include <chrono>
#include <fstream>
#include <sstream>

#include "chat/jinja_json.hpp"
#include "chat/jinja_parser.hpp"
#include "chat/jinja_runtime.hpp"
#include "genesis/core/env.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::chat {

struct ChatTemplate::Parsed {
  std::string name;
  std::string source;
  nlohmann::ordered_json special_tokens;
  std::vector<std::pair<std::string, jinja::Value>> special_values;
  jinja::Body body;
};

namespace {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError("cannot read " + path.string());
  return text.str();
}

std::optional<nlohmann::ordered_json> read_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  try {
    return nlohmann::ordered_json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path.string() + " is not valid JSON: " + e.what());
  }
}

// The template text a tokenizer_config.json names, or nullopt when it has none. `label` gets
// what errors should call the template.
std::optional<std::string> config_template(const nlohmann::ordered_json& config,
                                           const std::filesystem::path& path, std::string_view name,
                                           std::string& label) {
  if (!config.is_object() || !config.contains("chat_template")) return std::nullopt;
  const nlohmann::ordered_json& t = config["chat_template"];
  label = path.string();
  if (t.is_null()) return std::nullopt;
  if (t.is_string()) {
    if (!name.empty() && name != "default")
      throw ConfigError(path.string() + " has one chat template, not one named '" +
                        std::string(name) + "'");
    return t.get<std::string>();
  }
  if (!t.is_array())
    throw ConfigError(path.string() +
                      ": chat_template must be a string or a list of "
                      "{\"name\", \"template\"}");
  std::string names;
  const std::string wanted = name.empty() ? "default" : std::string(name);
  for (const auto& entry : t) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string())
      throw ConfigError(path.string() +
                        ": each chat_template entry must be {\"name\": ..., "
                        "\"template\": ...}");
    const std::string& entry_name = entry["name"].get_ref<const std::string&>();
    names += (names.empty() ? "'" : ", '") + entry_name + "'";
    if (entry_name == wanted) {
      label = path.string() + ", '" + entry_name + "'";
      return entry["template"].get<std::string>();
    }
  }
  throw ConfigError(path.string() + " has no chat template named '" + wanted + "' (it has " +
                    names + ")");
}

std::int64_t clock_now(const RenderInput& input) {
  if (input.now) return *input.now;
  if (auto fixed = env::chat_template_now()) return *fixed;
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

nlohmann::ordered_json ChatTemplate::special_tokens_of(const nlohmann::ordered_json& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!config.is_object()) return out;
  auto token_text = [](const nlohmann::ordered_json& v) -> std::optional<std::string> {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string())
      return v["content"].get<std::string>();  // an AddedToken
    return std::nullopt;
  };
  for (const auto& [key, value] : config.items()) {
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0) {
      if (auto text = token_text(value)) out[key] = *text;
    } else if (key == "additional_special_tokens" && value.is_array()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const auto& item : value)
        if (auto text = token_text(item)) list.push_back(*text);
      out[key] = std::move(list);
    }
  }
  return out;
}

ChatTemplate ChatTemplate::from_source(std::string source, std::string name,
                                       nlohmann::ordered_json special_tokens) {
  if (auto bad = tokenizer::find_invalid_utf8(source))
    throw ConfigError("chat template (" + name + ") is not valid UTF-8 (byte " +
                      std::to_string(*bad) + ")");
  auto parsed = std::make_shared<Parsed>();
  parsed->body = jinja::parse_template(source, name);
  parsed->name = std::move(name);
  parsed->source = std::move(source);
  if (!special_tokens.is_object()) special_tokens = nlohmann::ordered_json::object();
  try {
    for (const auto& [key, value] : special_tokens.items())
      parsed->special_values.emplace_back(key, jinja::from_json(value));
  } catch (const jinja::JinjaError& e) {
    throw ConfigError("chat template (" + parsed->name + "): special tokens: " + e.reason);
  }
  parsed->special_tokens = std::move(special_tokens);
  return ChatTemplate(std::move(parsed));
}

ChatTemplate ChatTemplate::from_file(const std::filesystem::path& jinja_file,
                                     const std::filesystem::path& tokenizer_config_dir) {
  std::optional<nlohmann::ordered_json> config;
  if (!tokenizer_config_dir.empty()) config = read_config(tokenizer_config_dir);
  return from_source(read_text_file(jinja_file), jinja_file.string(),
                     config ? special_tokens_of(*config) : nlohmann::ordered_json::object());
}

std::optional<ChatTemplate> ChatTemplate::find(const std::filesystem::path& dir,
                                               std::string_view name) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw IoError("cannot find chat templates in " + dir.string() + ": not a directory");
  const std::optional<nlohmann::ordered_json> config = read_config(dir);
  const nlohmann::ordered_json special =
      config ? special_tokens_of(*config) : nlohmann::ordered_json::object();
  if (name.empty() || name == "default") {
    const std::filesystem::path file = dir / "chat_template.jinja";
    if (std::filesystem::is_regular_file(file, ec))
      return from_source(read_text_file(file), file.string(), special);
  } else {
    const std::filesystem::path file =
        dir / "additional_chat_templates" / (std::string(name) + ".jinja");
    if (std::filesystem::is_regular_file(file, ec))
      return from_source(read_text_file(file), file.string(), special);
  }
  if (!config) return std::nullopt;
  std::string label;
  std::optional<std::string> source =
      config_template(*config, dir / "tokenizer_config.json", name, label);
  if (!source) return std::nullopt;
  return from_source(std::move(*source), label, special);
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& dir, std::string_view name) {
  std::optional<ChatTemplate> found = find(dir, name);
  if (!found)
    throw ConfigError(dir.string() + " has no chat template" +
                      (name.empty() ? std::string() : " named '" + std::string(name) + "'") +
                      " (no chat_template in tokenizer_config.json and no chat_template.jinja)");
  return std::move(*found);
}

Rendered ChatTemplate::render(const RenderInput& input) const {
  const Parsed& p = *parsed_;
  if (input.messages == nullptr)
    throw InvalidArgument("chat template (" + p.name + "): no messages");
  if (input.kwargs != nullptr && !input.kwargs->is_null() && !input.kwargs->is_object())
    throw InvalidArgument("chat template (" + p.name + "): kwargs must be a JSON object");
  jinja::Limits limits{limits_.max_call_depth, limits_.max_steps, limits_.max_output_bytes};
  jinja::Renderer renderer(limits, clock_now(input));
  try {
    auto globals = std::make_shared<jinja::Frame>();
    auto& vars = globals->vars;
    for (const auto& [key, value] : p.special_values) vars[key] = value;
    if (input.kwargs != nullptr && input.kwargs->is_object()) {
      for (const auto& [key, value] : input.kwargs->items()) {
        if (key == "messages" || key == "tools" || key == "documents" ||
            key == "add_generation_prompt")
          throw InvalidArgument("chat template (" + p.name + "): kwargs may not set '" + key +
                                "', which the template gets from the conversation");
        vars[key] = jinja::from_json(value);
      }
    }
    vars["messages"] = jinja::from_json(*input.messages);
    vars["tools"] = input.tools != nullptr ? jinja::from_json(*input.tools) : jinja::Value::none();
    vars["documents"] = jinja::Value::none();
    vars["add_generation_prompt"] = jinja::Value(input.add_generation_prompt);
    Rendered out;
    out.text = renderer.render(p.body, std::move(globals));
    out.generation = renderer.generation();
    return out;
  } catch (const jinja::JinjaError& e) {
    std::string where = "chat template (" + p.name + ")";
    if (e.line > 0) where += " line " + std::to_string(e.line);
    throw ChatTemplateError(where + ": " + e.reason, e.reason, e.line, e.raised);
  }
}

const std::string& ChatTemplate::name() const { return parsed_->name; }
const std::string& ChatTemplate::source() const { return parsed_->source; }
const nlohmann::ordered_json& ChatTemplate::special_tokens() const {
  return parsed_->special_tokens;
}

ChatTemplate::ChatTemplate(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(const ChatTemplate&) = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(const ChatTemplate&) = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

}  // namespace genesis::chat
