// SFT examples from data files in TRL's formats. Errors carry "file:line" and say which key is
// missing or mistyped, because a dataset with one bad line among thousands is the usual case.
#include "data_rows.hpp"

namespace genesis::data {

namespace {

using rows::Json;

constexpr const char* kSftExpected =
    "{\"text\"}, {\"prompt\", \"completion\"}, {\"prompt\", \"response\"} or {\"messages\"} "
    "for SFT";

SftExample conversation(Json messages, std::size_t prompt_messages, const std::string& where) {
  SftExample e;
  e.form = ExampleForm::conversation;
  // Logs and reports show the prompt up to the last assistant message, and that message.
  std::size_t last = messages.size();
  while (last > 0 && messages[last - 1].at("role") != "assistant") --last;
  GENESIS_CHECK(last > 0, ConfigError, where + ": no assistant message to train on");
  const std::size_t shown = prompt_messages > 0 ? prompt_messages : last - 1;
  e.prompt = rows::prompt_lines(messages, shown, true);
  e.response = rows::contents(messages, shown);
  e.prompt_messages = prompt_messages;
  e.messages = std::make_shared<const Json>(std::move(messages));
  return e;
}

// TRL's prompt-completion type: two strings, or (conversational) the prompt's messages and the
// completion's. "response" is genesis's older name for "completion".
SftExample prompt_completion(const Json& row, const std::string& where) {
  GENESIS_CHECK(!(row.contains("response") && row.contains("completion")), ConfigError,
                where + ": both \"response\" and \"completion\"; give one");
  const char* answer = row.contains("completion") ? "completion" : "response";
  if (row.at("prompt").is_array() || row.at(answer).is_array()) {
    rows::check_messages(row.at("prompt"), where, "prompt");
    rows::check_messages(row.at(answer), where, answer);
    Json messages = row.at("prompt");
    for (const auto& m : row.at(answer)) messages.push_back(m);
    return conversation(std::move(messages), row.at("prompt").size(), where);
  }
  SftExample e{rows::string_field(row, "prompt", where), rows::string_field(row, answer, where)};
  GENESIS_CHECK(!e.prompt.empty(), ConfigError,
                where + ": the prompt is empty (a response needs a prompt to follow)");
  GENESIS_CHECK(!e.response.empty(), ConfigError, where + ": the response is empty");
  return e;
}

SftExample sft_example(const Json& row, const std::string& where) {
  switch (rows::row_type(row)) {
    case rows::RowType::text: {
      SftExample e;
      e.form = ExampleForm::text;
      e.response = rows::string_field(row, "text", where);
      GENESIS_CHECK(!e.response.empty(), ConfigError, where + ": the text is empty");
      return e;
    }
    case rows::RowType::prompt_completion:
      return prompt_completion(row, where);
    case rows::RowType::conversation:
      rows::check_messages(row.at("messages"), where, "messages");
      return conversation(row.at("messages"), 0, where);
    default:
      rows::refuse_row(row, where, kSftExpected);
  }
}

constexpr const char* kPromptExpected =
    "{\"prompt\"} (prompt-only: its other keys reach the rewards), {\"prompt\", "
    "\"completion\"}, {\"prompt\", \"response\"} or {\"messages\"} for grpo and ppo";

// TRL's prompt-only type, or a conversation without an answer: the prompt alone.
SftExample prompt_only(const Json& prompt, const std::string& where, const char* key) {
  if (!prompt.is_string()) {
    rows::check_messages(prompt, where, key);
    SftExample e;
    e.form = ExampleForm::conversation;
    e.prompt = rows::prompt_lines(prompt, prompt.size(), true);
    e.prompt_messages = prompt.size();
    e.messages = std::make_shared<const Json>(prompt);
    return e;
  }
  SftExample e{prompt.get<std::string>(), ""};
  GENESIS_CHECK(!e.prompt.empty(), ConfigError, where + ": the prompt is empty");
  return e;
}

SftExample prompt_example(const Json& row, const std::string& where) {
  switch (rows::row_type(row)) {
    case rows::RowType::prompt_only:
      return prompt_only(row.at("prompt"), where, "prompt");
    case rows::RowType::conversation: {
      const Json& messages = row.at("messages");
      rows::check_messages(messages, where, "messages");
      if (messages.back().at("role") != "assistant") return prompt_only(messages, where, "messages");
      return conversation(messages, 0, where);
    }
    case rows::RowType::prompt_completion:
      return prompt_completion(row, where);
    default:
      rows::refuse_row(row, where, kPromptExpected);
  }
}

}  // namespace

bool has_answer(const SftExample& e) {
  switch (e.form) {
    case ExampleForm::text:
      return true;
    case ExampleForm::conversation:
      return e.messages != nullptr && e.prompt_messages < e.messages->size();
    case ExampleForm::prompt_completion:
      break;
  }
  return !e.response.empty();
}

std::vector<SftExample> read_prompt_examples(const std::filesystem::path& path, RowFile format) {
  std::vector<SftExample> examples;
  rows::for_each_row(path, format, "prompt data", [&](const Json& row, const std::string& where) {
    examples.push_back(prompt_example(row, where));
    examples.back().origin = where;
    examples.back().row = std::make_shared<const Json>(row);
  });
  GENESIS_CHECK(!examples.empty(), ConfigError,
                "the prompt data file '" + path.string() + "' holds no prompts");
  return examples;
}

std::vector<SftExample> read_sft_examples(const std::filesystem::path& path, RowFile format) {
  std::vector<SftExample> examples;
  rows::for_each_row(path, format, "SFT data", [&](const Json& row, const std::string& where) {
    examples.push_back(sft_example(row, where));
    examples.back().origin = where;
  });
  GENESIS_CHECK(!examples.empty(), ConfigError,
                "the SFT data file '" + path.string() + "' holds no examples");
  return examples;
}

}  // namespace genesis::data
