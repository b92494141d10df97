// `genesis train` resumes bit for bit: a run stopped after step k and resumed finishes with the
// same step-N rank files, logged metrics and summary as the run that never stopped, for DDP and
// every ZeRO stage on 2 ranks and for one process resuming "auto" in place; saves written in the
// background hold the bytes synchronous ones do. Damaged and wrong
// checkpoints are refused with one line and leave every file as it was, "auto" included when
// every checkpoint is damaged; leftovers of an interrupted delete are never resumed from. Crash
// and restart tests are in test_resume_crash.cpp.
#include <catch2/catch.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "resume_support.hpp"

namespace genesis::testing::resume {
namespace {

CliResult genesis_ok(const std::vector<std::string>& args) {
  CliResult r = run_genesis(args, quiet_env());
  INFO("genesis " << args.front() << ":\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// B's step-N checkpoint, metrics after step k and summary equal A's exactly.
void require_same_finish(const fs::path& a, const fs::path& b, std::int64_t k, std::int64_t n) {
  const auto files_a = rank_files(checkpoint_of(a, n)), files_b = rank_files(checkpoint_of(b, n));
  REQUIRE(!files_a.empty());
  REQUIRE(files_a.size() == files_b.size());
  for (const auto& [name, bytes] : files_a) {
    INFO(name);
    REQUIRE(files_b.count(name) == 1);
    CHECK(files_b.at(name) == bytes);
  }
  const auto metrics_a = deterministic_metrics(read_metrics(a), k);
  const auto metrics_b = deterministic_metrics(read_metrics(b), k);
  REQUIRE(!metrics_a.empty());
  REQUIRE(metrics_a.size() == metrics_b.size());
  for (std::size_t i = 0; i < metrics_a.size(); ++i) {
    INFO("metrics line " << i);
    CHECK(metrics_b[i].dump() == metrics_a[i].dump());
  }
  const json summary_a = read_summary(a), summary_b = read_summary(b);
  for (const char* key : {"final_loss", "eval_loss", "eval_accuracy", "steps"}) {
    INFO(key);
    CHECK(summary_b.at(key) == summary_a.at(key));
  }
  for (const char* key : {"eval_exact_match", "loss_scale"}) {
    INFO(key);
    CHECK(summary_a.contains(key) == summary_b.contains(key));
    if (summary_a.contains(key)) CHECK(summary_b.at(key) == summary_a.at(key));
  }
}

struct Case {
  std::string strategy;
  std::string preset;
  std::vector<std::string> sets;
  std::int64_t k, n;
};

}  // namespace

TEST_CASE("resume: 2 ranks resumed from step k finish exactly as the run that never stopped",
          "[resume]") {
  const std::vector<Case> cases = {
      // GPT with dropout; save_steps 3 falls inside a logging window of 2.
      {"ddp", "gpt-tiny",
       tiny_gpt({"training.per_device_train_batch_size=4", "training.max_steps=7",
                 "training.logging_steps=2", "training.save_steps=3", "training.eval_steps=4"}),
       3, 7},
      // Accumulation 2; 135 training examples make an epoch of 4 steps, so step 4 ends one.
      {"zero1", "mlp",
       tiny_mlp({"data.num_samples=150", "training.per_device_train_batch_size=8",
                 "training.gradient_accumulation_steps=2",
                 "training.max_steps=8", "training.logging_steps=1", "training.save_steps=4"}),
       4, 8},
      {"zero2", "mlp",
       tiny_mlp({"training.per_device_train_batch_size=8", "training.max_steps=8",
                 "training.logging_steps=2", "training.save_steps=5", "training.eval_steps=2"}),
       5, 8},
      {"zero3", "mlp",
       tiny_mlp({"training.per_device_train_batch_size=8", "training.max_steps=9",
                 "training.logging_steps=3", "training.save_steps=3", "training.eval_steps=3",
                 "training.max_grad_norm=0.05"}),  // clipping active
       3, 9},
      // fp16 on SFT data: a scale of 2^24 overflows, so steps are skipped and the scale halves
      // and grows again on both sides of step 6; the resumed run must carry the scaler's state.
      {"zero2", "sft",
       {"data.source=tasks:first,last", "data.num_samples=400", "model.n_embd=32",
        "training.per_device_train_batch_size=8", "training.max_steps=12",
        "training.logging_steps=2", "training.save_steps=6", "training.eval_steps=6",
        "training.eval_batches=1", "training.mixed_precision=fp16",
        "loss_scale.initial_scale_power=24", "loss_scale.hysteresis=1",
        "loss_scale.loss_scale_window=2"},
       6, 12},
  };
  TempDir dir;
  for (const Case& c : cases) {
    const std::string tag = c.strategy + "-" + c.preset;
    INFO(tag);
    std::vector<std::string> sets = c.sets;
    sets.push_back("distributed.strategy=" + c.strategy);
    sets.push_back("distributed.bucket_cap_mb=0.01");  // several buckets
    const fs::path out_a = dir.path() / ("a-" + tag), out_b = dir.path() / ("b-" + tag);
    const CliResult a = genesis_ok(launched(2, train_args(out_a, tag, c.preset, sets)));
    const fs::path run_a = out_a / tag, run_b = out_b / tag;
    if (c.preset == "sft") {  // the skips this case is about did happen
      CHECK(a.err.find("step skipped") != std::string::npos);
      CHECK(read_summary(run_a)["loss_scale"]["skipped_steps"].get<int>() >= 2);
    }

    // B starts from a copy (A's own directory stays A's), in a run directory of its own.
    const fs::path copy = dir.path() / ("copy-" + tag);
    fs::copy(checkpoint_of(run_a, c.k), copy, fs::copy_options::recursive);
    const auto before = snapshot(copy);
    sets.push_back("training.resume_from_checkpoint=" + copy.string());
    const CliResult b = genesis_ok(launched(2, train_args(out_b, tag, c.preset, sets)));
    CHECK(b.out.find("resumed    from " + copy.string() + " (step " + std::to_string(c.k) + ")") !=
          std::string::npos);
    CHECK(b.err.find("different config") == std::string::npos);
    require_same_finish(run_a, run_b, c.k, c.n);
    CHECK(snapshot(copy) == before);
  }
}

TEST_CASE("resume: saves written in the background hold the bytes synchronous saves hold",
          "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_gpt({"training.per_device_train_batch_size=4", "training.max_steps=6",
                "training.logging_steps=1", "training.save_steps=2"});
  std::map<std::string, CliResult> runs;
  for (const std::string mode : {"true", "false"}) {
    std::vector<std::string> with = sets;
    with.push_back("training.save_async=" + mode);
    runs[mode] = genesis_ok(launched(2, train_args(dir.path() / mode, "run", "gpt-tiny", with)));
  }
  for (std::int64_t step : {2, 4, 6}) {
    INFO("step " << step);
    const auto sync = rank_files(checkpoint_of(dir.path() / "false" / "run", step));
    const auto async = rank_files(checkpoint_of(dir.path() / "true" / "run", step));
    REQUIRE(sync.size() == 2);
    CHECK(async == sync);
  }
  // The saves of steps 2 and 4 went to the background; the last one is written at once.
  CHECK(runs["true"].err.find("saved checkpoint " + (dir.path() / "true" / "run" / "checkpoints" /
                                                    "step-2").string() + " in ") != std::string::npos);
  CHECK(runs["true"].err.find("training blocked") != std::string::npos);
  CHECK(runs["false"].err.find("training blocked") == std::string::npos);
  for (const std::string mode : {"true", "false"}) {
    INFO(mode);
    const json summary = read_summary(dir.path() / mode / "run");
    CHECK(summary.at("checkpoint_saves") == 3);
    CHECK(summary.at("checkpoint_blocked_s").get<double>() > 0);
    // Each logged step after the first save says what saves blocked so far, never less.
    double before = 0;
    std::int64_t logged = 0;
    for (const json& line : read_metrics(dir.path() / mode / "run")) {
      if (!line.contains("loss") || line.at("step").get<std::int64_t>() <= 2) continue;
      const double blocked = line.at("checkpoint_blocked_s").get<double>();
      CHECK(blocked >= before);
      before = blocked;
      ++logged;
    }
    CHECK(logged == 4);
  }
}

TEST_CASE("resume: one process stopped after step k resumes \"auto\" in its own run directory",
          "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_mlp({"data.num_samples=120", "training.per_device_train_batch_size=16",
                "training.max_steps=8", "training.logging_steps=1", "training.save_steps=3",
                "training.eval_steps=3"});  // 108 training examples: the second epoch starts at step 7
  const fs::path out_a = dir.path() / "a";
  genesis_ok(train_args(out_a, "run", "mlp", sets));
  const fs::path run_a = out_a / "run";
  const auto lines_a = read_metrics(run_a);

  // What a run killed during step 5 leaves: checkpoints 3 and 6 do not both exist yet, latest
  // names step-3, and metrics.jsonl already has steps 4 and 5, which the resumed run logs again.
  const fs::path out_b = dir.path() / "b", run_b = out_b / "run";
  fs::copy(out_a, out_b, fs::copy_options::recursive);
  fs::remove_all(checkpoint_of(run_b, 6));
  fs::remove_all(checkpoint_of(run_b, 8));
  fs::remove(run_b / "summary.json");
  write_text(run_b / "checkpoints" / "latest", "step-3\n");
  {
    std::vector<std::string> partial;
    for (const json& line : lines_a)
      if (line["step"].get<int>() <= 5) partial.push_back(line.dump());
    std::string text;
    for (const auto& line : partial) text += line + "\n";
    write_text(run_b / "metrics.jsonl", text);
  }
  std::vector<std::string> resume = sets;
  resume.push_back("training.resume_from_checkpoint=auto");
  const CliResult b = genesis_ok(train_args(out_b, "run", "mlp", resume));
  CHECK(b.out.find("(step 3)") != std::string::npos);
  require_same_finish(run_a, run_b, 3, 8);

  // The whole metrics.jsonl, steps 1..8, once each: the kept head plus the resumed tail.
  const auto all_a = deterministic_metrics(lines_a), all_b = deterministic_metrics(read_metrics(run_b));
  REQUIRE(all_b.size() == all_a.size());
  for (std::size_t i = 0; i < all_a.size(); ++i) CHECK(all_b[i].dump() == all_a[i].dump());
  CHECK(fs::exists(checkpoint_of(run_b, 6)));
  CHECK(read_bytes(run_b / "checkpoints" / "latest") == "step-8\n");

  // "auto" on the finished run trains nothing more and logs nothing twice.
  const auto finished = snapshot(run_b / "checkpoints");
  const CliResult again = genesis_ok(train_args(out_b, "run", "mlp", resume));
  CHECK(again.out.find("(step 8)") != std::string::npos);
  const auto all_again = deterministic_metrics(read_metrics(run_b));
  REQUIRE(all_again.size() == all_a.size());
  for (std::size_t i = 0; i < all_a.size(); ++i) CHECK(all_again[i].dump() == all_a[i].dump());
  CHECK(snapshot(run_b / "checkpoints") == finished);
  CHECK(read_summary(run_b)["eval_loss"] == read_summary(run_a)["eval_loss"]);
}

