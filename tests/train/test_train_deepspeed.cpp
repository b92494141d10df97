// `genesis train --deepspeed ds_config.json` end to end on one rank: seed 002's zero1.json trains
// a few steps with the strategy, precision and optimizer it names, says what it set, and a file
// genesis refuses stops the command in one line before anything is written.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"

using namespace genesis;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(GENESIS_TEST_SOURCE_DIR) / "tests" / "data" / "deepspeed";

// The lines of `text` that hold `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  for (const std::string& line : testing::lines_of(text))
    if (line.find(needle) != std::string::npos) found.push_back(line);
  return found;
}

}  // namespace

TEST_CASE("train --deepspeed zero1.json runs with the file's strategy, fp16 and AdamW",
          "[deepspeed]") {
  testing::TempDir dir;
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "sft", "--deepspeed", (kData / "zero1.json").string(), "-o",
       dir.path().string(), "--set", "training.max_steps=4", "--set", "data.num_samples=2000",
       "--set", "training.eval_batches=1"},
      {{{"OMP_NUM_THREADS", "1"}, {"WORLD_SIZE", std::nullopt}}, {}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir.path() / "sft" / "summary.json");
  const json summary = json::parse(in);
  CHECK(summary["strategy"] == "zero1");
  CHECK(summary["mixed_precision"] == "fp16");
  CHECK(summary["steps"] == 4);
  // The banner names the optimizer, the schedule and the file; the log what the file set.
  CHECK(lines_with(r.out, "adamw lr 3e-05 (warmup_lr, 500 warmup steps)").size() == 1);
  CHECK(lines_with(r.out, "deepspeed  " + (kData / "zero1.json").string()).size() == 1);
  CHECK(
      lines_with(r.err, "sets distributed.strategy = \"zero1\" (zero_optimization.stage)").size() ==
      1);
  CHECK(lines_with(r.err, "sets training.per_device_train_batch_size = 4").size() == 1);
  CHECK(lines_with(r.err, "genesis does not act on: zero_optimization.allgather_bucket_size")
            .size() == 1);
}

TEST_CASE("train --deepspeed: a refused file is one line and writes nothing", "[deepspeed]") {
  testing::TempDir dir;
  const fs::path typo = dir.write("typo.json", R"({"zero_optimization": {"stagee": 2}})");
  const fs::path nvme = dir.write(
      "nvme.json", R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})");
  struct Case {
    fs::path file;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {typo, 2,
       "typo.json: unknown key 'zero_optimization.stagee' (did you mean "
       "'zero_optimization.stage'?)"},
      {nvme, 1, "nvme.json: zero_optimization.offload_param.device: \"nvme\" offload"},
  };
  for (const Case& c : cases) {
    const testing::CliResult r =
        testing::run_genesis({"train", "--preset", "sft", "--deepspeed", c.file.string(), "-o",
                              (dir.path() / "runs").string()});
    INFO(r.out << r.err);
    CHECK(r.exit_code == c.exit_code);
    const auto errors = lines_with(r.err, "error: ");
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains(c.message));
    CHECK_FALSE(fs::exists(dir.path() / "runs"));
  }
}

