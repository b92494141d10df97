#include "rewards.hpp"

#include <algorithm>
#include <charconv>
#include <span>

#include "genesis/core/error.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::train {
namespace {

using Tokens = std::vector<std::int64_t>;

double exact(const Tokens& completion, const Tokens& answer, const CompletionReading&) {
  return completion == answer ? 1.0 : 0.0;
}

double well_formed(const Tokens& completion, const Tokens& /*answer*/,
                   const CompletionReading& reading) {
  if (!reading.stopped(completion)) return 0.0;
  const std::span<const std::int64_t> body(completion.data(), completion.size() - 1);
  if (reading.tokenizer == nullptr) {
    for (const std::int64_t t : body)
      if (!((t >= ' ' && t <= '~') || t == '\n')) return 0.0;
    return 1.0;
  }
  // A tokenizer decodes a broken character as U+FFFD.
  const std::string text = reading.tokenizer->decode(body);
  if (tokenizer::find_invalid_utf8(text) || text.find("\xEF\xBF\xBD") != std::string::npos)
    return 0.0;
  for (const unsigned char c : text)
    if ((c < ' ' && c != '\n' && c != '\t') || c == 0x7f) return 0.0;
  return 1.0;
}

// The share of positions where the two token lists agree, over the longer one's length: 1 only
// for the answer itself, and a completion with one wrong digit of a four-digit sum earns 0.8
// (4 of 5 tokens, end-of-text included) where exact match gives it nothing.
double matching_share(const Tokens& completion, const Tokens& answer, const CompletionReading&) {
  const std::size_t longer = std::max(completion.size(), answer.size());
  if (longer == 0) return 1.0;
  std::size_t same = 0;
  for (std::size_t i = 0; i < std::min(completion.size(), answer.size()); ++i)
    same += completion[i] == answer[i] ? 1 : 0;
  return static_cast<double>(same) / static_cast<double>(longer);
}

// The built-in rewards by name: the one list that parsing checks names against and scoring
// dispatches on.
struct Builtin {
  const char* name;
  double (*value)(const Tokens& completion, const Tokens& answer, const CompletionReading& reading);
  bool reads_answer;
};
constexpr Builtin kBuiltins[] = {
    {"exact", exact, true}, {"chars", matching_share, true}, {"format", well_formed, false}};

const Builtin* builtin(const std::string& name) {
  for (const Builtin& b : kBuiltins)
    if (name == b.name) return &b;
  return nullptr;
}

}  // namespace

bool CompletionReading::stopped(const std::vector<std::int64_t>& completion) const {
  return !completion.empty() &&
         std::find(stops.begin(), stops.end(), completion.back()) != stops.end();
}

bool needs_answers(const std::vector<RewardFunction>& functions) {
  return std::any_of(functions.begin(), functions.end(),
                     [](const RewardFunction& f) { return builtin(f.name)->reads_answer; });
}

std::vector<RewardFunction> parse_reward_functions(const std::vector<std::string>& specs) {
  std::vector<RewardFunction> out;
  for (const std::string& spec : specs) {
    const std::size_t colon = spec.find(':');
    RewardFunction f{.name = spec.substr(0, colon), .weight = 1.0};
    const auto bad = [&](const std::string& why) {
      return ConfigError("reward.functions entry \"" + spec + "\": " + why +
                         " (expected \"name:weight\", name exact, chars or format, e.g. "
                         "\"exact:1.0\")");
    };
    if (builtin(f.name) == nullptr) throw bad("unknown reward \"" + f.name + "\"");
    if (colon != std::string::npos) {
      const std::string w = spec.substr(colon + 1);
      const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), f.weight);
      if (ec != std::errc() || end != w.data() + w.size()) throw bad("weight \"" + w + "\" is not a number");
    }
    out.push_back(f);
  }
  return out;
}

Rewards score_completion(const std::vector<RewardFunction>& functions,
                         const std::vector<std::int64_t>& completion,
                         const std::vector<std::int64_t>& answer,
                         const CompletionReading& reading) {
  Rewards r;
  for (const RewardFunction& f : functions) {
    const double value = builtin(f.name)->value(completion, answer, reading);
    r.values.push_back(value);
    r.total += f.weight * value;
  }
  return r;
}

}  // namespace genesis::train
