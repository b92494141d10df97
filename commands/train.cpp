// `genesis train`: resolve the config (preset, --deepspeed, --config, --set), then either list
// presets, print the config, or hand it to the trainer. Every decision about the config lives in
// lib/src/core/config*.cpp; every decision about training in lib/src/train.
#include <memory>

#include <spdlog/spdlog.h>

#include "commands/command_table.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/env.hpp"
#include "genesis/launch/slurm.hpp"
#include "genesis/train/trainer.hpp"

namespace genesis::commands {
namespace {

struct TrainFlags {
  std::string preset;
  std::string config;
  std::string deepspeed;
  std::string algorithm;
  std::vector<std::string> sets;
  std::string name;
  std::string output_dir;
  std::string resume;
  bool overwrite = false;
  bool list_presets = false;
  bool print_config = false;
  bool dry_run = false;
};

void add_train_flags(CLI::App& app, TrainFlags& flags) {
  app.add_option("--preset,-p", flags.preset,
                 "Start from a named preset (see --list-presets); --config and --set apply over it")
      ->type_name("PRESET");
  app.add_option("--config,-c", flags.config,
                 "Read the TOML config FILE, applied over the preset (if any)")
      ->type_name("FILE");
  app.add_option("--deepspeed", flags.deepspeed,
                 "Read the DeepSpeed ds_config.json FILE (ZeRO stage, fp16/bf16, optimizer, "
                 "scheduler, batch sizes) over the preset; keys of --config and --set win (same "
                 "as --set distributed.deepspeed_config=FILE, applied before --set)")
      ->type_name("FILE");
  app.add_option("--algorithm", flags.algorithm,
                 "What to train: sft | rm | dpo | grpo | ppo (same as --set "
                 "training.algorithm=NAME, applied before --set)")
      ->type_name("NAME");
  app.add_option("--set,-s", flags.sets,
                 "Override one key, e.g. --set training.max_steps=100 or "
                 "--set model.hidden_sizes=[64,32]; repeatable, applied last, in order")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_option("--name", flags.name,
                 "Run name, the directory under the output directory (same as --set name=NAME, "
                 "applied before --set)")
      ->type_name("NAME");
  app.add_option("--output-dir,-o", flags.output_dir,
                 "Parent of the run directory (same as --set training.output_dir=DIR, applied "
                 "before --set)")
      ->type_name("DIR");
  app.add_option("--resume", flags.resume,
                 "Resume from CKPT: \"auto\" (the run's latest checkpoint, if any) or a checkpoint "
                 "path (same as --set training.resume_from_checkpoint=CKPT, applied before --set)")
      ->type_name("CKPT");
  app.add_flag("--overwrite", flags.overwrite,
               "Start over in a run directory that holds checkpoints, deleting them (same as --set "
               "training.overwrite_output_dir=true)");
  app.add_flag("--list-presets", flags.list_presets,
               "Print the names of the installed presets, one per line, and exit");
  app.add_flag("--dry-run", flags.dry_run,
               "Print the model size and each strategy's per-rank memory (and what "
               "strategy = auto picks) for WORLD_SIZE ranks, then exit without training");
  app.add_flag("--print-config", flags.print_config,
               "Print the resolved config as commented TOML and exit without training");
  // Users of HF Trainer and TRL look for --learning_rate among the flags: say where it is.
  app.footer("Every other setting is a config key (training.learning_rate, "
             "distributed.strategy, ...):\n--print-config lists them with their meaning, and "
             "--set KEY=VALUE or a TOML --config sets them.");
}

int run_train(const TrainFlags& flags, const RunContext& context) {
  if (flags.list_presets) {
    for (const auto& name : list_presets()) context.out << name << "\n";
    return 0;
  }
  std::vector<std::string> overrides;
  if (!flags.deepspeed.empty())
    overrides.push_back("distributed.deepspeed_config=" + flags.deepspeed);
  if (!flags.algorithm.empty())
    overrides.push_back("training.algorithm=" + flags.algorithm);
  if (!flags.name.empty()) overrides.push_back("name=" + flags.name);
  if (!flags.output_dir.empty()) overrides.push_back("training.output_dir=" + flags.output_dir);
  if (!flags.resume.empty()) overrides.push_back("training.resume_from_checkpoint=" + flags.resume);
  if (flags.overwrite) overrides.push_back("training.overwrite_output_dir=true");
  overrides.insert(overrides.end(), flags.sets.begin(), flags.sets.end());
  const Config config = load_config(flags.preset, flags.config, overrides);
  if (flags.print_config) {
    context.out << config_to_toml(config);
    return 0;
  }
  // srun -n N without a launcher: the N tasks form one world, as under genesis launch.
  launch::adopt_slurm_world();
  // Under a launcher only rank 0 reports; the others speak up for warnings and errors (and
  // for everything when the user asked for debug logs).
  const bool rank_zero = env::rank().value_or(0) == 0;
  if (!rank_zero && spdlog::get_level() == spdlog::level::info)
    spdlog::set_level(spdlog::level::warn);
  train::TrainOptions options;
  options.interactive = context.interactive;
  options.out = rank_zero ? &context.out : nullptr;
  options.dry_run = flags.dry_run;
  const train::TrainResult result = train::run_training(config, options);
  // Stopped by a scheduler's signal after saving: the status of a process that signal ended.
  return result.stopped_by_signal != 0 ? 128 + result.stopped_by_signal : 0;
}

}  // namespace

Command make_train_command() {
  auto flags = std::make_shared<TrainFlags>();
  return {"train", "Train a model from a preset or a TOML config",
          [flags](CLI::App& app) { add_train_flags(app, *flags); },
          [flags](const RunContext& context) { return run_train(*flags, context); }};
}

}  // namespace genesis::commands
