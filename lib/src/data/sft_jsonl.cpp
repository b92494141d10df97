// JSONL instruction data. Errors carry "file:line" and say which key is missing or mistyped,
// because a dataset with one bad line among thousands is the usual case.
#include <fstream>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::data {
namespace {

using nlohmann::json;

std::string string_field(const json& object, const char* key, const std::string& where) {
  GENESIS_CHECK(object.contains(key), ConfigError, where + ": no \"" + key + "\"");
  GENESIS_CHECK(object.at(key).is_string(), ConfigError, where + ": \"" + key + "\" is not a string");
  return object.at(key).get<std::string>();
}

SftExample from_messages(const json& messages, const std::string& where) {
  GENESIS_CHECK(messages.is_array() && !messages.empty(), ConfigError,
                where + ": \"messages\" must be a non-empty list");
  SftExample e;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string at = where + ": messages[" + std::to_string(i) + "]";
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

}  // namespace

std::vector<SftExample> read_sft_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  GENESIS_CHECK(in.good(), ConfigError, "cannot read the SFT data file '" + path.string() + "'");
  std::vector<SftExample> examples;
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    GENESIS_CHECK(!j.is_discarded(), ConfigError, where + ": not valid JSON");
    GENESIS_CHECK(j.is_object(), ConfigError, where + ": expected a JSON object");
    if (j.contains("messages")) {
      examples.push_back(from_messages(j.at("messages"), where));
    } else {
      GENESIS_CHECK(j.contains("prompt") || j.contains("response"), ConfigError,
                    where + ": expected {\"prompt\": ..., \"response\": ...} or {\"messages\": [...]}");
      examples.push_back({string_field(j, "prompt", where), string_field(j, "response", where)});
    }
    GENESIS_CHECK(!examples.back().prompt.empty(), ConfigError,
                  where + ": the prompt is empty (a response needs a prompt to follow)");
    GENESIS_CHECK(!examples.back().response.empty(), ConfigError, where + ": the response is empty");
    examples.back().origin = where;
  }
  GENESIS_CHECK(!examples.empty(), ConfigError,
                "the SFT data file '" + path.string() + "' holds no examples");
  return examples;
}

}  // namespace genesis::data
