// Bad input as users type it: each is answered with exit status 2 and one line on stderr,
// `genesis: error: ...`, naming what is wrong, and nothing is trained (stdout stays empty).
// Also what `train` prints before training: --list-presets and --print-config.
#include <catch2/catch.hpp>

#include <algorithm>

#include "genesis/core/config.hpp"
#include "support/cli_run.hpp"

using namespace genesis;
using genesis::testing::lines_of;
using genesis::testing::run_genesis;
using genesis::testing::RunOptions;
using genesis::testing::TempDir;

namespace {

// Presets come from the build tree only, whatever the developer's environment says.
const RunOptions kClean{{{"GENESIS_PRESET_PATH", std::nullopt}}, {}};

// Runs genesis with `args`, requires exit 2 and one stderr line, and returns that line.
std::string usage_error(const std::vector<std::string>& args) {
  auto result = run_genesis(args, kClean);
  INFO("stderr: " << result.err);
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  auto lines = lines_of(result.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("genesis: error: ", 0) == 0);
  return lines[0];
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a missing preset lists the available ones", "[cli]") {
  std::string line = usage_error({"train", "--preset", "nope"});
  CHECK(line.rfind("genesis: error: unknown preset 'nope' (available: ", 0) == 0);
  CHECK(contains(line, "gpt-tiny"));
  CHECK(contains(line, "mlp"));
}

TEST_CASE("malformed TOML names the file and line", "[cli]") {
  TempDir dir;
  auto file = dir.write("broken.toml", "name = \"x\"\n[training\n");
  std::string line = usage_error({"train", "--config", file.string(), "--print-config"});
  CHECK(contains(line, file.string() + ":2:"));
  CHECK(contains(line, "malformed TOML"));
  CHECK_FALSE(contains(line, "JSON"));
  // A DeepSpeed JSON file given as the TOML config.
  auto ds = dir.write("ds_config.json", "{\n  \"zero_optimization\": {\"stage\": 2}\n}\n");
  CHECK(contains(usage_error({"train", "--config", ds.string(), "--print-config"}),
                 "(this is JSON: a DeepSpeed config goes to --deepspeed FILE)"));
}

TEST_CASE("an unknown key gets a suggestion", "[cli]") {
  TempDir dir;
  auto file = dir.write("typo.toml", "[training]\nlearnig_rate = 0.1\n");
  CHECK(usage_error({"train", "--config", file.string(), "--print-config"}) ==
        "genesis: error: " + file.string() +
            ":2: unknown key 'training.learnig_rate' (did you mean 'training.learning_rate'?)");
}

TEST_CASE("a negative batch size is refused", "[cli]") {
  CHECK(usage_error({"train", "--preset", "mlp", "--set",
                     "training.per_device_train_batch_size=-4", "--print-config"}) ==
        "genesis: error: --set training.per_device_train_batch_size must be a positive integer, "
        "got -4");
}

TEST_CASE("a --set without '=' says how to write it", "[cli]") {
  CHECK(usage_error({"train", "--preset", "mlp", "--set", "foo", "--print-config"}) ==
        "genesis: error: --set 'foo' has no '=': use --set section.key=value");
}

TEST_CASE("unknown flags, commands and values are usage errors", "[cli]") {
  CHECK(contains(usage_error({"train", "--bogus"}), "--bogus"));
  CHECK(contains(usage_error({"frobnicate"}), "frobnicate"));
  CHECK(contains(usage_error({"--log-level", "loud", "train", "--list-presets"}), "loud"));
  CHECK(contains(usage_error({"train", "--config", "/nonexistent/x.toml", "--print-config"}),
                 "config file '/nonexistent/x.toml' not found"));
  CHECK(contains(usage_error({"train", "--preset", "mlp", "--set",
                              "training.mixed_precision=fp8", "--print-config"}),
                 "must be one of no, fp16, bf16"));
}

TEST_CASE("an unknown flag is answered with what the user meant", "[cli]") {
  // A typo of the command's own option.
  CHECK(usage_error({"launch", "--nprocs", "2", "train"}) ==
        "genesis: error: unknown option '--nprocs' of genesis launch: did you mean '--nproc'? "
        "(see genesis launch --help)");
  CHECK(contains(usage_error({"ckpt", "ls", "--jsn", "runs"}),
                 "unknown option '--jsn' of genesis ckpt ls: did you mean '--json'?"));
  // HF Trainer's and TRL's flags are genesis's config keys, with the value given.
  CHECK(usage_error({"train", "--preset", "sft", "--learning_rate", "1e-4"}) ==
        "genesis: error: unknown option '--learning_rate' of genesis train; settings are config "
        "keys, given with --set: --set training.learning_rate=1e-4 (see genesis train --help)");
  CHECK(contains(usage_error({"train", "--max-steps=100"}), "--set training.max_steps=100"));
  CHECK(contains(usage_error({"train", "--beta", "0.1"}),
                 "one of --set dpo.beta=0.1, --set grpo.beta=0.1"));
  CHECK(contains(usage_error({"train", "--lr", "3e-4"}), "--set training.learning_rate=3e-4"));
  CHECK(contains(usage_error({"train", "--bf16"}), "--set training.mixed_precision=bf16"));
  CHECK(contains(usage_error({"train", "--gradient_checkpointing", "--preset", "sft"}),
                 "--set training.gradient_checkpointing=true"));
  CHECK(contains(usage_error({"train", "--warmup_steps"}), "--set training.warmup_steps=VALUE"));
  CHECK(contains(usage_error({"train", "--maxsteps", "3"}), "--set training.max_steps=3"));
  // A launcher's flag given to the command it launches.
  CHECK(contains(usage_error({"train", "--preset", "sft", "--nproc", "2"}),
                 "unknown option '--nproc' of genesis train: it is a flag of genesis launch, "
                 "given before the command: genesis launch --nproc 2 train ..."));
  // A launcher option given no value takes the command's name for one.
  CHECK(usage_error({"launch", "--nnodes", "2", "--emit-sbatch", "train", "--preset", "sft"}) ==
        "genesis: error: unknown option '--preset' of genesis launch: --emit-sbatch took 'train', "
        "the command, for its FILE: genesis launch ... --emit-sbatch FILE train ... "
        "(see genesis launch --help)");
  CHECK(usage_error({"launch", "--nproc", "2", "--log-dir", "doctor"}) ==
        "genesis: error: nothing to launch: --log-dir took 'doctor', the command, for its DIR: "
        "genesis launch ... --log-dir DIR doctor ...");
  // nccl-tests' GPUs per process are ranks; a one-letter flag gets no guess.
  CHECK(contains(usage_error({"bench-allreduce", "-b", "8", "-g", "1"}),
                 "unknown option '-g' of genesis bench-allreduce: nccl-tests' threads and GPUs per "
                 "process are genesis's ranks, one per process: genesis launch --gpus N "
                 "bench-allreduce ..."));
  CHECK(usage_error({"bench-allreduce", "-a", "1"}) ==
        "genesis: error: unknown option '-a' of genesis bench-allreduce "
        "(see genesis bench-allreduce --help)");
  // --set KEY VALUE, as two words.
  CHECK(usage_error({"train", "--set", "training.learning_rate", "1e-4"}) ==
        "genesis: error: --set takes KEY=VALUE as one word: --set training.learning_rate=1e-4");
  // A misspelt command.
  CHECK(usage_error({"tarin", "--preset", "sft"}) ==
        "genesis: error: unknown command 'tarin' (did you mean 'train'? commands: doctor, launch, "
        "train, generate, score, tokenize, ckpt, report, bench-allreduce)");
  // Nothing close: no guess.
  CHECK(usage_error({"train", "--frobnicate"}) ==
        "genesis: error: unknown option '--frobnicate' of genesis train "
        "(see genesis train --help)");
}

TEST_CASE("a debug log level also names the exception type", "[cli]") {
  auto result = run_genesis({"--log-level", "debug", "train", "--preset", "nope"}, kClean);
  CHECK(result.exit_code == 2);
  auto lines = lines_of(result.err);
  REQUIRE(lines.size() >= 2);
  CHECK(lines[lines.size() - 2].rfind("genesis: error: unknown preset 'nope'", 0) == 0);
  CHECK(lines.back() == "genesis: exception type: genesis::ConfigError");
}

TEST_CASE("train --list-presets prints the installed presets", "[cli]") {
  auto result = run_genesis({"train", "--list-presets"}, kClean);
  REQUIRE(result.exit_code == 0);
  auto names = lines_of(result.out);
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(std::count(names.begin(), names.end(), "mlp") == 1);
  CHECK(std::count(names.begin(), names.end(), "gpt-tiny") == 1);
}

TEST_CASE("train --print-config prints a config that loads back", "[cli]") {
  auto result = run_genesis({"train", "--preset", "mlp", "--name", "first", "--set",
                             "training.max_steps=7", "--set", "name=second", "--output-dir",
                             "/tmp/elsewhere", "--print-config"},
                            kClean);
  REQUIRE(result.exit_code == 0);
  CHECK(result.err.empty());
  TempDir dir;
  Config printed = load_config("", dir.write("printed.toml", result.out), {});
  CHECK(printed.training.max_steps == 7);
  CHECK(printed.name == "second");  // --set applies after --name
  CHECK(printed.training.output_dir == "/tmp/elsewhere");
  CHECK(printed.model.hidden_sizes == load_config("mlp", "", {}).model.hidden_sizes);
  CHECK(config_to_toml(printed) == result.out);
}
