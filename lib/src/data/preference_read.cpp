// Preference pairs from data files in TRL's preference type, explicit prompt or implicit.
#include "data_rows.hpp"
#include "genesis/data/preference.hpp"

namespace genesis::data {

namespace {

using rows::Json;

constexpr const char* kPairExpected =
    "{\"prompt\", \"chosen\", \"rejected\"} or {\"chosen\", \"rejected\"} for rm and dpo";

// TRL's extract_prompt on strings: the common prefix, less a space it would end with (the space
// stays with the responses).
PreferencePair split_strings(const std::string& chosen, const std::string& rejected) {
  std::size_t i = 0;
  while (i < chosen.size() && i < rejected.size() && chosen[i] == rejected[i]) ++i;
  if (i < chosen.size() && i < rejected.size() && i > 0 && chosen[i - 1] == ' ') --i;
  return {chosen.substr(0, i), chosen.substr(i), rejected.substr(i)};
}

PreferencePair from_messages(const Json& row, const std::string& where) {
  Json chosen = row.at("chosen"), rejected = row.at("rejected");
  rows::check_messages(chosen, where, "chosen");
  rows::check_messages(rejected, where, "rejected");
  std::size_t prompt = 0;
  if (row.contains("prompt")) {
    rows::check_messages(row.at("prompt"), where, "prompt");
    prompt = row.at("prompt").size();
    Json c = row.at("prompt"), r = row.at("prompt");
    for (const auto& m : chosen) c.push_back(m);
    for (const auto& m : rejected) r.push_back(m);
    chosen = std::move(c);
    rejected = std::move(r);
  } else {
    while (prompt < chosen.size() && prompt < rejected.size() && chosen[prompt] == rejected[prompt])
      ++prompt;
  }
  GENESIS_CHECK(prompt > 0, ConfigError,
                where + ": \"chosen\" and \"rejected\" share no leading message to be the prompt "
                "(give a \"prompt\" list)");
  GENESIS_CHECK(prompt < chosen.size() && prompt < rejected.size(), ConfigError,
                where + ": \"chosen\" and \"rejected\" are the same conversation");
  PreferencePair p{rows::prompt_lines(chosen, prompt, true), rows::contents(chosen, prompt),
                   rows::contents(rejected, prompt)};
  p.prompt_messages = prompt;
  p.chosen_messages = std::make_shared<const Json>(std::move(chosen));
  p.rejected_messages = std::make_shared<const Json>(std::move(rejected));
  return p;
}

PreferencePair preference_pair(const Json& row, const std::string& where) {
  if (rows::row_type(row) != rows::RowType::preference || !row.contains("chosen") ||
      !row.contains("rejected"))
    rows::refuse_row(row, where, kPairExpected);
  if (row.at("chosen").is_array() || row.at("rejected").is_array()) return from_messages(row, where);
  const std::string chosen = rows::string_field(row, "chosen", where);
  const std::string rejected = rows::string_field(row, "rejected", where);
  if (!row.contains("prompt")) return split_strings(chosen, rejected);
  return {rows::string_field(row, "prompt", where), chosen, rejected};
}

}  // namespace

std::vector<PreferencePair> read_preference_pairs(const std::filesystem::path& path,
                                                  RowFile format) {
  std::vector<PreferencePair> pairs;
  rows::for_each_row(path, format, "preference data", [&](const Json& row, const std::string& where) {
    PreferencePair p = preference_pair(row, where);
    GENESIS_CHECK(!p.prompt.empty(), ConfigError, where + ": the prompt is empty");
    if (row.contains("margin")) {
      GENESIS_CHECK(row.at("margin").is_number(), ConfigError,
                    where + ": \"margin\" must be a number, got " + row.at("margin").dump());
      p.margin = row.at("margin").get<double>();
    }
    p.origin = where;
    pairs.push_back(std::move(p));
  });
  GENESIS_CHECK(!pairs.empty(), ConfigError,
                "the preference data file '" + path.string() + "' holds no pairs");
  return pairs;
}

SftExample preference_side(const PreferencePair& p, bool rejected) {
  SftExample e{p.prompt, rejected ? p.rejected : p.chosen, p.origin, p.task};
  if (p.chosen_messages) {
    e.form = ExampleForm::conversation;
    e.messages = rejected ? p.rejected_messages : p.chosen_messages;
    e.prompt_messages = p.prompt_messages;
  }
  return e;
}

}  // namespace genesis::data