TEST_CASE("resume: a damaged latest checkpoint", "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=16", "training.max_steps=8",
                "training.logging_steps=2", "training.save_steps=3"});
  const fs::path out_a = dir.path() / "a", run_a = out_a / "run";
  genesis_ok(train_args(out_a, "run", "mlp", sets));

  // A run stopped after step 6 whose step-6 rank file then lost a bit.
  const fs::path out_b = dir.path() / "b", run_b = out_b / "run";
  fs::copy(out_a, out_b, fs::copy_options::recursive);
  fs::remove_all(checkpoint_of(run_b, 8));
  write_text(run_b / "checkpoints" / "latest", "step-6\n");
  const fs::path damaged = checkpoint_of(run_b, 6) / "rank-00000.safetensors";
  REQUIRE(fs::exists(damaged));
  flip_byte(damaged);

  SECTION("named explicitly, it is refused and nothing in the run directory changes") {
    const auto before = snapshot(out_b);
    std::vector<std::string> args = sets;
    args.push_back("training.resume_from_checkpoint=" + checkpoint_of(run_b, 6).string());
    const CliResult r = run_genesis(train_args(out_b, "run", "mlp", args), quiet_env());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    const auto lines = nonblank_lines(r.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("genesis: error: ", 0) == 0);
    CHECK(lines[0].find(damaged.string()) != std::string::npos);
    CHECK(snapshot(out_b) == before);
  }
  SECTION("under \"auto\", the run warns and resumes from the checkpoint before it") {
    std::vector<std::string> args = sets;
    args.push_back("training.resume_from_checkpoint=auto");
    const CliResult r = genesis_ok(train_args(out_b, "run", "mlp", args));
    CHECK(r.err.find(damaged.string()) != std::string::npos);
    CHECK(r.out.find("resumed    from " + checkpoint_of(run_b, 3).string() + " (step 3)") !=
          std::string::npos);
    require_same_finish(run_a, run_b, 3, 8);
    CHECK(fs::exists(checkpoint_of(run_b, 6) / "manifest.json"));  // saved again, undamaged
  }
}

