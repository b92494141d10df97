// The config layer as the trainer and users rely on it: presets and files load, the printed
// config loads back to the same values, layers override in order, --set values are read as TOML,
// and every bad input is a ConfigError naming the file and line (or the --set), the key, and the
// closest valid key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>

#include "core/config_schema.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "support/scoped_env.hpp"
#include "support/setting_text.hpp"

using namespace genesis;
using genesis::testing::TempDir;

namespace {

// The message of the ConfigError `fn` throws; fails the test when it throws nothing or
// something else.
std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("expected a ConfigError");
  return "";
}

std::string error_for_file(const TempDir& dir, const std::string& text) {
  auto path = dir.write("bad.toml", text);
  return config_error([&] { load_config("", path, {}); });
}

std::string error_for_set(const std::vector<std::string>& sets) {
  return config_error([&] { load_config("", "", sets); });
}

using genesis::testing::ScopedEnv;

}  // namespace

TEST_CASE("the shipped presets load and name their runs", "[config]") {
  auto presets = list_presets();
  REQUIRE(std::find(presets.begin(), presets.end(), "mlp") != presets.end());
  REQUIRE(std::find(presets.begin(), presets.end(), "gpt-tiny") != presets.end());

  Config mlp = load_config("mlp", "", {});
  CHECK(mlp.name == "mlp");
  CHECK(mlp.model.kind == "mlp");
  CHECK(mlp.model.input_size == 784);
  CHECK(mlp.model.hidden_sizes == std::vector<std::int64_t>{512, 256});
  CHECK(mlp.model.num_classes == 10);
  CHECK(mlp.data.source == "synthetic:classification");

  Config gpt = load_config("gpt-tiny", "", {});
  CHECK(gpt.model.kind == "gpt");
  CHECK(gpt.model.n_layer == 2);
  CHECK(gpt.model.n_embd == 64);
  CHECK(gpt.data.source == "synthetic:tokens");
  CHECK(gpt.training.max_steps == 200);

  Config gpt2 = load_config("gpt2", "", {});  // the GPU benchmark's GPT-2 124M shape
  CHECK(gpt2.model.n_layer == 12);
  CHECK(gpt2.model.n_embd == 768);
  CHECK(gpt2.model.vocab_size == 50304);
  CHECK(gpt2.model.block_size == 1024);
  CHECK(gpt2.training.mixed_precision == "bf16");
}

TEST_CASE("config_to_toml loads back to the same config", "[config]") {
  TempDir dir;
  Config changed;  // a value off its default in every section and of every type
  changed.name = "round \"trip\"";
  changed.seed = 7;
  changed.model.kind = "gpt";
  changed.model.hidden_sizes = {};
  changed.model.n_head = 8;
  changed.model.n_embd = 128;
  changed.model.dropout = 0.1;
  changed.data.source = "synthetic:tokens";
  changed.data.eval_fraction = 0.2;
  changed.training.learning_rate = 3e-4;
  changed.training.adam_epsilon = 1e-12;
  changed.training.optimizer = OptimizerKind::sgd;
  changed.training.lr_scheduler_type = LrSchedulerKind::linear;
  changed.training.warmup_ratio = 1.0 / 3.0;
  changed.training.output_dir = "/tmp/some where";

  for (const Config& config : {Config{}, changed, load_config("mlp", "", {}),
                               load_config("gpt-tiny", "", {})}) {
    const std::string text = config_to_toml(config);
    Config loaded = load_config("", dir.write("printed.toml", text), {});
    CHECK(config_to_toml(loaded) == text);
  }
  Config loaded = load_config("", dir.write("changed.toml", config_to_toml(changed)), {});
  CHECK(loaded.name == changed.name);
  CHECK(loaded.training.warmup_ratio == changed.training.warmup_ratio);  // exact, not approx
  CHECK(loaded.training.adam_epsilon == changed.training.adam_epsilon);
  CHECK(loaded.model.hidden_sizes.empty());
}

TEST_CASE("config_to_toml prints every schema key once, with its help", "[config]") {
  const std::string text = config_to_toml(Config{});
  for (const auto& key : config_detail::config_schema()) {
    std::string leaf(key.name.substr(key.name.rfind('.') + 1));
    INFO(key.name);
    CHECK(text.find("\n" + leaf + " = ") != std::string::npos);
    CHECK(text.find("# " + std::string(key.help)) != std::string::npos);
    CHECK_FALSE(key.help.empty());
  }
}

