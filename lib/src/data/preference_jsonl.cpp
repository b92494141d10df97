// Preference pairs from JSONL, in the two forms TRL's preference datasets come in.
#include "genesis/data/preference.hpp"
#include "jsonl_lines.hpp"

namespace genesis::data {

std::vector<PreferencePair> read_preference_jsonl(const std::filesystem::path& path) {
  std::vector<PreferencePair> pairs;
  jsonl::for_each_object(path, "preference data", [&](const jsonl::json& j,
                                                      const std::string& where) {
    for (const char* key : {"chosen", "rejected"})
      GENESIS_CHECK(j.contains(key), ConfigError,
                    where + ": no \"" + key + "\" (expected {\"prompt\", \"chosen\", \"rejected\"} "
                    "or chosen and rejected message lists)");
    PreferencePair p;
    if (j.at("chosen").is_array()) {
      const SftExample c = jsonl::from_messages(j.at("chosen"), where, "chosen");
      const SftExample r = jsonl::from_messages(j.at("rejected"), where, "rejected");
      GENESIS_CHECK(c.prompt == r.prompt, ConfigError,
                    where + ": \"chosen\" and \"rejected\" differ before their last message (a "
                    "pair's two chats must share every message but the response)");
      p = {c.prompt, c.response, r.response};
    } else {
      p = {jsonl::string_field(j, "prompt", where), jsonl::string_field(j, "chosen", where),
           jsonl::string_field(j, "rejected", where)};
    }
    GENESIS_CHECK(!p.prompt.empty(), ConfigError, where + ": the prompt is empty");
    if (j.contains("margin")) {
      GENESIS_CHECK(j.at("margin").is_number(), ConfigError,
                    where + ": \"margin\" must be a number, got " + j.at("margin").dump());
      p.margin = j.at("margin").get<double>();
    }
    p.origin = where;
    pairs.push_back(std::move(p));
  });
  GENESIS_CHECK(!pairs.empty(), ConfigError,
                "the preference data file '" + path.string() + "' holds no pairs");
  return pairs;
}

}  // namespace genesis::data
