// Crashes around checkpoints: `genesis train` SIGKILLed at random moments while it saves and
// prunes a checkpoint every step never leaves a `latest` that fails to verify or load, nor a
// half-deleted step-N/; killed inside each phase of an asynchronous save (the snapshot, the
// background write, the commit before and after its rename), it resumes from the last committed
// checkpoint and ends on the bytes of a run that was never killed; a rank killed under `genesis launch --max-restarts 1` is restarted with
// its group and resumes to the same final weights, byte for byte, as a run that never crashed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <random>
#include <thread>

#include "genesis/ckpt/checkpoint.hpp"
#include "resume_support.hpp"

namespace genesis::testing::resume {
namespace {

// Starts argv with stdout and stderr going to files and, once its stderr shows `armed_by` (or
// after 30 s), SIGKILLs it `delay` later unless it has exited by then. Returns the exit code
// (128 + 9 when killed) like run_process.
int run_then_kill(const std::vector<std::string>& argv, const std::string& armed_by,
                  std::chrono::microseconds delay, const fs::path& out, const fs::path& err,
                  const RunOptions& options = quiet_env()) {
  std::vector<std::string> env_strings = child_environment(options.env);
  std::vector<char*> envp, args;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);

  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    REQUIRE(done >= 0);
    if (done == pid) break;
    const auto now = std::chrono::steady_clock::now();
    if (!deadline && (now >= give_up || read_bytes(err).find(armed_by) != std::string::npos))
      deadline = now + delay;
    if (deadline && now >= *deadline) {
      kill(pid, SIGKILL);
      REQUIRE(waitpid(pid, &status, 0) == pid);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The step in the last "  resumed    from DIR (step N)", or -1 when the run printed none.
std::int64_t resumed_step(const std::string& out, std::string* from = nullptr) {
  const std::string tag = "resumed    from ";
  const auto at = out.rfind(tag);
  if (at == std::string::npos) return -1;
  const auto end = out.find('\n', at);
  const std::string line = out.substr(at + tag.size(), end - at - tag.size());
  const auto paren = line.rfind(" (step ");
  if (paren == std::string::npos || line.back() != ')') return -1;
  if (from != nullptr) *from = line.substr(0, paren);
  return std::stoll(line.substr(paren + 7, line.size() - paren - 8));
}

// A save cut short leaves its temporary directory (cleared by the next save).
bool has_cut_save(const fs::path& checkpoints) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints, ec))
    if (entry.path().filename().string().rfind(".tmp-", 0) == 0) return true;
  return false;
}

// A kill while pruning leaves each old checkpoint whole or renamed for deletion, never a
// step-N/ without its manifest that nothing would list or remove.
void check_every_step_has_manifest(const fs::path& checkpoints) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints, ec))
    if (entry.path().filename().string().rfind("step-", 0) == 0)
      CHECK(fs::exists(entry.path() / "manifest.json"));
}

}  // namespace