namespace {

// `genesis launch --nproc 2 train --preset sft --deepspeed FILE` for 30 steps, and `more` flags.
// The seed's files ask for train_batch_size 32 = 4 per GPU x 8 steps x 1 GPU; on 2 ranks the
// accumulation is given explicitly (it wins over the file), as DeepSpeed would need it too.
testing::CliResult run_seed_file(const fs::path& out, const std::string& file,
                                 const std::string& name, std::vector<std::string> more = {}) {
  std::vector<std::string> args{"launch", "--nproc", "2", "train", "--preset", "sft",
                                "--deepspeed", (kData / file).string(), "-o", out.string(),
                                "--name", name, "--set", "training.gradient_accumulation_steps=4",
                                "--set", "training.max_steps=30", "--set",
                                "training.save_steps=30", "--set", "training.eval_batches=1",
                                "--set", "data.num_samples=4000"};
  args.insert(args.end(), more.begin(), more.end());
  return testing::run_genesis(args, {{{"OMP_NUM_THREADS", "1"}}, {}});
}

// DeepSpeed's WarmupLR (log warmup) at optimizer update k: its scheduler steps after each update,
// from iteration -1 (the minimum lr), so update k runs at iteration k - 2.
double warmup_lr(std::int64_t k, double min_lr, double max_lr, double warmup_num_steps) {
  const double iteration = static_cast<double>(k - 2);
  if (iteration < 0) return min_lr;
  const double gamma =
      iteration < warmup_num_steps ? std::log(iteration + 1) / std::log(warmup_num_steps) : 1.0;
  return min_lr + (max_lr - min_lr) * gamma;
}

}  // namespace

TEST_CASE("seed 002's zero1, zero2 and zero3 files train on 2 ranks as they say", "[deepspeed]") {
  testing::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> files = {
      {"zero1.json", "zero1"}, {"zero2.json", "zero2"}, {"zero3.json", "zero3"}};
  for (const auto& [file, strategy] : files) {
    const testing::CliResult r = run_seed_file(dir.path(), file, strategy);
    INFO(file << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::ifstream in(dir.path() / strategy / "summary.json");
    const json summary = json::parse(in);
    CHECK(summary["strategy"] == strategy);
    CHECK(summary["mixed_precision"] == "fp16");
    CHECK(summary["loss_scale"]["final"].get<double>() > 0);  // dynamic: the scaler ran
    CHECK(summary["optimizer"] == "adamw");
    CHECK(summary["lr_scheduler"] == "warmup_lr");
    // Every logged learning rate is WarmupLR's (0 -> 3e-5 over 500 steps, log) at that step.
    std::ifstream metrics(dir.path() / strategy / "metrics.jsonl");
    int logged = 0;
    for (std::string line; std::getline(metrics, line);) {
      const json m = json::parse(line);
      if (!m.contains("lr")) continue;
      const std::int64_t step = m["step"];
      INFO("step " << step);
      CHECK(m["lr"].get<double>() == Approx(warmup_lr(step, 0.0, 3e-5, 500)).epsilon(1e-12));
      ++logged;
    }
    CHECK(logged == 3);  // steps_per_print 10: steps 10, 20, 30
  }
  // zero3.json offloads parameters and optimizer state: the same parameters as keeping them.
  const testing::CliResult kept =
      run_seed_file(dir.path(), "zero3.json", "zero3-on-device",
                    {"--set", "distributed.offload_param=none", "--set",
                     "distributed.offload_optimizer=none"});
  REQUIRE(kept.exit_code == 0);
  const testing::CliResult diff = testing::run_genesis(
      {"ckpt", "diff", "--all", (dir.path() / "zero3").string(),
       (dir.path() / "zero3-on-device").string()});
  INFO(diff.out << diff.err);
  CHECK(diff.exit_code == 0);
  CHECK(diff.out.find("identical") != std::string::npos);
}

TEST_CASE("train --print-config --deepspeed marks each setting the file made", "[deepspeed]") {
  const fs::path file = kData / "zero1.json";
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "sft", "--deepspeed", file.string(), "--print-config", "--set",
       "training.max_grad_norm=0.5"},
      {{{"WORLD_SIZE", std::nullopt}}, {}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto strategy = lines_with(r.out, "strategy = \"zero1\"");
  REQUIRE(strategy.size() == 1);
  CHECK_THAT(strategy[0], Catch::Contains("# from " + file.string() + ": zero_optimization.stage"));
  // --set wins over gradient_clipping, and the line says nothing of the file.
  const auto clip = lines_with(r.out, "max_grad_norm = 0.5");
  REQUIRE(clip.size() == 1);
  CHECK(clip[0].find("from ") == std::string::npos);
}
