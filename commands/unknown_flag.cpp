// See unknown_flag.hpp.
#include "commands/unknown_flag.hpp"

#include <algorithm>

#include "genesis/core/config.hpp"

namespace genesis::commands {
namespace {

// Other tools' names for a key (the last part of its name), and the value a bare flag stands for.
struct Alias {
  std::string_view flag, key, value;
};
constexpr Alias kAliases[] = {
    {"lr", "learning_rate", ""},
    {"batch_size", "per_device_train_batch_size", ""},
    {"micro_batch_size", "per_device_train_batch_size", ""},
    {"grad_accum", "gradient_accumulation_steps", ""},
    {"gradient_accumulation", "gradient_accumulation_steps", ""},
    {"steps", "max_steps", ""},
    {"grad_clip", "max_grad_norm", ""},
    {"clip_grad_norm", "max_grad_norm", ""},
    {"warmup", "warmup_steps", ""},
    {"bf16", "mixed_precision", "bf16"},
    {"fp16", "mixed_precision", "fp16"},
};

// nccl-tests' flags for threads and GPUs in one process; genesis runs one rank per process.
constexpr std::string_view kNcclTestsFlags[] = {"-g", "--ngpus", "-t", "--nthreads"};

// Every spelling of the command's options, with their dashes: "--nproc", "-n".
std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
    for (const auto& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

// The value given with the flag: after '=', or the next word unless that is a flag too.
std::string flag_value(const std::string& word, const std::vector<std::string>& args) {
  if (auto eq = word.find('='); eq != std::string::npos) return word.substr(eq + 1);
  auto at = std::find(args.begin(), args.end(), word);
  if (at == args.end() || at + 1 == args.end() || (*(at + 1)).starts_with("-")) return "VALUE";
  return *(at + 1);
}

// "--set training.max_steps=100", or "one of --set dpo.beta=0.1, --set grpo.beta=0.1".
std::string set_flags(const std::vector<std::string>& keys, const std::string& value) {
  std::string text = keys.size() > 1 ? "one of " : "";
  for (std::size_t i = 0; i < keys.size(); ++i)
    text += (i > 0 ? ", " : "") + ("--set " + keys[i] + "=" + value);
  return text;
}

// `genesis train --nproc 2`: the flag is genesis launch's, whose command line holds train's.
bool is_launch_flag(const CLI::App& command, const std::string& flag) {
  const CLI::App* root = command.get_parent();
  if (root == nullptr || command.get_name() == "launch") return false;
  for (const CLI::App* sub : root->get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == "launch") {
      const auto names = option_names(*sub);
      return std::find(names.begin(), names.end(), flag) != names.end();
    }
  return false;
}

}  // namespace

std::string unknown_flag_message(const CLI::App& command, const std::string& path,
                                 const std::string& word, const std::vector<std::string>& args) {
  const std::string flag = word.substr(0, word.find('='));
  const std::string message = "unknown option '" + flag + "' of " + path;
  const std::string see = " (see " + path + " --help)";
  // A key's exact name first: "--beta" is dpo.beta or grpo.beta, not a typo of "--set".
  std::string name = flag.substr(std::min(flag.find_first_not_of('-'), flag.size()));
  std::replace(name.begin(), name.end(), '-', '_');
  const bool train = command.get_name() == "train" && !name.empty();
  const auto key_message = [&](const std::vector<std::string>& keys, std::string_view value = "") {
    std::string given = value.empty() ? flag_value(word, args) : std::string(value);
    // A bare switch (`--gradient_checkpointing`, as HF's argument parser takes it) means true.
    if (given == "VALUE" && std::all_of(keys.begin(), keys.end(), config_key_is_bool))
      given = "true";
    return message + "; settings are config keys, given with --set: " + set_flags(keys, given) +
           see;
  };
  if (auto keys = train ? config_keys_named(name, false) : std::vector<std::string>{};
      !keys.empty())
    return key_message(keys);
  for (const Alias& alias : kAliases)
    if (train && name == alias.flag)
      return key_message(config_keys_named(alias.key, false), alias.value);
  if (is_launch_flag(command, flag)) {
    const std::string value = flag_value(word, args);
    return message + ": it is a flag of genesis launch, given before the command: genesis launch " +
           flag + (value == "VALUE" ? "" : " " + value) + " " + command.get_name() +
           " ... (see genesis launch --help)";
  }
  if (const std::string taken = command_taken_as_value(command); !taken.empty())
    return message + ": " + taken + see;
  if (command.get_name() == "bench-allreduce" &&
      std::find(std::begin(kNcclTestsFlags), std::end(kNcclTestsFlags), flag) !=
          std::end(kNcclTestsFlags))
    return message + ": nccl-tests' threads and GPUs per process are genesis's ranks, one per "
           "process: genesis launch --gpus N bench-allreduce ... (or --nproc N on the CPU)";
  // A one-letter flag is one keystroke from many others: no guess.
  if (auto match = flag.size() > 2 ? closest_name(flag, option_names(command)) : std::nullopt)
    return message + ": did you mean '" + *match + "'?" + see;
  if (auto keys = train ? config_keys_named(name, true) : std::vector<std::string>{};
      !keys.empty())
    return key_message(keys);
  return message + see;
}

std::string command_taken_as_value(const CLI::App& command) {
  const CLI::App* root = command.get_parent();
  if (root == nullptr || command.get_name() != "launch") return "";
  for (const CLI::Option* option : command.get_options()) {
    if (option->count() == 0 || option->get_type_size() == 0) continue;
    const std::string& taken = option->results().back();
    for (const CLI::App* sub : root->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() != taken) continue;
      const std::string name = option->get_lnames().empty()
                                   ? "-" + option->get_snames().front()
                                   : "--" + option->get_lnames().front();
      return name + " took '" + taken + "', the command, for its " + option->get_type_name() +
             ": genesis launch ... " + name + " " + option->get_type_name() + " " + taken + " ...";
    }
  }
  return "";
}

std::string set_value_apart_message(const std::string& word,
                                    const std::vector<std::string>& args) {
  for (std::size_t i = 2; i < args.size(); ++i) {
    const bool after_set = args[i - 2] == "--set" || args[i - 2] == "-s";
    if (!after_set || args[i] != word || args[i - 1].find('=') != std::string::npos) continue;
    std::string key = args[i - 1];
    if (key.ends_with(":")) key.pop_back();
    return "--set takes KEY=VALUE as one word: --set " + key + "=" + word;
  }
  return "";
}

}  // namespace genesis::commands
