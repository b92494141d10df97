// Generated preference pairs and their rows: chosen is the task's own answer, rejected a near
// miss that is never the answer, held-out prompts stay out, each side of a pair encodes exactly
// as SFT encodes it, and bad pairs fail with the pair's name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "genesis/core/error.hpp"
#include "genesis/data/preference.hpp"
#include "genesis/data/sft.hpp"
#include "support/cli_run.hpp"
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

// How `rejected` misses `chosen`; "other" for none of the generator's ways.
std::string kind_of_miss(const std::string& chosen, const std::string& rejected) {
  if (rejected.size() < chosen.size()) return "cut short";
  if (rejected.size() > chosen.size()) return "other";
  if (std::is_permutation(rejected.begin(), rejected.end(), chosen.begin())) return "swapped";
  std::vector<std::size_t> differ;
  for (std::size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i] != rejected[i]) differ.push_back(i);
  if (differ.size() == 1 && std::abs(chosen[differ[0]] - rejected[differ[0]]) == 1)
    return "stepped";
  if (differ.size() == 1) return "changed";
  for (std::size_t drop = 0; drop < chosen.size(); ++drop)  // one dropped, another doubled
    for (std::size_t twice = 0; twice + 1 < chosen.size(); ++twice) {
      std::string s = chosen;
      s.erase(drop, 1);
      s.insert(twice, 1, s[twice]);
      if (s == rejected) return "slipped";
    }
  return "other";
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
    kinds.insert(kind_of_miss(p.chosen, p.rejected));
  }
  CHECK(kinds == std::set<std::string>{"changed", "cut short", "swapped", "stepped", "slipped"});
  CHECK(data::generate_preference_pairs(tasks, 50, 7)[3].rejected == pairs[3].rejected);

  // Held-out prompts never appear among the training pairs.
  std::vector<std::string> held;
  for (const auto& p : data::generate_preference_pairs(tasks, 100, 1)) held.push_back(p.prompt);
  for (const auto& p : data::generate_preference_pairs(tasks, 2000, 2, held))
    CHECK(std::find(held.begin(), held.end(), p.prompt) == held.end());
}

TEST_CASE("a pair's two sequences encode as SFT encodes each", "[preference]") {
  const data::ByteTextTokenizer tok;
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
  const data::ByteTextTokenizer tok;
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
                               "their end, more than model.block_size = 16 + 1 hold"));
}

TEST_CASE("preference JSONL: prompt/chosen/rejected, or two chats sharing all but the answer",
          "[preference]") {
  testing::TempDir dir;
  const auto path = dir.write("pairs.jsonl",
                              R"({"prompt": "2+2=", "chosen": "4", "rejected": "5"})"
                              "\n\n"
                              R"({"chosen": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], )"
                              R"("rejected": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "go away"}]})"
                              "\n");
  const auto pairs = data::read_preference_jsonl(path);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].prompt == "2+2=");
  CHECK(pairs[0].chosen == "4");
  CHECK(pairs[0].rejected == "5");
  CHECK(pairs[1].prompt == "user: hi\nassistant: ");  // as read_sft_jsonl renders a chat
  CHECK(pairs[1].chosen == "hello");
  CHECK(pairs[1].rejected == "go away");
  CHECK(pairs[1].origin == path.string() + ":3");

  const auto error = [&](const std::string& line) {
    const auto bad = dir.write("bad.jsonl", R"({"prompt": "a", "chosen": "b", "rejected": "c"})"
                                            "\n" + line + "\n");
    return testing::thrown_message<ConfigError>([&] { data::read_preference_jsonl(bad); });
  };
  const std::string at = (dir.path() / "bad.jsonl").string() + ":2: ";
  CHECK_THAT(error(R"({"prompt": "a", "chosen": "b"})"),
             Catch::StartsWith(at + "keys \"prompt\", \"chosen\" are preference data; expected "
                                    "{\"prompt\", \"chosen\", \"rejected\"}"));
  CHECK_THAT(error(R"({"prompt": "a", "completion": "b"})"),
             Catch::StartsWith(at + "keys \"prompt\", \"completion\" are prompt-completion data") &&
                 Catch::Contains("for rm and dpo"));
  CHECK_THAT(error(R"({"prompt": "a", "chosen": 3, "rejected": "c"})"),
             Catch::StartsWith(at + "\"chosen\" is not a string"));
  CHECK_THAT(error(R"({"chosen": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], )"
                   R"("rejected": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "c"}]})"),
             Catch::StartsWith(at + "\"chosen\" and \"rejected\" share no leading message"));
  CHECK_THAT(error(R"({"chosen": [{"role": "user", "content": "a"}], "rejected": []})"),
             Catch::StartsWith(at + "\"rejected\" must be a non-empty list of messages"));
  CHECK_THAT(error("{oops"), Catch::StartsWith(at + "not valid JSON"));
  CHECK_THAT(error(R"({"prompt": "a", "chosen": "b", "rejected": "c", "margin": "big"})"),
             Catch::StartsWith(at + "\"margin\" must be a number, got \"big\""));
}

// TRL's optional margin column reaches the rows as extra, one value per pair.
TEST_CASE("preference JSONL: an optional margin per pair", "[preference]") {
  testing::TempDir dir;
  const auto path = dir.write("pairs.jsonl",
                              R"({"prompt": "a", "chosen": "b", "rejected": "c", "margin": 1.5})"
                              "\n"
                              R"({"prompt": "d", "chosen": "e", "rejected": "f"})"
                              "\n");
  const auto pairs = data::read_preference_jsonl(path);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].margin == 1.5);
  CHECK(pairs[1].margin == 0.0);
  const data::ByteTextTokenizer tokenizer;
  const data::TensorDataset rows = data::encode_preference_pairs(pairs, tokenizer, 8);
  REQUIRE(rows.extra.defined());
  CHECK(rows.extra.to_vector() == std::vector<float>{1.5f, 0.0f});
  CHECK_FALSE(data::encode_preference_pairs({pairs[1]}, tokenizer, 8).extra.defined());
}

TEST_CASE("genesis train --algorithm rm reads a preference JSONL file", "[preference]") {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += R"({"prompt": "copy: w)" + std::to_string(i) + R"(\n", "chosen": "w)" +
            std::to_string(i) + R"(", "rejected": "x"})" + "\n";
  const auto path = dir.write("pairs.jsonl", text);
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "rm", "-o", dir.path().string(), "--set", "model.init_from=\"\"",
       "--set", "data.source=\"jsonl:" + path.string() + "\"", "--set", "training.max_steps=2", "--set",
       "data.eval_fraction=0.25"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("30 train, 10 eval examples") != std::string::npos);
}

}  // namespace genesis