TEST_CASE("layers apply in order: preset, file, then each --set", "[config]") {
  TempDir dir;
  auto file = dir.write("over.toml", "[training]\nmax_steps = 10\nlearning_rate = 0.5\n");
  Config c = load_config("mlp", file, {"training.max_steps=20", "training.max_steps=30"});
  CHECK(c.training.max_steps == 30);           // last --set wins
  CHECK(c.training.learning_rate == 0.5);      // file over preset
  CHECK(c.model.hidden_sizes.size() == 2);     // preset over defaults
  CHECK(c.name == "mlp");
}

TEST_CASE("override values are TOML, or bare strings", "[config]") {
  Config c = load_config("", "", {"model.hidden_sizes=[64,32]", "training.optimizer=sgd",
                                  "name=2024", "training.learning_rate=1", "seed = 9",
                                  "training.lr_scheduler_type=\"linear\"",
                                  "training.output_dir=/tmp/a b"});
  CHECK(c.model.hidden_sizes == std::vector<std::int64_t>{64, 32});
  CHECK(c.training.optimizer == "sgd");
  CHECK(c.name == "2024");  // a string key takes the text even when it looks like a number
  CHECK(c.training.learning_rate == 1.0);
  CHECK(c.seed == 9);
  CHECK(c.training.lr_scheduler_type == "linear");
  CHECK(c.training.output_dir == "/tmp/a b");
}

TEST_CASE("file errors name the file, the line, the key and the closest valid key", "[config]") {
  TempDir dir;
  const std::string bad = (dir.path() / "bad.toml").string();

  CHECK(error_for_file(dir, "name = \"x\"\n\n[training]\nlearnig_rate = 0.1\n") ==
        bad + ":4: unknown key 'training.learnig_rate' (did you mean 'training.learning_rate'?)");
  CHECK(error_for_file(dir, "[training]\nkind = \"gpt\"\n") ==
        bad + ":2: unknown key 'training.kind' (did you mean 'model.kind'?)");
  CHECK(error_for_file(dir, "learning_rate = 0.1\n") ==
        bad + ":1: unknown key 'learning_rate' (did you mean 'training.learning_rate'?)");
  CHECK(error_for_file(dir, "[trainig]\nmax_steps = 3\n") ==
        bad + ":1: unknown section [trainig] (did you mean 'training'?)");
  CHECK(error_for_file(dir, "[training]\nzzz = 1\n") == bad + ":2: unknown key 'training.zzz'");
  // The first error in the file is reported, not the first in key order.
  CHECK(error_for_file(dir, "[training]\nzz_late = 1\n[data]\naa_late = 2\n")
            .rfind(bad + ":2:", 0) == 0);
}

TEST_CASE("bad values name the key and the value", "[config]") {
  TempDir dir;
  const std::string bad = (dir.path() / "bad.toml").string();

  CHECK(error_for_file(dir, "[training]\n\nper_device_train_batch_size = -4\n") ==
        bad + ":3: training.per_device_train_batch_size must be a positive integer, got -4");
  CHECK(error_for_file(dir, "[training]\nmax_steps = \"10\"\n") ==
        bad + ":2: training.max_steps: expected an integer, got \"10\"");
  CHECK(error_for_file(dir, "[training]\nmax_steps = 1.5\n") ==
        bad + ":2: training.max_steps: expected an integer, got 1.5");
  CHECK(error_for_file(dir, "[training]\noptimizer = \"adamx\"\n") ==
        bad + ":2: training.optimizer must be one of adamw, adam, sgd; got \"adamx\" "
              "(did you mean 'adamw'?)");
  CHECK(error_for_file(dir, "[model]\ndropout = 1.0\n") ==
        bad + ":2: model.dropout must be in [0, 1), got 1.0");
  CHECK(error_for_file(dir, "[model]\nhidden_sizes = [64, 0]\n") ==
        bad + ":2: model.hidden_sizes entries must be positive integers, got 0");
  CHECK(error_for_file(dir, "[model]\nhidden_sizes = [64, \"a\"]\n") ==
        bad + ":2: model.hidden_sizes: expected a list of integers, got [64, \"a\"]");
  CHECK(error_for_file(dir, "seed = -1\n") == bad + ":1: seed must be a non-negative integer, got -1");
  CHECK(error_for_file(dir, "name = \"a/b\"\n") ==
        bad + ":1: name must be a single directory name, got \"a/b\"");
  CHECK(error_for_file(dir, "[training]\nlearning_rate = nan\n") ==
        bad + ":2: training.learning_rate must be a finite number, got nan");
  CHECK(error_for_file(dir, "[model]\nkind = { a = 1 }\n") ==
        bad + ":2: model.kind: expected a string, got a table");
  CHECK(error_for_file(dir, "[training]\nmixed_precision = \"fp8\"\n").find(
            bad + ":2: training.mixed_precision must be one of no, fp16, bf16") == 0);
}

