// `genesis ckpt` on checkpoints a real `genesis train` run saved: a 2-rank ZeRO-2 GPT run is
// listed, verified and exported, and its step-6 checkpoint, resharded to one rank, resumes to the
// same final and eval loss as the run that never stopped; the resume accepts the rewritten
// config without warnings.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_genesis;

json summary_of(const fs::path& run) {
  std::ifstream in(run / "summary.json");
  return json::parse(in);
}

TEST_CASE("a training run's checkpoint, resharded 2 -> 1, resumes to the uninterrupted result", "[ckpt-cli]") {
  testing::TempDir tmp;
  const std::string runs = (tmp.path() / "runs").string();
  const std::vector<std::string> common = {"--preset", "gpt-tiny", "--output-dir", runs,
                                           "--set", "training.max_steps=8", "--set", "training.eval_batches=2"};
  std::vector<std::string> first = {"launch", "--nproc", "2", "train", "--name", "full",
                                    "--set", "training.save_steps=3", "--set", "distributed.strategy=zero2"};
  first.insert(first.end(), common.begin(), common.end());
  const auto trained = run_genesis(first);
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  const fs::path run = tmp.path() / "runs" / "full";

  const auto ls = run_genesis({"ckpt", "ls", run.string(), "--json"});
  REQUIRE(ls.exit_code == 0);
  const json listing = json::parse(ls.out);
  REQUIRE(listing["checkpoints"].size() == 3);  // steps 3, 6 and the final 8
  CHECK(listing["latest"] == "step-8");
  CHECK(listing["checkpoints"][1]["world_size"] == 2);
  CHECK(listing["checkpoints"][1]["strategy"] == "zero2");
  CHECK(run_genesis({"ckpt", "verify", run.string()}).exit_code == 0);
  const auto exported = run_genesis({"ckpt", "export", run.string(), "-o", (tmp.path() / "hf" / "model.safetensors").string()});
  CHECK(exported.exit_code == 0);
  CHECK(fs::exists(tmp.path() / "hf" / "config.json"));

  const fs::path one = tmp.path() / "step-6-one-rank";
  const auto resharded = run_genesis({"ckpt", "reshard", (run / "checkpoints" / "step-6").string(),
                                      "--world-size", "1", "--strategy", "ddp", "-o", one.string()});
  INFO(resharded.out << resharded.err);
  REQUIRE(resharded.exit_code == 0);
  // The global batch of gpt-tiny (16 x 2 ranks) kept on one rank: 16 x 2 accumulation steps.
  CHECK(resharded.out.find("per_device_train_batch_size 16 x 1 rank x gradient_accumulation_steps 2") !=
        std::string::npos);

  std::vector<std::string> resume = {"train", "--name", "resumed", "--resume", one.string(),
                                     "--set", "training.gradient_accumulation_steps=2"};
  resume.insert(resume.end(), common.begin(), common.end());
  const auto resumed = run_genesis(resume);
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find("different config") == std::string::npos);
  const json a = summary_of(run), b = summary_of(tmp.path() / "runs" / "resumed");
  CHECK(b["world_size"] == 1);
  // Same global batches in the same order; only the order of float sums differs.
  CHECK(b["final_loss"].get<double>() == Approx(a["final_loss"].get<double>()).epsilon(1e-5));
  CHECK(b["eval_loss"].get<double>() == Approx(a["eval_loss"].get<double>()).epsilon(1e-5));
}

}  // namespace
}  // namespace genesis
