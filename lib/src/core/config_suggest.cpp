// "Did you mean" for unknown keys, presets and choices: Levenshtein distance over the valid
// names, plus one rule for keys put in the wrong section (a dotted name whose last part matches
// exactly is as good as a one-letter typo).
#include <algorithm>
#include <numeric>

#include "config_schema.hpp"

namespace genesis::config_detail {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the DP table: row[j] is the distance between a[0..i) and b[0..j).
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::string_view last_part(std::string_view name) {
  auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

}  // namespace

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
