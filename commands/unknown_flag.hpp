// What a user meant by a flag a command does not take: a typo of one of its own options, or, for
// `genesis train`, a config key written as HF Trainer's and TRL's command lines write them
// (`--learning_rate 1e-4`, which genesis spells `--set training.learning_rate=1e-4`).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace genesis::commands {

// The one-line error for `word` (as given: "--lr", "--max_steps=10"), refused by `command`
// ("genesis train"'s App); `args` is the whole command line, where a flag's value is looked up.
std::string unknown_flag_message(const CLI::App& command, const std::string& path,
                                 const std::string& word, const std::vector<std::string>& args);

// `genesis launch --emit-sbatch train --preset sft`: an option of launch that takes a value took
// the command's name for it. What happened and the order that works, or "" when nothing did.
std::string command_taken_as_value(const CLI::App& launch);

// `--set training.learning_rate 1e-4`: the stray value `word` follows a --set KEY without '='.
// The message that joins them, or "" when `word` is not such a value.
std::string set_value_apart_message(const std::string& word, const std::vector<std::string>& args);

}  // namespace genesis::commands