TEST_CASE("resume: \"auto\" refuses to start over when every checkpoint is damaged", "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=16", "training.max_steps=8",
                "training.logging_steps=2", "training.save_steps=3"});
  const fs::path out = dir.path() / "out", run = out / "run";
  genesis_ok(train_args(out, "run", "mlp", sets));
  std::vector<fs::path> damaged;
  for (std::int64_t step : {3, 6, 8}) {
    damaged.push_back(checkpoint_of(run, step) / "rank-00000.safetensors");
    flip_byte(damaged.back());
  }
  // What the run has to show for itself: its checkpoints and its logged metrics.
  auto progress = [&] { return std::pair{snapshot(run / "checkpoints"), read_bytes(run / "metrics.jsonl")}; };
  const auto before = progress();

  // One error line, exit 1, naming every damaged file and the flag that starts over.
  auto check_refused = [&](const CliResult& r) {
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    std::vector<std::string> errors;
    for (const std::string& line : nonblank_lines(r.err))
      if (line.rfind("genesis: error: ", 0) == 0) errors.push_back(line);
    REQUIRE(errors.size() == 1);
    for (const fs::path& file : damaged) CHECK(errors[0].find(file.string()) != std::string::npos);
    CHECK(errors[0].find("fails its checksum") != std::string::npos);
    CHECK(errors[0].find("step 0") != std::string::npos);
    CHECK(errors[0].find("--overwrite") != std::string::npos);
    CHECK(progress() == before);
  };
  std::vector<std::string> resume = sets;
  resume.push_back("training.resume_from_checkpoint=auto");
  SECTION("under \"auto\"") {
    const CliResult r = run_genesis(train_args(out, "run", "mlp", resume), quiet_env());
    check_refused(r);
    CHECK(nonblank_lines(r.err).size() == 1);
  }
  SECTION("in an attempt genesis launch restarted, even with --overwrite on its command line") {
    RunOptions restarted = quiet_env();
    for (auto& [name, value] : restarted.env)
      if (name == "GENESIS_RESTART_COUNT" || name == "GENESIS_ATTEMPT") value = "1";  // as launch sets them
    std::vector<std::string> args = train_args(out, "run", "mlp", sets);
    args.push_back("--overwrite");
    const CliResult r = run_genesis(args, restarted);
    check_refused(r);
    CHECK(r.err.find("restarted by genesis launch") != std::string::npos);
  }
  SECTION("under genesis launch --max-restarts, every attempt refuses") {
    std::vector<std::string> args = train_args(out, "run", "mlp", resume);
    args.insert(args.begin(), {"launch", "--nproc", "1", "--max-restarts", "1"});
    const CliResult r = run_genesis(args, quiet_env());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("restarting all 1 local ranks (restart 1 of 1)") != std::string::npos);
    CHECK(r.err.find("genesis: error: restarted by genesis launch: no checkpoint in") != std::string::npos);
    CHECK(progress() == before);
  }
  SECTION("--overwrite starts over on purpose, deleting them") {
    std::vector<std::string> args = train_args(out, "run", "mlp", resume);
    args.push_back("--overwrite");
    const CliResult r = genesis_ok(args);
    CHECK(r.err.find("--overwrite: no checkpoint of " + (run / "checkpoints").string()) != std::string::npos);
    CHECK(r.out.find("resumed    from") == std::string::npos);
    for (std::int64_t step : {3, 6, 8}) CHECK_NOTHROW(ckpt::Checkpoint(checkpoint_of(run, step)).verify());
  }
  SECTION("with no checkpoint at all, \"auto\" still starts fresh") {
    fs::remove_all(run / "checkpoints");
    const CliResult r = genesis_ok(train_args(out, "run", "mlp", resume));
    CHECK(r.out.find("resumed    from") == std::string::npos);
    CHECK(ckpt::list_checkpoints(run / "checkpoints").size() == 3);
  }
}

