// reward.command as a user's scoring program meets it: JSONL {prompt, completion} in, one number
// per line out, and every way it can go wrong (a crash, a hang, a line that is not a number, the
// wrong count) an error that names the command and the line, within the timeout, never a hang.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "train/reward_command.hpp"

namespace genesis {
namespace {

using train::run_reward_command;
using train::ScoredText;

const std::vector<ScoredText> kItems{{"reverse: ab\n", "ba"},
                                     {"say \"hi\"\n", "line one\nline two \\ tab\t"},
                                     {"add: 1+1\n", ""}};

TEST_CASE("reward.command gets JSONL on stdin and answers one number per line", "[reward]") {
  testing::TempDir dir;
  const std::string seen = (dir.path() / "seen.jsonl").string();
  const auto scores = run_reward_command("tee " + seen + " | awk '{print NR * 0.5}'", kItems, 10);
  CHECK(scores == std::vector<double>{0.5, 1.0, 1.5});
  std::ifstream in(seen);
  std::size_t i = 0;
  for (std::string line; std::getline(in, line); ++i) {
    const nlohmann::json j = nlohmann::json::parse(line);
    REQUIRE(i < kItems.size());
    CHECK(j["prompt"] == kItems[i].prompt);
    CHECK(j["completion"] == kItems[i].completion);
  }
  CHECK(i == kItems.size());
}

TEST_CASE("reward.command failures are errors that say what went wrong", "[reward]") {
  CHECK_THROWS_WITH(run_reward_command("echo 'score.py: no model' >&2; exit 3", kItems, 10),
                    Catch::Contains("failed (exit 3)") && Catch::Contains("score.py: no model"));
  CHECK_THROWS_WITH(run_reward_command("awk '{print NR == 2 ? \"high\" : 1}'", kItems, 10),
                    Catch::Contains("answered \"high\" on line 2") &&
                        Catch::Contains("say \\\"hi\\\""));
  CHECK_THROWS_WITH(run_reward_command("head -n 1 > /dev/null; echo 1", kItems, 10),
                    Catch::Contains("printed 1 number for 3 completions"));
  CHECK_THROWS_WITH(run_reward_command("awk '{print \"nan\"}'", kItems, 10),
                    Catch::Contains("not a finite number"));
  CHECK_THROWS_WITH(run_reward_command("no-such-scorer-xyz", kItems, 10),
                    Catch::Contains("failed (exit 127)"));
  // A hang is cut at the timeout, its children with it.
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(run_reward_command("sleep 30", kItems, 0.5), Timeout);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

}  // namespace
}  // namespace genesis
