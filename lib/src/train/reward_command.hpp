// Rewards from a user's program (reward.command): `sh -c COMMAND` reads one JSON object
// {"prompt": ..., "completion": ..., "row": {...}} per line on stdin and writes one number per
// line, in order. "row" is the data file's row the prompt came from, every key as read (a
// reference answer, test cases), and absent for the built-in tasks.
// Whatever goes wrong (it cannot start, exits non-zero or by a signal, prints a line that is not
// a number or the wrong count, or outlives the timeout) ends the step with an error naming the
// command, the line and its stderr's last words; it never hangs the run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genesis::train {

struct ScoredText {
  std::string prompt, completion;
  std::shared_ptr<const nlohmann::ordered_json> row{};  // null: none
};

// The command's score of each item, in order. Throws Error (exit 1) on any failure above, Timeout
// when it is still running after timeout_s seconds (it is then killed with its children).
std::vector<double> run_reward_command(const std::string& command,
                                       const std::vector<ScoredText>& items, double timeout_s);

}  // namespace genesis::train