TEST_CASE("resume: SIGKILL at random moments of checkpoint saves never breaks `latest`",
          "[resume]") {
  TempDir dir;
  // A checkpoint every step and a run too long to finish: most of the time goes to saving, and
  // every run resumes from what the previous killed one left.
  const std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=16", "training.max_steps=100000",
                "training.logging_steps=5", "training.save_steps=1",
                "training.save_total_limit=2", "training.resume_from_checkpoint=auto"});
  std::vector<std::string> argv = train_args(dir.path() / "out", "run", "mlp", sets);
  argv.insert(argv.begin(), GENESIS_TEST_BIN);
  const fs::path checkpoints = dir.path() / "out" / "run" / "checkpoints";
  const fs::path out = dir.path() / "stdout", err = dir.path() / "stderr";

  std::mt19937 random(20261122);
  // Each run is killed at a random moment after its first save: by then it saves every step.
  std::uniform_int_distribution<int> delay_us(0, 60000);
  constexpr int kKills = 30;
  int killed = 0, resumed = 0, cut_saves = 0;
  std::int64_t last_latest = 0;
  std::optional<fs::path> previous_latest;
  for (int attempt = 0; attempt < kKills; ++attempt) {
    const int delay = delay_us(random);
    const int code =
        run_then_kill(argv, "saved checkpoint", std::chrono::microseconds(delay), out, err);
    const std::string run_out = read_bytes(out), run_err = read_bytes(err);
    INFO("attempt " << attempt << " killed " << delay << " us after its first save, exit " << code << "\n"
                    << run_out << run_err);
    REQUIRE((code == 128 + SIGKILL || code == 0));
    killed += code == 128 + SIGKILL;
    // No run may find its `latest` unusable and fall back.
    CHECK(run_err.find("cannot resume from") == std::string::npos);
    CHECK(run_err.find("error") == std::string::npos);
    // A run that got as far as loading resumed from what the previous kill left as latest.
    std::string from;
    const std::int64_t step = resumed_step(run_out, &from);
    if (step >= 0 && previous_latest) {
      CHECK(fs::path(from) == *previous_latest);
      CHECK(step == last_latest);
      ++resumed;
    }

    cut_saves += has_cut_save(checkpoints);
    check_every_step_has_manifest(checkpoints);
    const std::optional<fs::path> latest = ckpt::read_latest(checkpoints);
    REQUIRE(latest);  // every run was killed after a save had committed
    INFO("latest: " << latest->string());
    REQUIRE_NOTHROW(ckpt::Checkpoint(*latest).verify());
    const ckpt::Checkpoint checkpoint(*latest);
    CHECK(checkpoint.manifest().step >= last_latest);
    last_latest = checkpoint.manifest().step;
    previous_latest = latest;
  }
  CHECK(killed >= kKills - 2);  // the run is far too long to finish
  CHECK(last_latest > 0);
  CHECK(resumed >= kKills / 3);
  CHECK(cut_saves >= 1);  // about a third of the kills land before a save's commit

  // And a last run, not killed, resumes from the final `latest` and completes.
  std::vector<std::string> finish = sets;
  finish.push_back("training.max_steps=" + std::to_string(last_latest + 2));
  const CliResult r = run_genesis(train_args(dir.path() / "out", "run", "mlp", finish), quiet_env());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(resumed_step(r.out) == last_latest);
  CHECK(ckpt::read_latest(checkpoints) == checkpoint_of(dir.path() / "out" / "run", last_latest + 2));
  // What is left (the kept checkpoints, the leftovers of cut saves cleared) verifies with the CLI.
  const CliResult verify = run_genesis({"ckpt", "verify", checkpoints.string()});
  INFO(verify.out << verify.err);
  CHECK(verify.exit_code == 0);
  CHECK(ckpt::list_leftovers(checkpoints).empty());
}

TEST_CASE("resume: a kill in each phase of an asynchronous save resumes bit for bit", "[resume]") {
  TempDir dir;
  // A GPT with dropout (its generator's state is in the checkpoint), one process, saving every
  // 2 steps: the saves of steps 2 and 4 are written in the background, the last one at once.
  const std::vector<std::string> sets =
      tiny_gpt({"training.per_device_train_batch_size=4", "training.max_steps=6",
                "training.logging_steps=1", "training.save_steps=2",
                "training.resume_from_checkpoint=auto"});
  const CliResult reference =
      run_genesis(train_args(dir.path() / "reference", "run", "gpt-tiny", sets), quiet_env());
  INFO(reference.out << reference.err);
  REQUIRE(reference.exit_code == 0);
  const auto expected = rank_files(checkpoint_of(dir.path() / "reference" / "run", 6));
  REQUIRE(!expected.empty());

  for (const std::string phase : {"snapshot", "write", "commit", "renamed"}) {
    const fs::path output = dir.path() / phase;
    const fs::path checkpoints = output / "run" / "checkpoints";
    std::vector<std::string> argv = train_args(output, "run", "gpt-tiny", sets);
    argv.insert(argv.begin(), GENESIS_TEST_BIN);
    RunOptions paused = quiet_env();
    paused.env.emplace_back("GENESIS_TEST_PAUSE_SAVE", phase + ":4");
    const int code = run_then_kill(argv, "in its " + phase + " phase", std::chrono::microseconds(0),
                                   dir.path() / "stdout", dir.path() / "stderr", paused);
    const std::string killed_err = read_bytes(dir.path() / "stderr");
    INFO(phase << ": exit " << code << "\n" << killed_err);
    REQUIRE(code == 128 + SIGKILL);
    REQUIRE(killed_err.find("pausing the save of step 4 in its " + phase) != std::string::npos);
    // The save of step 4 never moved `latest`: step 2 is what a crash keeps.
    const std::optional<fs::path> latest = ckpt::read_latest(checkpoints);
    REQUIRE(latest == checkpoints / "step-2");
    REQUIRE_NOTHROW(ckpt::Checkpoint(*latest).verify());
    CHECK(fs::exists(checkpoints / "step-4" / "manifest.json") == (phase == "renamed"));

    const CliResult resumed = run_genesis(train_args(output, "run", "gpt-tiny", sets), quiet_env());
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(resumed_step(resumed.out) == 2);  // `latest`, even beside a renamed step-4
    const auto files = rank_files(checkpoint_of(output / "run", 6));
    REQUIRE(files.size() == expected.size());
    for (const auto& [name, bytes] : expected) CHECK(files.at(name) == bytes);
    CHECK(ckpt::list_leftovers(checkpoints).empty());
  }
}