TEST_CASE("resume: leftovers of an interrupted delete are listed, never resumed from, then removed",
          "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=16", "training.max_steps=8",
                "training.logging_steps=2", "training.save_steps=3"});
  const fs::path out_a = dir.path() / "a", run_a = out_a / "run";
  genesis_ok(train_args(out_a, "run", "mlp", sets));

  // A run stopped after step 6 whose `latest` (step-6) lost a bit, so "auto" looks past it. Beside
  // it, what a kill while pruning leaves: step-7 deleted in place up to its manifest (an older
  // genesis), and .del-step-9, renamed for deletion with its manifest still there and loadable.
  const fs::path out_b = dir.path() / "b", run_b = out_b / "run", root = run_b / "checkpoints";
  fs::copy(out_a, out_b, fs::copy_options::recursive);
  fs::copy(checkpoint_of(run_b, 8), root / ".del-step-9", fs::copy_options::recursive);
  fs::rename(checkpoint_of(run_b, 8), root / "step-7");
  fs::remove(root / "step-7" / "manifest.json");
  write_text(root / "latest", "step-6\n");
  flip_byte(checkpoint_of(run_b, 6) / "rank-00000.safetensors");

  const CliResult ls = genesis_ok({"ckpt", "ls", run_b.string()});
  CHECK(ls.out.find("incomplete: no manifest (an interrupted save or delete)") != std::string::npos);
  CHECK(ls.out.find("ignored: .del-step-9 (an interrupted delete") != std::string::npos);

  std::vector<std::string> resume = sets;
  resume.push_back("training.resume_from_checkpoint=auto");
  const CliResult r = genesis_ok(train_args(out_b, "run", "mlp", resume));
  CHECK(r.out.find("resumed    from " + checkpoint_of(run_b, 3).string() + " (step 3)") != std::string::npos);
  require_same_finish(run_a, run_b, 3, 8);
  // The resumed run's saves removed both leftovers.
  CHECK_FALSE(fs::exists(root / "step-7"));
  CHECK_FALSE(fs::exists(root / ".del-step-9"));
  CHECK(ckpt::list_leftovers(root).empty());
  CHECK(genesis_ok({"ckpt", "ls", run_b.string()}).out.find("incomplete") == std::string::npos);
}

