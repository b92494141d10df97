// Rows of TRL-format data files: reading, type recognition and the errors about them.
#include "data_rows.hpp"

#include <fstream>
#include <sstream>

namespace genesis::data::rows {

void for_each_row(const std::filesystem::path& path, RowFile format, const std::string& what,
                  const std::function<void(const Json&, const std::string&)>& take) {
  std::ifstream in(path);
  GENESIS_CHECK(in.good(), ConfigError, "cannot read the " + what + " file '" + path.string() + "'");
  if (format == RowFile::json) {
    const Json all = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    GENESIS_CHECK(!all.is_discarded(), ConfigError, path.string() + ": not valid JSON");
    GENESIS_CHECK(all.is_array(), ConfigError,
                  path.string() + ": expected a JSON array of objects (json:FILE), got " +
                      all.type_name() + " (one object per line is jsonl:FILE)");
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::string where = path.string() + "[" + std::to_string(i) + "]";
      GENESIS_CHECK(all[i].is_object(), ConfigError, where + ": expected a JSON object");
      take(all[i], where);
    }
    return;
  }
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    GENESIS_CHECK(!j.is_discarded(), ConfigError, where + ": not valid JSON");
    GENESIS_CHECK(j.is_object(), ConfigError, where + ": expected a JSON object");
    take(j, where);
  }
}

std::string string_field(const Json& row, const char* key, const std::string& where) {
  GENESIS_CHECK(row.contains(key), ConfigError, where + ": no \"" + key + "\"");
  GENESIS_CHECK(row.at(key).is_string(), ConfigError, where + ": \"" + key + "\" is not a string");
  return row.at(key).get<std::string>();
}

RowType row_type(const Json& row) {
  if (row.contains("chosen") || row.contains("rejected")) return RowType::preference;
  if (row.contains("messages")) return RowType::conversation;
  if (row.contains("prompt") && (row.contains("completion") || row.contains("response")))
    return RowType::prompt_completion;
  if (row.contains("prompt")) return RowType::prompt_only;
  if (row.contains("text")) return RowType::text;
  return RowType::unknown;
}

std::string keys_of(const Json& row) {
  std::string out;
  for (const auto& [key, value] : row.items()) out += (out.empty() ? "\"" : ", \"") + key + "\"";
  return out.empty() ? "none" : out;
}

void refuse_row(const Json& row, const std::string& where, const std::string& expected) {
  static const char* const kTypes[] = {"language-modelling data",  "prompt-completion data",
                                       "a conversation",           "preference data",
                                       "prompt-only data",         "no data type genesis knows"};
  throw ConfigError(where + ": keys " + keys_of(row) + " are " +
                    kTypes[static_cast<int>(row_type(row))] + "; expected " + expected);
}

void check_messages(const Json& messages, const std::string& where, const std::string& key) {
  GENESIS_CHECK(messages.is_array() && !messages.empty(), ConfigError,
                where + ": \"" + key + "\" must be a non-empty list of messages");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string at = where + ": " + key + "[" + std::to_string(i) + "]";
    GENESIS_CHECK(messages[i].is_object(), ConfigError, at + " is not an object");
    GENESIS_CHECK(messages[i].contains("role") && messages[i].at("role").is_string(), ConfigError,
                  at + " has no string \"role\"");
  }
}

namespace {

std::string content_text(const Json& message) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::string prompt_lines(const Json& messages, std::size_t n, bool generation_prompt) {
  std::string out;
  for (std::size_t i = 0; i < n && i < messages.size(); ++i)
    out += messages[i].at("role").get<std::string>() + ": " + content_text(messages[i]) + "\n";
  return generation_prompt ? out + "assistant: " : out;
}

std::string contents(const Json& messages, std::size_t from) {
  std::string out;
  for (std::size_t i = from; i < messages.size(); ++i)
    out += (i == from ? "" : "\n") + content_text(messages[i]);
  return out;
}

}  // namespace genesis::data::rows