TEST_CASE("cross-key checks name where the key was set", "[config]") {
  TempDir dir;
  const std::string bad = (dir.path() / "bad.toml").string();
  CHECK(error_for_file(dir, "[model]\nkind = \"gpt\"\nn_head = 4\nn_embd = 66\n"
                            "[data]\nsource = \"synthetic:tokens\"\n") ==
        bad + ":4: model.n_embd must be divisible by model.n_head, got n_embd = 66, n_head = 4");
  CHECK(error_for_file(dir, "[data]\nsource = \"synthetic:tokens\"\n") ==
        bad + ":2: data.source = \"synthetic:tokens\" does not fit model.kind = \"mlp\" "
              "(use \"synthetic:classification\")");
  // A later layer may repair what an earlier one set.
  auto file = dir.write("gpt.toml", "[model]\nn_embd = 66\n");
  CHECK(load_config("gpt-tiny", file, {"model.n_embd=68"}).model.n_embd == 68);
}

TEST_CASE("override errors say which --set", "[config]") {
  CHECK(error_for_set({"training.max_steps=abc"}) ==
        "--set training.max_steps: expected an integer, got \"abc\"");
  CHECK(error_for_set({"foo"}) == "--set 'foo' has no '=': use --set section.key=value");
  CHECK(error_for_set({"=3"}) == "--set '=3' has no key: use --set section.key=value");
  CHECK(error_for_set({"training.learnig_rate=1e-3"}) ==
        "--set: unknown key 'training.learnig_rate' (did you mean 'training.learning_rate'?)");
  CHECK(error_for_set({"training.per_device_train_batch_size=-4"}) ==
        "--set training.per_device_train_batch_size must be a positive integer, got -4");
  CHECK(error_for_set({"model.hidden_sizes=64,32"}) ==
        "--set model.hidden_sizes: expected a list of integers, got \"64,32\"");
  CHECK(error_for_set({"training.mixed_precision=bf16", "training.gradient_checkpointing=true"}) ==
        "--set training.gradient_checkpointing recomputes transformer blocks and needs model.kind = "
        "\"gpt\" or \"hf\", got \"mlp\"");
  CHECK(error_for_set({"model.kind=gpt", "data.source=synthetic:tokens", "model.n_head=3"}) ==
        "--set model.n_embd must be divisible by model.n_head, got n_embd = 256, n_head = 3");
}

TEST_CASE("malformed TOML and missing files are config errors with a location", "[config]") {
  TempDir dir;
  const std::string bad = (dir.path() / "bad.toml").string();
  std::string msg = error_for_file(dir, "name = \"x\"\n[training\nmax_steps = 3\n");
  CHECK(msg.rfind(bad + ":2:", 0) == 0);
  CHECK(msg.find("malformed TOML") != std::string::npos);

  const std::string missing = (dir.path() / "missing.toml").string();
  CHECK(config_error([&] { load_config("", missing, {}); }) ==
        "config file '" + missing + "' not found");
  CHECK(config_error([&] { load_config("", dir.path(), {}); }) ==
        "config file '" + dir.path().string() + "' is a directory");
}

TEST_CASE("unknown presets list the available ones", "[config]") {
  std::string msg = config_error([] { load_config("nope", "", {}); });
  CHECK(msg.rfind("unknown preset 'nope' (available: ", 0) == 0);
  CHECK(msg.find("gpt-tiny") != std::string::npos);
  CHECK(msg.find("mlp") != std::string::npos);
  CHECK(config_error([] { find_preset("mpl"); }).rfind("unknown preset 'mpl' (did you mean 'mlp'?", 0) == 0);
  CHECK(config_error([] { find_preset("presets/mlp.toml"); }) ==
        "--preset takes a preset name, got 'presets/mlp.toml': use --config presets/mlp.toml for a file");
}