TEST_CASE("resume: a wrong checkpoint is refused in one line and left as it was", "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=8", "training.max_steps=4",
                "training.logging_steps=2", "training.save_steps=2"});
  const fs::path out_a = dir.path() / "a", run_a = out_a / "run";
  genesis_ok(launched(2, train_args(out_a, "run", "mlp", sets)));
  const fs::path source = checkpoint_of(run_a, 2);
  const auto before = snapshot(out_a);

  auto refused = [&](int nproc, const fs::path& checkpoint, int code, const std::string& needle) {
    std::vector<std::string> args = sets;
    args.push_back("training.resume_from_checkpoint=" + checkpoint.string());
    std::vector<std::string> command = train_args(dir.path() / "b", "run", "mlp", args);
    if (nproc > 1) command = launched(nproc, command);
    const CliResult r = run_genesis(command, quiet_env());
    INFO("nproc " << nproc << ", " << checkpoint.string() << ":\n" << r.out << r.err);
    CHECK(r.exit_code == code);
    // One process: exactly one line. Under the launcher every rank reports the same one line
    // (prefixed with its rank) and the launcher adds its summary of the failed ranks.
    std::vector<std::string> errors;
    for (const std::string& line : nonblank_lines(r.err))
      if (line.find("genesis: error: ") != std::string::npos) errors.push_back(line);
    if (nproc == 1) CHECK(nonblank_lines(r.err).size() == 1);
    REQUIRE(!errors.empty());
    for (const std::string& line : errors) CHECK(line.find(needle) != std::string::npos);
    CHECK_FALSE(fs::exists(dir.path() / "b" / "run" / "metrics.jsonl"));
    CHECK(snapshot(out_a) == before);
  };

  // Not a checkpoint at all: an empty directory, and a file.
  fs::create_directories(dir.path() / "empty");
  refused(1, dir.path() / "empty", 1, (dir.path() / "empty").string());
  refused(1, source / "rank-00000.safetensors", 1, "is not a checkpoint");
  // A mistyped step: the steps the run has are named.
  refused(1, run_a / "checkpoints" / "step-3", 1,
          "does not exist; " + (run_a / "checkpoints").string() + " holds step-2, step-4");

  // A manifest cut short.
  const fs::path truncated = dir.path() / "truncated";
  fs::copy(source, truncated, fs::copy_options::recursive);
  const std::string manifest = read_bytes(truncated / "manifest.json");
  write_text(truncated / "manifest.json", manifest.substr(0, manifest.size() / 2));
  const auto truncated_before = snapshot(truncated);
  refused(1, truncated, 1, (truncated / "manifest.json").string());
  CHECK(snapshot(truncated) == truncated_before);

  // Saved by 2 ranks x 8 (a global batch of 16): 3 ranks cannot keep it (1 rank resumes with
  // accumulation 2, see test_resume_world.cpp).
  refused(3, source, 2, "cannot resume a 2-rank checkpoint on 3 ranks keeping its global batch of 16");

  // The run itself, resumed in place with fewer steps than it has done: nothing to train, and no
  // summary of figures that were never measured.
  std::vector<std::string> fewer = sets;
  fewer.insert(fewer.end(), {"training.max_steps=3", "training.resume_from_checkpoint=auto"});
  const CliResult past =
      run_genesis(launched(2, train_args(out_a, "run", "mlp", fewer)), quiet_env());
  INFO(past.out << past.err);
  CHECK(past.exit_code == 2);
  CHECK(past.err.find("is at step 4, past training.max_steps = 3: nothing to train; raise "
                      "training.max_steps to continue the run") != std::string::npos);
  CHECK(snapshot(out_a) == before);
}

