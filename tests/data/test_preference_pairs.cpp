// Generated preference pairs and their rows: chosen is the task's own answer, rejected a near
// miss that is never the answer, held-out prompts stay out, each side of a pair encodes exactly
// as SFT encodes it, and bad pairs fail with the pair's name.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>

#include "genesis/core/error.hpp"
#include "genesis/data/preference.hpp"
#include "genesis/data/sft.hpp"
#include "support/thrown_message.hpp"

namespace genesis {
namespace {

using data::ByteTokenizer;
using data::PreferencePair;

// Row `side` (0 chosen, 1 rejected) of pair `i` equals row i of `sft`.
bool same_row(const Tensor& pairs, std::int64_t i, int side, const Tensor& sft) {
  const std::int64_t T = sft.size(1);
  return std::memcmp(pairs.data<std::int64_t>() + (2 * i + side) * T,
                     sft.data<std::int64_t>() + i * T, T * sizeof(std::int64_t)) == 0;
}

}  // namespace

TEST_CASE("generated pairs: the task's answer against a near miss", "[preference]") {
  const std::vector<std::string> tasks{"reverse", "sort", "copy", "upper", "add"};
  const auto sft = data::generate_sft_tasks(tasks, 500, 7);
  const auto pairs = data::generate_preference_pairs(tasks, 500, 7);
  REQUIRE(pairs.size() == 500);
  std::set<std::string> kinds;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const PreferencePair& p = pairs[i];
    INFO(p.origin << ": " << p.chosen << " vs " << p.rejected);
    CHECK(p.prompt == sft[i].prompt);
    CHECK(p.chosen == sft[i].response);
    CHECK(p.rejected != p.chosen);
    CHECK_FALSE(p.rejected.empty());
    if (p.rejected.size() < p.chosen.size()) kinds.insert("cut short");
    else if (std::is_permutation(p.rejected.begin(), p.rejected.end(), p.chosen.begin()))
      kinds.insert("swapped");
    else kinds.insert("changed");
  }
  CHECK(kinds == std::set<std::string>{"changed", "cut short", "swapped"});
  CHECK(data::generate_preference_pairs(tasks, 50, 7)[3].rejected == pairs[3].rejected);

  // Held-out prompts never appear among the training pairs.
  std::vector<std::string> held;
  for (const auto& p : data::generate_preference_pairs(tasks, 100, 1)) held.push_back(p.prompt);
  for (const auto& p : data::generate_preference_pairs(tasks, 2000, 2, held))
    CHECK(std::find(held.begin(), held.end(), p.prompt) == held.end());
}

TEST_CASE("a pair's two sequences encode as SFT encodes each", "[preference]") {
  const ByteTokenizer tok;
  const std::vector<PreferencePair> pairs{{"reverse: abc\n", "cba", "cab"},
                                          {"add: 1+2\n", "3", "4"},
                                          {"copy: hello\n", "hello", "hell"}};
  const data::TensorDataset rows = data::encode_preference_pairs(pairs, tok, 20);
  CHECK(rows.inputs.shape() == Shape{3, 2, 20});
  CHECK(rows.targets.shape() == Shape{3, 2, 20});
  std::vector<data::SftExample> chosen, rejected;
  for (const auto& p : pairs) {
    chosen.push_back({p.prompt, p.chosen});
    rejected.push_back({p.prompt, p.rejected});
  }
  const data::TensorDataset c = data::encode_sft(chosen, tok, 20).rows;
  const data::TensorDataset r = data::encode_sft(rejected, tok, 20).rows;
  for (std::int64_t i = 0; i < 3; ++i) {
    CHECK(same_row(rows.inputs, i, 0, c.inputs));
    CHECK(same_row(rows.targets, i, 0, c.targets));
    CHECK(same_row(rows.inputs, i, 1, r.inputs));
    CHECK(same_row(rows.targets, i, 1, r.targets));
  }
}

TEST_CASE("an empty response or a pair too long for block_size names the pair", "[preference]") {
  const ByteTokenizer tok;
  CHECK_THAT(testing::thrown_message<ConfigError>([&] {
               data::encode_preference_pairs({{"copy: a\n", "a", "b", "pairs.jsonl:3"},
                                              {"copy: b\n", "b", "", "pairs.jsonl:4"}},
                                             tok, 16);
             }),
             Catch::StartsWith("pairs.jsonl:4: the rejected response is empty"));
  CHECK_THAT(testing::thrown_message<ConfigError>([&] {
               data::encode_preference_pairs({{"copy: abcdefgh\n", "abcdefgh", "abcdefg"}}, tok,
                                             16);
             }),
             Catch::StartsWith("pair 1: the prompt and chosen response are 24 tokens with "
                               "end-of-text, more than model.block_size = 16 + 1 hold"));
}

}  // namespace genesis
