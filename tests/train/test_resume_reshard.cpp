// Resuming on another number of ranks through `genesis ckpt reshard`: with the global batch kept
// (2 x 6 = 3 x 4 = 1 x 12), a checkpoint resharded to the new world size continues the same
// training curve. Only to 1e-5, not bit for bit: the ranks' partial sums now add up in another
// order.
#include <catch2/catch.hpp>

#include <cmath>

#include "resume_support.hpp"

namespace genesis::testing::resume {
namespace {

std::vector<std::string> run_of(int nproc, const fs::path& output_dir, const std::string& strategy,
                                const std::string& resume) {
  std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=" + std::to_string(12 / nproc),
                "training.max_steps=8", "training.logging_steps=1", "training.save_steps=4",
                "distributed.strategy=" + strategy});
  if (!resume.empty()) sets.push_back("training.resume_from_checkpoint=" + resume);
  std::vector<std::string> args = train_args(output_dir, "run", "mlp", sets);
  return nproc == 1 ? args : launched(nproc, args);
}

void genesis_ok(const std::vector<std::string>& args) {
  const CliResult r = run_genesis(args, quiet_env());
  INFO("genesis " << args.front() << " " << args.back() << ":\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

// Steps 5..8 of `resumed` log the losses and accuracies of the same steps of `original`.
void require_same_tail(const fs::path& original, const fs::path& resumed) {
  const auto a = deterministic_metrics(read_metrics(original), 4);
  const auto b = deterministic_metrics(read_metrics(resumed), 4);
  std::vector<json> a_train, b_train;
  for (const json& line : a) if (line.contains("loss")) a_train.push_back(line);
  for (const json& line : b) if (line.contains("loss")) b_train.push_back(line);
  REQUIRE(a_train.size() == 4);
  REQUIRE(b_train.size() == 4);
  for (std::size_t i = 0; i < a_train.size(); ++i) {
    CHECK(b_train[i]["step"] == a_train[i]["step"]);
    for (const char* key : {"loss", "accuracy", "lr"}) {
      const double x = a_train[i][key], y = b_train[i][key];
      INFO("step " << a_train[i]["step"] << " " << key << ": " << x << " vs " << y);
      CHECK(std::fabs(x - y) <= 1e-5 * std::max(1.0, std::fabs(x)));
    }
  }
}

}  // namespace

TEST_CASE("resume: a checkpoint resharded to another world size continues the same run",
          "[resume]") {
  TempDir dir;
  // 2 ranks (ZeRO-2) -> 3 ranks (ZeRO-1).
  genesis_ok(run_of(2, dir.path() / "a", "zero2", ""));
  const fs::path three = dir.path() / "a-step4-3ranks";
  genesis_ok({"ckpt", "reshard", checkpoint_of(dir.path() / "a" / "run", 4).string(), "--world-size",
              "3", "-o", three.string()});
  genesis_ok({"ckpt", "verify", three.string()});
  genesis_ok(run_of(3, dir.path() / "a3", "zero1", three.string()));
  require_same_tail(dir.path() / "a" / "run", dir.path() / "a3" / "run");

  // 3 ranks (ZeRO-3) -> 1 process.
  genesis_ok(run_of(3, dir.path() / "c", "zero3", ""));
  const fs::path one = dir.path() / "c-step4-1rank";
  genesis_ok({"ckpt", "reshard", checkpoint_of(dir.path() / "c" / "run", 4).string(), "--world-size",
              "1", "-o", one.string()});
  genesis_ok(run_of(1, dir.path() / "c1", "ddp", one.string()));
  require_same_tail(dir.path() / "c" / "run", dir.path() / "c1" / "run");
}

}  // namespace genesis::testing::resume