TEST_CASE("resume: a fresh start never deletes an earlier run's checkpoints unasked", "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=8", "training.max_steps=4",
                "training.logging_steps=2", "training.save_steps=2"});
  const fs::path run = dir.path() / "run";
  genesis_ok(train_args(dir.path(), "run", "mlp", sets));
  const auto before = snapshot(run / "checkpoints");

  // The same command again: refused in one line (exit 2), the checkpoints untouched.
  const CliResult again = run_genesis(train_args(dir.path(), "run", "mlp", sets), quiet_env());
  INFO(again.out << again.err);
  CHECK(again.exit_code == 2);
  CHECK(nonblank_lines(again.err).size() == 1);
  CHECK(again.err.find("2 checkpoints (up to step-4) of an earlier run") != std::string::npos);
  CHECK(again.err.find("--resume auto") != std::string::npos);
  CHECK(again.err.find("--overwrite") != std::string::npos);
  CHECK(snapshot(run / "checkpoints") == before);

  // --overwrite starts over: the old checkpoints go and the new run saves its own.
  std::vector<std::string> overwrite = train_args(dir.path(), "run", "mlp", sets);
  overwrite.insert(overwrite.end(), {"--overwrite", "--set", "training.max_steps=2"});
  const CliResult over = genesis_ok(overwrite);
  CHECK(over.err.find("deleting 2 checkpoints") != std::string::npos);
  CHECK(ckpt::list_checkpoints(run / "checkpoints") == std::vector<fs::path>{run / "checkpoints" / "step-2"});
}

}  // namespace genesis::testing::resume