TEST_CASE("GENESIS_PRESET_PATH comes before the installed presets", "[config]") {
  TempDir dir;
  dir.write("mlp.toml", "name = \"shadowed\"\n");
  dir.write("custom.toml", "name = \"custom\"\n");
  ScopedEnv env("GENESIS_PRESET_PATH", "/nonexistent:" + dir.path().string());
  CHECK(preset_dirs().front() == "/nonexistent");
  CHECK(preset_dirs().at(1) == dir.path());
  auto presets = list_presets();
  CHECK(std::count(presets.begin(), presets.end(), "mlp") == 1);
  CHECK(std::count(presets.begin(), presets.end(), "custom") == 1);
  CHECK(std::is_sorted(presets.begin(), presets.end()));
  CHECK(load_config("mlp", "", {}).name == "shadowed");
  CHECK(load_config("custom", "", {}).name == "custom");
}

TEST_CASE("suggestions only for likely typos", "[config]") {
  using config_detail::closest_match;
  const auto keys = config_detail::key_names();
  CHECK(closest_match("training.max_step", keys) == std::optional<std::string>("training.max_steps"));
  CHECK(closest_match("model.n_embed", keys) == std::optional<std::string>("model.n_embd"));
  CHECK(closest_match("model.max_steps", keys) == std::optional<std::string>("training.max_steps"));
  CHECK_FALSE(closest_match("completely.unrelated", keys).has_value());
}

TEST_CASE("train_batch_size keeps the global batch whatever the number of ranks", "[config]") {
  const auto batch = [](const Config& c) {
    return std::pair{c.training.per_device_train_batch_size, c.training.gradient_accumulation_steps};
  };
  using Pair = std::pair<std::int64_t, std::int64_t>;
  // The sft preset: 64 a step, micro-batches of at most 32.
  CHECK(batch(load_config("sft", "", {})) == Pair{32, 2});
  {
    ScopedEnv world("WORLD_SIZE", "2");
    CHECK(batch(load_config("sft", "", {})) == Pair{32, 1});
  }
  {
    ScopedEnv world("WORLD_SIZE", "4");
    CHECK(batch(load_config("sft", "", {})) == Pair{16, 1});
  }
  {
    ScopedEnv world("WORLD_SIZE", "3");
    CHECK(config_error([] { load_config("sft", "", {}); }) ==
          "training.train_batch_size 64 does not split over 3 ranks: set a multiple of 3, "
          "e.g. --set training.train_batch_size=63 or 66");
  }
  {
    ScopedEnv world("WORLD_SIZE", "128");  // more ranks than examples: the one multiple above
    CHECK(config_error([] { load_config("sft", "", {}); }).ends_with(
        "set a multiple of 128, e.g. --set training.train_batch_size=128"));
  }
  // The micro-batch is the largest divisor of the share up to the cap: 30 = 6 x 5.
  CHECK(batch(load_config("", "", {"training.train_batch_size=30",
                                    "training.per_device_train_batch_size=8"})) == Pair{6, 5});
  // The user's accumulation is kept and sets the micro-batch; one that does not split is an error.
  CHECK(batch(load_config("sft", "", {"training.train_batch_size=64",
                                       "training.gradient_accumulation_steps=4"})) == Pair{16, 4});
  CHECK(config_error([] {
          load_config("sft", "", {"training.train_batch_size=64",
                                  "training.gradient_accumulation_steps=3"});
        }) == "training.train_batch_size 64 over 1 ranks is 64 examples per rank, which "
              "training.gradient_accumulation_steps 3 does not split (64 / 3 is not whole)");
  // The preset's global batch yields to a micro-batch or accumulation the user sets.
  const Config own = load_config("sft", "", {"training.per_device_train_batch_size=8"});
  CHECK(batch(own) == Pair{8, 1});
  CHECK(own.training.train_batch_size == 0);
  CHECK(batch(load_config("sft", "", {"training.gradient_accumulation_steps=3"})) == Pair{32, 3});
}
