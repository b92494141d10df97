// "Did you mean" for unknown keys, presets and choices: edit distance over the valid names, plus
// one rule for keys put in the wrong section (a dotted name whose last part matches exactly is as
// good as a one-letter typo).
#include <algorithm>

#include "config_schema.hpp"

namespace genesis::config_detail {
namespace {

// Optimal string alignment: Levenshtein's insert, delete and substitute, plus swapping two
// neighbouring letters as one edit, the commonest typo ("mpl" is one edit from "mlp", two from
// "dpo").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string_view last_part(std::string_view name) {
  auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  // Beyond a third of the word's length a "suggestion" is a guess rather than a typo fix.
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    std::size_t d = edit_distance(word, candidate);
    if (d > 0 && last_part(word) == last_part(candidate)) d = std::min<std::size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto match = closest_match(word, candidates);
  return match ? " (did you mean '" + *match + "'?)" : "";
}

}  // namespace genesis::config_detail

namespace genesis {

std::vector<std::string> config_keys_named(std::string_view name, bool typos) {
  const std::vector<std::string> names = config_detail::key_names();
  std::vector<std::string> parts;
  for (const auto& key : names) parts.emplace_back(config_detail::last_part(key));
  std::string part(name);
  if (std::find(parts.begin(), parts.end(), part) == parts.end())
    // A short word is a different word, not a typo: "lr" is not ppo.lam.
    part = typos && name.size() >= 5 ? config_detail::closest_match(name, parts).value_or("") : "";
  std::vector<std::string> keys;
  for (const auto& key : names)
    if (!part.empty() && config_detail::last_part(key) == part) keys.push_back(key);
  return keys;
}

bool config_key_is_bool(std::string_view key) {
  const config_detail::ConfigKey* entry = config_detail::find_key(key);
  Config config;
  return entry != nullptr && std::holds_alternative<bool*>(entry->field(config));
}

std::optional<std::string> closest_name(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  return config_detail::closest_match(word, candidates);
}

}  // namespace genesis
