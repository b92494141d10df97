// The SFT preset as users run it: it learns a task well enough to answer held-out prompts
// exactly, reports that figure in metrics.jsonl, summary.json and the final report, trains on the
// JSONL sample that ships beside it, and turns bad data into one clear line and exit code 2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

#include "support/cli_run.hpp"

using namespace genesis;
using nlohmann::json;

namespace {

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

std::vector<json> read_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// `genesis train --preset sft` as its own process on one thread (ctest runs tests side by side),
// named `name` under `out`, with `sets` as --set; it must succeed.
testing::CliResult train_sft(const std::filesystem::path& out, const std::string& name,
                             const std::vector<std::string>& sets) {
  std::vector<std::string> args{"train", "--preset", "sft", "-o", out.string(), "--name", name};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  testing::CliResult r = testing::run_genesis(args, {{{"OMP_NUM_THREADS", "1"}}, {}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

TEST_CASE("sft: the preset learns a small task and answers held-out prompts exactly", "[sft-train]") {
  testing::TempDir dir;
  // The preset's model on the quick tasks (a word's first and last letter): a few hundred steps.
  const testing::CliResult r =
      train_sft(dir.path(), "sft", {"data.source=tasks:first,last", "data.num_samples=10000",
                                    "training.max_steps=500", "training.eval_steps=250",
                                    "training.logging_steps=50", "training.eval_batches=2"});
  const std::filesystem::path run = dir.path() / "sft";
  const json s = read_json(run / "summary.json");
  INFO(r.out);
  CHECK(s["eval_prompts"] == 64);  // eval_batches x per_device_train_batch_size
  CHECK(s["eval_exact_match"].get<double>() >= 0.8);
  // Each task's share, and the log line says where the misses are. The generator deals the
  // tasks in turn, so the held-out prompts are about half each: the mean of the two is near the
  // total (exactly it when the halves are equal).
  const double first = s["eval_exact_match/first"].get<double>();
  const double last = s["eval_exact_match/last"].get<double>();
  CHECK((first + last) / 2 == Approx(s["eval_exact_match"].get<double>()).margin(0.1));
  CHECK(std::min(first, last) <= s["eval_exact_match"].get<double>());
  CHECK(std::max(first, last) >= s["eval_exact_match"].get<double>());
  const std::string shares = fmt::format("(first {:.1f}%, last {:.1f}%)", first * 100, last * 100);
  CHECK((r.out + r.err).find(shares) != std::string::npos);
  REQUIRE(s["samples"].size() == 3);
  for (const json& sample : s["samples"])
    for (const char* key : {"prompt", "expected", "generated"}) CHECK(sample[key].is_string());

  // Every evaluation logs its exact match; the later one is the summary's.
  std::vector<double> exact;
  for (const json& line : read_lines(run / "metrics.jsonl"))
    if (line.contains("eval_exact_match")) exact.push_back(line["eval_exact_match"].get<double>());
  REQUIRE(exact.size() == 2);
  CHECK(exact.back() == s["eval_exact_match"].get<double>());
  CHECK(exact.front() < exact.back());

  // The final report: the figure, then each sample as prompt -> answer.
  CHECK(r.out.find("exact match: ") != std::string::npos);
  CHECK(r.out.find("  \"first: ") != std::string::npos);
  CHECK(r.out.find(" -> ") != std::string::npos);
}

TEST_CASE("sft: the JSONL sample shipped with the presets trains", "[sft-train]") {
  testing::TempDir dir;
  // The sample's chat examples are longer than the tasks' 24 tokens.
  train_sft(dir.path(), "sft", {"data.source=jsonl:sft-sample.jsonl", "model.block_size=64",
                                "training.max_steps=40", "training.logging_steps=10",
                                "training.eval_batches=1"});
  std::vector<double> losses;
  for (const json& line : read_lines(dir.path() / "sft" / "metrics.jsonl"))
    if (line.contains("loss")) losses.push_back(line["loss"].get<double>());
  REQUIRE(losses.size() == 4);
  CHECK(losses.back() < 0.7 * losses.front());
  CHECK(read_json(dir.path() / "sft" / "summary.json")["eval_prompts"].get<int>() > 0);
}

TEST_CASE("sft: a file too small to hold any out is trained and not evaluated", "[sft-train]") {
  // 2% of 3 examples rounds to none: no eval figures, rather than a loss and accuracy of 0.
  testing::TempDir dir;
  write_text(dir.path() / "small.jsonl",
             "{\"prompt\": \"a\\n\", \"completion\": \"b\"}\n"
             "{\"prompt\": \"c\\n\", \"completion\": \"d\"}\n"
             "{\"prompt\": \"e\\n\", \"completion\": \"f\"}\n");
  const auto r = train_sft(dir.path(), "small",
                           {"data.source=jsonl:" + (dir.path() / "small.jsonl").string(),
                            "training.max_steps=3"});
  CHECK_THAT(r.out, Catch::Contains("3 train, 0 eval examples (data.eval_fraction holds none "
                                    "out: no evaluation)"));
  CHECK_THAT(r.out, Catch::Contains("done: 3 steps in "));
  CHECK_THAT(r.out, !Catch::Contains("eval loss"));
  const json summary = read_json(dir.path() / "small" / "summary.json");
  for (const auto& [key, value] : summary.items()) CHECK_FALSE(key.starts_with("eval_"));
  for (const json& line : read_lines(dir.path() / "small" / "metrics.jsonl"))
    CHECK_FALSE(line.contains("eval_loss"));
}

TEST_CASE("sft: bad data is one line naming the problem, exit 2", "[sft-train]") {
  testing::TempDir dir;
  auto refused = [&](const std::string& file_text, const std::vector<std::string>& sets,
                     const std::string& needle) {
    write_text(dir.path() / "data.jsonl", file_text);
    std::vector<std::string> args{"train", "--preset", "sft", "-o", (dir.path() / "runs").string(),
                                  "--set", "data.source=jsonl:" + (dir.path() / "data.jsonl").string()};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    const testing::CliResult r = testing::run_genesis(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(testing::lines_of(r.err).size() == 1);
    CHECK(r.err.find(needle) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "runs" / "sft" / "metrics.jsonl"));
  };
  refused("", {}, "data.jsonl' holds no examples");
  refused("{\"prompt\": \"a\", \"response\": \"b\"}\n{\"prompt\": \"where is the answer?\"}\n", {},
          "data.jsonl:2: keys \"prompt\" are prompt-only data; expected {\"text\"}");
  refused("{\"prompt\": \"" + std::string(40, 'p') + "\", \"response\": \"b\"}\n", {"model.block_size=24"},
          "the prompt is 40 tokens");
  // Generated tasks with nothing left to train on.
  const testing::CliResult empty = testing::run_genesis(
      {"train", "--preset", "sft", "-o", (dir.path() / "runs").string(), "--set",
       "data.num_samples=1", "--set", "data.eval_fraction=0.9"});
  CHECK(empty.exit_code == 2);
  CHECK(empty.err.find("leaves no training examples") != std::string::npos);
}

// The first/last task trained in `mode` (no, bf16, fp16) for `steps` steps as run `name` under
// `dir`; returns its summary.json. 800 steps: at 500 this task is still on the edge, and where a
// run ends then depends on its trajectory (fp32 itself ends between 55% and 100% over seeds 1-3,
// fp16 at seed 42 at 59%); by 800 every precision and seed tried had converged (98-100%). Each
// precision is a test of its own, so that ctest runs them beside the others.
namespace {

json train_in_precision(const std::filesystem::path& dir, const std::string& name,
                        const std::string& mode, int steps, const std::string& more = "") {
  std::vector<std::string> sets{"data.source=tasks:first,last", "data.num_samples=10000",
                                "training.max_steps=" + std::to_string(steps),
                                "training.logging_steps=100", "training.eval_batches=2",
                                "training.mixed_precision=" + mode};
  if (!more.empty()) sets.push_back(more);
  train_sft(dir, name, sets);
  const json s = read_json(dir / name / "summary.json");
  CHECK(s["mixed_precision"] == mode);
  return s;
}

// The mean loss of the first 100 steps of a 100-step run in `mode` and in fp32: reduced-precision
// matmuls move the curve a little, not its course.
std::pair<double, double> first_losses(const std::filesystem::path& dir, const std::string& mode) {
  train_in_precision(dir, mode + "-100", mode, 100);
  train_in_precision(dir, "fp32-100", "no", 100);
  auto first = [&](const std::string& run) {
    return read_lines(dir / run / "metrics.jsonl").front()["loss"].get<double>();
  };
  return {first(mode + "-100"), first("fp32-100")};
}

}  // namespace

TEST_CASE("sft: fp32 learns the task the reduced precisions are held to", "[sft-train]") {
  testing::TempDir dir;
  CHECK(train_in_precision(dir.path(), "no", "no", 800)["eval_exact_match"].get<double>() >= 0.75);
}

TEST_CASE("sft: bf16 trains as fp32 does", "[sft-train]") {
  testing::TempDir dir;
  const json s = train_in_precision(dir.path(), "bf16", "bf16", 800);
  CHECK(s["eval_exact_match"].get<double>() >= 0.75);
  CHECK_FALSE(s.contains("loss_scale"));
  const auto [bf16, fp32] = first_losses(dir.path(), "bf16");
  CHECK(bf16 == Approx(fp32).epsilon(0.05));
  CHECK(bf16 != fp32);  // it did run in bf16
}

TEST_CASE("sft: fp16 trains as fp32 does and skips its overflowing steps", "[sft-train]") {
  testing::TempDir dir;
  // It starts at 2^24, not the default 2^16, where whether the first gradients overflow depends
  // on the machine's rounding.
  const json s =
      train_in_precision(dir.path(), "fp16", "fp16", 800, "loss_scale.initial_scale_power=24");
  CHECK(s["eval_exact_match"].get<double>() >= 0.75);
  const auto [fp16, fp32] = first_losses(dir.path(), "fp16");
  CHECK(fp16 == Approx(fp32).epsilon(0.05));
  // fp16 overflows at 2^24 and halves its way down; the skipped steps and the scale are reported.
  CHECK(s["loss_scale"]["skipped_steps"].get<int>() >= 1);
  CHECK(s["loss_scale"]["final"].get<double>() < 16777216.0);
  for (const json& line : read_lines(dir.path() / "fp16" / "metrics.jsonl"))
    if (line.contains("loss")) CHECK(line.contains("loss_scale"));
}

TEST_CASE("sft: an fp16 overflow at the minimum loss scale stops the run in one line", "[sft-train]") {
  testing::TempDir dir;
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "sft", "-o", dir.path().string(), "--set", "data.num_samples=400",
       "--set", "training.mixed_precision=fp16", "--set", "loss_scale.initial_scale_power=24",
       "--set", "loss_scale.min_loss_scale=16777216", "--set", "loss_scale.hysteresis=1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  std::vector<std::string> errors;
  for (const std::string& line : testing::lines_of(r.err))
    if (line.find("genesis: error: ") != std::string::npos) errors.push_back(line);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("fp16 gradients overflow even at the minimum loss scale") != std::string::npos);
}

TEST_CASE("sft: gradient checkpointing trains to the same losses", "[sft-train]") {
  testing::TempDir dir;
  for (const std::string on : {"false", "true"})
    train_sft(dir.path(), "ckpt-" + on, {"data.num_samples=2000", "training.max_steps=20",
                                         "training.logging_steps=5", "training.eval_batches=1",
                                         "model.dropout=0.1",  // recompute replays the same masks
                                         "training.gradient_checkpointing=" + on});
  const auto plain = read_lines(dir.path() / "ckpt-false" / "metrics.jsonl");
  const auto recomputed = read_lines(dir.path() / "ckpt-true" / "metrics.jsonl");
  REQUIRE(plain.size() == recomputed.size());
  for (std::size_t i = 0; i < plain.size(); ++i)
    for (const char* key : {"loss", "grad_norm", "eval_loss", "eval_exact_match"})
      if (plain[i].contains(key)) CHECK(recomputed[i][key] == plain[i][key]);
  // And it did recompute: the two blocks' activations are not all kept through backward, so the
  // peak of host memory in tensors is lower (11.0 MB plain, 7.6 MB checkpointed when written).
  auto peak_mb = [&](const std::string& run) {
    return read_json(dir.path() / run / "summary.json")["peak_host_tensor_mb_per_rank"][0]
        .get<double>();
  };
  INFO("peak host tensor memory: " << peak_mb("ckpt-false") << " MB plain, "
                                   << peak_mb("ckpt-true") << " MB checkpointed");
  CHECK(peak_mb("ckpt-true") < 0.85 * peak_mb("ckpt-false"));
}

