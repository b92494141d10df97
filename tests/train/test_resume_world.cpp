// Resuming on another number of ranks without a manual reshard (the trainer half of elastic
// training): `genesis train` reshards the checkpoint itself, scales the gradient accumulation to
// keep the global batch, and must train exactly as a run resumed from an explicit `genesis ckpt
// reshard` with that accumulation. Refusals come before anything is written.
#include <catch2/catch.hpp>

#include "resume_support.hpp"

namespace genesis::testing::resume {
namespace {

constexpr int kPerDevice = 4;  // 4 ranks x 4 x accumulation 1: a global batch of 16

std::vector<std::string> run_of(int nproc, const fs::path& output_dir, int accumulation,
                                const std::string& resume, int per_device = kPerDevice) {
  std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=" + std::to_string(per_device),
                "training.gradient_accumulation_steps=" + std::to_string(accumulation),
                "training.max_steps=8", "training.logging_steps=2", "training.save_steps=4",
                "distributed.strategy=ddp"});
  if (!resume.empty()) sets.push_back("training.resume_from_checkpoint=" + resume);
  std::vector<std::string> args = train_args(output_dir, "run", "mlp", sets);
  return nproc == 1 ? args : launched(nproc, args);
}

CliResult genesis_ok(const std::vector<std::string>& args) {
  const CliResult r = run_genesis(args, quiet_env());
  INFO("genesis " << args.front() << " " << args.back() << ":\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// Directories a save or resume left in passing (.tmp-*) under a run's checkpoints.
std::vector<std::string> leftovers(const fs::path& run_dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(run_dir / "checkpoints"))
    if (entry.path().filename().string().rfind(".tmp-", 0) == 0)
      out.push_back(entry.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE("resume: a 4-rank checkpoint resumed on 2 ranks keeps the global batch", "[resume]") {
  TempDir dir;
  genesis_ok(run_of(4, dir.path() / "a", 1, ""));
  const fs::path step4 = checkpoint_of(dir.path() / "a" / "run", 4);
  const auto original = snapshot(step4);

  // A: the same command line on 2 ranks; the trainer reshards and doubles the accumulation.
  const CliResult a = genesis_ok(run_of(2, dir.path() / "a2", 1, step4.string()));
  const std::string said = a.out + a.err;
  CHECK_THAT(said, Catch::Contains("resuming a 4-rank checkpoint on 2 ranks: resharded"));
  CHECK_THAT(said, Catch::Contains(
                       "world 4 -> 2: gradient_accumulation_steps 1 -> 2 keeps the global batch of 16"));
  CHECK(snapshot(step4) == original);  // the original is only read
  CHECK(leftovers(dir.path() / "a2" / "run").empty());  // the resharded copy is gone
  const json summary_a = read_summary(dir.path() / "a2" / "run");
  CHECK(summary_a.at("world_size_changes") == json::parse(R"([{"step": 4, "from": 4, "to": 2}])"));
  CHECK(summary_a.at("effective_batch_size") == 16);

  // B: resharded by hand, resumed on 2 ranks with accumulation 2 as the user would say it.
  const fs::path manual = dir.path() / "step4-2ranks";
  genesis_ok({"ckpt", "reshard", step4.string(), "--world-size", "2", "-o", manual.string()});
  genesis_ok(run_of(2, dir.path() / "b", 2, manual.string()));

  // Same tensors from the same resharded state and the same example sequence: bit for bit.
  const auto files_a = rank_files(checkpoint_of(dir.path() / "a2" / "run", 8));
  const auto files_b = rank_files(checkpoint_of(dir.path() / "b" / "run", 8));
  REQUIRE(files_a.size() == 2);
  CHECK(files_a == files_b);
  const json summary_b = read_summary(dir.path() / "b" / "run");
  CHECK(summary_a.at("final_loss") == summary_b.at("final_loss"));
  CHECK(summary_a.at("eval_loss") == summary_b.at("eval_loss"));
  CHECK(deterministic_metrics(read_metrics(dir.path() / "a2" / "run"), 4) ==
        deterministic_metrics(read_metrics(dir.path() / "b" / "run"), 4));

  // A's step-8 checkpoint remembers the change: resumed again on 2 ranks by the same command
  // line (accumulation 1, as an elastic restart repeats it), it still trains with 2.
  const CliResult again = genesis_ok(
      run_of(2, dir.path() / "a3", 1, checkpoint_of(dir.path() / "a2" / "run", 8).string()));
  CHECK_THAT(again.out + again.err,
             Catch::Contains("gradient_accumulation_steps 1 -> 2 keeps the global batch of 16"));
  CHECK(read_summary(dir.path() / "a3" / "run").at("effective_batch_size") == 16);

  SECTION("a global batch the new world cannot split is refused, naming what would keep it") {
    const CliResult three = run_genesis(run_of(3, dir.path() / "r3", 1, step4.string()), quiet_env());
    CHECK(three.exit_code != 0);
    CHECK_THAT(three.out + three.err,
               Catch::Contains("cannot resume a 4-rank checkpoint on 3 ranks keeping its global "
                               "batch of 16: it does not split over 3 ranks; run on 1, 2, 4 ranks"));
    // One process of 3 examples cannot make 16: the settings that can are named.
    const CliResult one = run_genesis(run_of(1, dir.path() / "r1", 1, step4.string(), 3), quiet_env());
    CHECK(one.exit_code == 2);
    CHECK_THAT(one.err, Catch::Contains("per_device_train_batch_size 3 does not divide the 16 "
                                        "examples each rank needs a step"));
    CHECK_THAT(one.err, Catch::Contains("per_device_train_batch_size=4 with gradient_accumulation_steps=4"));
    CHECK(snapshot(step4) == original);
    for (const char* name : {"r3", "r1"})
      if (fs::exists(dir.path() / name / "run" / "checkpoints"))
        CHECK(leftovers(dir.path() / name / "run").empty());
  }
}

TEST_CASE("resume: a setting changed on another world size is named with the checkpoint given",
          "[resume]") {
  TempDir dir;
  genesis_ok(run_of(2, dir.path() / "a", 1, ""));
  const fs::path step4 = checkpoint_of(dir.path() / "a" / "run", 4);
  std::vector<std::string> args = run_of(1, dir.path() / "b", 2, step4.string());
  args.insert(args.end(), {"--set", "training.max_steps=10"});
  const CliResult r = genesis_ok(args);
  // Not the resharded copy's temporary name, which is gone by the time anyone reads the log.
  CHECK_THAT(r.err, Catch::Contains("resuming " + step4.lexically_normal().string() +
                                    " with a different config: training.max_steps 8 -> 10"));
}

}  // namespace genesis::testing::resume
