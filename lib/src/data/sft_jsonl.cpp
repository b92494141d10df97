// JSONL instruction data. Errors carry "file:line" and say which key is missing or mistyped,
// because a dataset with one bad line among thousands is the usual case.
#include "jsonl_lines.hpp"

namespace genesis::data {

namespace jsonl {

SftExample from_messages(const json& messages, const std::string& where, const std::string& key) {
  GENESIS_CHECK(messages.is_array() && !messages.empty(), ConfigError,
                where + ": \"" + key + "\" must be a non-empty list");
  SftExample e;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string at = where + ": " + key + "[" + std::to_string(i) + "]";
    GENESIS_CHECK(messages[i].is_object(), ConfigError, at + " is not an object");
    const std::string role = string_field(messages[i], "role", at);
    const std::string content = string_field(messages[i], "content", at);
    if (i + 1 < messages.size()) {
      e.prompt += role + ": " + content + "\n";
    } else {
      GENESIS_CHECK(role == "assistant", ConfigError,
                    at + ": the last message must be the assistant's response, got role \"" + role + "\"");
      e.prompt += "assistant: ";
      e.response = content;
    }
  }
  return e;
}

namespace {

// TRL's prompt-completion form: two strings, or (conversational) the prompt's messages and the
// completion's, read as one chat.
SftExample from_prompt_completion(const json& j, const std::string& where) {
  GENESIS_CHECK(!j.contains("response"), ConfigError,
                where + ": both \"response\" and \"completion\"; give one");
  if (j.at("completion").is_array() && j.contains("prompt") && j.at("prompt").is_array()) {
    json chat = j.at("prompt");
    chat.insert(chat.end(), j.at("completion").begin(), j.at("completion").end());
    return from_messages(chat, where, "prompt+completion");
  }
  return {string_field(j, "prompt", where), string_field(j, "completion", where)};
}

}  // namespace

}  // namespace jsonl

std::vector<SftExample> read_sft_jsonl(const std::filesystem::path& path) {
  std::vector<SftExample> examples;
  jsonl::for_each_object(path, "SFT data", [&](const jsonl::json& j, const std::string& where) {
    GENESIS_CHECK(!(j.contains("text") && !j.contains("prompt") && !j.contains("messages")),
                  ConfigError,
                  where + ": {\"text\": ...} is language-modelling data; SFT trains on a "
                  "response to a prompt: {\"prompt\", \"response\"}, {\"prompt\", "
                  "\"completion\"} or {\"messages\": [...]}");
    if (j.contains("messages")) {
      examples.push_back(jsonl::from_messages(j.at("messages"), where));
    } else if (j.contains("completion")) {
      examples.push_back(jsonl::from_prompt_completion(j, where));
    } else {
      GENESIS_CHECK(j.contains("prompt") || j.contains("response"), ConfigError,
                    where + ": expected {\"prompt\", \"response\"}, {\"prompt\", "
                    "\"completion\"} or {\"messages\": [...]}");
      examples.push_back({jsonl::string_field(j, "prompt", where),
                          jsonl::string_field(j, "response", where)});
    }
    GENESIS_CHECK(!examples.back().prompt.empty(), ConfigError,
                  where + ": the prompt is empty (a response needs a prompt to follow)");
    GENESIS_CHECK(!examples.back().response.empty(), ConfigError, where + ": the response is empty");
    examples.back().origin = where;
  });
  GENESIS_CHECK(!examples.empty(), ConfigError,
                "the SFT data file '" + path.string() + "' holds no examples");
  return examples;
}

}  // namespace genesis::data
