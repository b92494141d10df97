// The trainer as users rely on it: a run writes metrics.jsonl and summary.json with the documented
// fields, learns its task, is reproducible from its seed, and gradient accumulation over two
// half-batches reaches the same result as one full batch (same samples in the same order).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "genesis/core/config.hpp"
#include "genesis/train/trainer.hpp"
#include "support/cli_run.hpp"

using namespace genesis;
using nlohmann::json;

namespace {

Config small_mlp(const std::filesystem::path& out) {
  Config c = load_config("mlp", {}, {});
  c.name = "t";
  c.model.hidden_sizes = {32};
  c.model.input_size = 784;
  c.data.num_samples = 1200;
  c.training.max_steps = 40;
  c.training.logging_steps = 10;
  c.training.per_device_train_batch_size = 32;
  c.training.output_dir = out.string();
  return c;
}

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

}  // namespace

TEST_CASE("a run writes metrics and a summary and learns", "[train]") {
  testing::TempDir dir;
  Config c = small_mlp(dir.path());
  std::ostringstream out;
  train::TrainResult r = train::run_training(c, {.interactive = false, .out = &out});
  REQUIRE(out.str().find("genesis train: t") != std::string::npos);
  REQUIRE(out.str().find("32 per device x 1 process x 1 accumulation = 32 examples per step") !=
          std::string::npos);

  json s = read_json(dir.path() / "t" / "summary.json");
  for (const char* key : {"final_loss", "eval_loss", "eval_accuracy", "steps", "tokens_per_s",
                          "samples_per_s", "wall_s", "train_s", "peak_rss_mb", "num_parameters"})
    REQUIRE(s.contains(key));
  REQUIRE(s["steps"] == 40);
  REQUIRE(s["eval_accuracy"].get<double>() == Approx(r.eval_accuracy));
  REQUIRE(r.eval_accuracy > 0.3);  // 10 classes: chance is 0.1
  REQUIRE(s["peak_rss_mb"].get<double>() > 0);

  std::ifstream metrics(dir.path() / "t" / "metrics.jsonl");
  std::string line;
  std::vector<json> train_lines, eval_lines;
  while (std::getline(metrics, line)) {
    json j = json::parse(line);
    (j.contains("eval_loss") ? eval_lines : train_lines).push_back(j);
  }
  REQUIRE(train_lines.size() == 4);
  REQUIRE(eval_lines.size() == 1);
  REQUIRE(train_lines.back()["loss"].get<double>() < train_lines.front()["loss"].get<double>());
}

TEST_CASE("the same seed reproduces a run exactly, another seed does not", "[train]") {
  testing::TempDir dir;
  Config c = small_mlp(dir.path());
  c.training.max_steps = 15;
  auto a = train::run_training(c, {});
  c.name = "again";  // a run directory of its own: a fresh start refuses an earlier run's
  auto b = train::run_training(c, {});
  REQUIRE(a.final_loss == b.final_loss);
  REQUIRE(a.eval_loss == b.eval_loss);
  c.seed = 7;
  c.name = "other";
  auto other = train::run_training(c, {});
  REQUIRE(other.eval_loss != a.eval_loss);
}

TEST_CASE("gradient accumulation over micro-batches equals the full batch", "[train]") {
  testing::TempDir dir;
  Config full = small_mlp(dir.path());
  full.training.max_steps = 12;
  full.training.logging_steps = 12;
  full.training.per_device_train_batch_size = 32;
  Config accum = full;
  accum.name = "accum";
  accum.training.per_device_train_batch_size = 16;
  accum.training.gradient_accumulation_steps = 2;
  auto a = train::run_training(full, {});
  auto b = train::run_training(accum, {});
  REQUIRE(b.final_loss == Approx(a.final_loss).epsilon(1e-5));
  REQUIRE(b.eval_loss == Approx(a.eval_loss).epsilon(1e-5));
}

TEST_CASE("the gpt-tiny preset learns its token task", "[train]") {
  testing::TempDir dir;
  Config c = load_config("gpt-tiny", {}, {});
  c.training.output_dir = dir.path().string();
  c.training.max_steps = 60;
  c.training.eval_batches = 4;
  c.data.num_samples = 600;
  auto r = train::run_training(c, {});
  // Uniform guessing over 256 tokens costs log(256) = 5.55 nats.
  REQUIRE(r.eval_loss < 4.0);
  REQUIRE(r.tokens_per_s > 0);
}

TEST_CASE("genesis train runs end to end and logs plain lines off a terminal", "[train][cli]") {
  testing::TempDir dir;
  auto r = testing::run_genesis({"train", "--preset", "mlp", "-o", dir.path().string(), "--set",
                                 "training.max_steps=20", "--set", "training.logging_steps=10",
                                 "--set", "data.num_samples=800", "--set",
                                 "model.hidden_sizes=[16]"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.out.find("done: 20 steps") != std::string::npos);
  REQUIRE(r.err.find("step 10/20 loss") != std::string::npos);
  REQUIRE(r.err.find("\r") == std::string::npos);  // no progress bar off a terminal
  REQUIRE(std::filesystem::exists(dir.path() / "mlp" / "summary.json"));
}

TEST_CASE("genesis train on a terminal draws a bar from before the first step to the last",
          "[train][cli]") {
  // script(1) (util-linux, in every Debian) gives genesis a terminal; its typescript is what the
  // person at it would see.
  testing::TempDir dir;
  const std::string command = std::string("'") + GENESIS_TEST_BIN + "' train --preset mlp -o '" +
                              dir.path().string() + "' --set training.max_steps=20 --set "
                              "data.num_samples=800 --set model.hidden_sizes=[16]";
  auto r = testing::run_process(
      {"script", "-qec", command, (dir.path() / "typescript").string()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir.path() / "typescript");
  std::stringstream screen;
  screen << in.rdbuf();
  // The empty bar first (a large model's first step on the CPU can take a minute), then full.
  const auto empty = screen.str().find("[........................] 0/20 step 1 running");
  const auto full = screen.str().find("[########################] 20/20 loss");
  CHECK(empty != std::string::npos);
  CHECK(full != std::string::npos);
  CHECK(empty < full);
}

TEST_CASE("train as one rank of many without a launcher names what is missing", "[train][cli]") {
  testing::TempDir dir;
  testing::RunOptions options;
  options.env = {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", std::nullopt},
                 {"MASTER_PORT", std::nullopt}};
  auto r = testing::run_genesis({"train", "--preset", "mlp", "-o", dir.path().string()}, options);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.err.find("needs MASTER_ADDR and MASTER_PORT") != std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(dir.path() / "mlp"));
}