TEST_CASE("resume: a rank killed under launch --max-restarts resumes to the same weights",
          "[resume]") {
  TempDir dir;
  const std::vector<std::string> sets =
      tiny_mlp({"training.per_device_train_batch_size=8", "training.max_steps=40",
                "training.logging_steps=4", "training.save_steps=3", "training.eval_steps=10",
                "distributed.strategy=zero2"});
  const fs::path out_a = dir.path() / "a";
  const CliResult a = run_genesis(launched(2, train_args(out_a, "run", "mlp", sets)), quiet_env());
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);

  // Rank 1 of the first attempt dies after the run's first checkpoint; the restarted attempt
  // must resume from the run's latest and end with A's weights.
  auto crash_and_restart = [&](const fs::path& output_dir, const std::vector<std::string>& run_sets) {
    std::vector<std::string> args{"launch", "--nproc", "2", "--max-restarts", "1", "--", "sh",
                                  std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/train/kill_rank_once.sh",
                                  (output_dir / "run").string(), GENESIS_TEST_BIN};
    for (const std::string& arg : train_args(output_dir, "run", "mlp", run_sets)) args.push_back(arg);
    const CliResult r = run_genesis(args, quiet_env());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("kill_rank_once.sh: killing rank 1") != std::string::npos);
    CHECK(r.err.find("genesis launch: restarting all 2 local ranks (restart 1 of 1)") != std::string::npos);
    CHECK(r.err.find("restarted by genesis launch: resuming from the latest checkpoint") != std::string::npos);
    std::string from;
    const std::int64_t step = resumed_step(r.out, &from);
    CHECK(step >= 3);
    CHECK(fs::path(from).parent_path() == output_dir / "run" / "checkpoints");

    const auto files_a = rank_files(checkpoint_of(out_a / "run", 40));
    const auto files_b = rank_files(checkpoint_of(output_dir / "run", 40));
    REQUIRE(files_a.size() == 2);
    REQUIRE(files_b.size() == 2);
    for (const auto& [name, bytes] : files_a) {
      INFO(name);
      CHECK(files_b.at(name) == bytes);
    }
    const json summary_a = read_summary(out_a / "run"), summary_b = read_summary(output_dir / "run");
    for (const char* key : {"final_loss", "eval_loss", "eval_accuracy"}) CHECK(summary_b[key] == summary_a[key]);
    return step;
  };
  SECTION("a fresh run") { crash_and_restart(dir.path() / "b", sets); }
  SECTION("a run resumed from an explicit checkpoint goes on from its own, not back to that one") {
    const fs::path copy = dir.path() / "a-step-3";
    fs::copy(checkpoint_of(out_a / "run", 3), copy, fs::copy_options::recursive);
    std::vector<std::string> resumed = sets;
    resumed.insert(resumed.end(), {"training.resume_from_checkpoint=" + copy.string(),
                                   "training.save_total_limit=1"});
    CHECK(crash_and_restart(dir.path() / "c", resumed) >= 6);
  }
}

}  // namespace genesis::testing::resume
