// `genesis report` run as a user runs it: the HTML page and the single SVG chart, where they are
// written, and bad input (no such directory, no run directory, an empty or malformed
// metrics.jsonl) refused with exit 2 and a message naming the file and line, leaving an earlier
// report untouched and nothing half-written.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "report/report_fixture.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using testing::count_of;
using testing::run_genesis;
using testing::TempDir;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t files_in(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
}

// Runs `genesis report` on `runs` with an existing report.html in `out`; checks the refusal.
void check_refused(const std::vector<std::string>& runs, const std::string& message) {
  TempDir out;
  out.write("report.html", "earlier report");
  std::vector<std::string> args = {"report"};
  args.insert(args.end(), runs.begin(), runs.end());
  const auto r = run_genesis(args, {{}, out.path()});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(message) != std::string::npos);
  CHECK(testing::lines_of(r.err).size() == 1);
  CHECK(read_text(out.path() / "report.html") == "earlier report");
  CHECK(files_in(out.path()) == 1);
}

}  // namespace

TEST_CASE("genesis report writes report.html in the current directory by default", "[report]") {
  TempDir tmp;
  const auto a = testing::write_synthetic_run(tmp.path(), "ddp", 200);
  const auto b = testing::write_synthetic_run(tmp.path(), "zero2_fp16", 150, 1.3, true);
  const auto r = run_genesis({"report", a.string(), b.string()}, {{}, tmp.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("wrote report.html: 2 runs, ") != std::string::npos);
  const std::string html = read_text(tmp.path() / "report.html");
  CHECK(html.find(">ddp</text>") != std::string::npos);
  CHECK(html.find(">zero2_fp16</text>") != std::string::npos);
  CHECK(html.find("Loss scale (fp16)") != std::string::npos);
  CHECK(count_of(html, "class=\"event\"") == 2);  // the scale was cut twice
  CHECK(html.find("peak_rss_mb_per_rank") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
}

TEST_CASE("genesis report -o writes where it is told", "[report]") {
  TempDir tmp;
  const auto a = testing::write_synthetic_run(tmp.path(), "a", 100);
  const auto r = run_genesis({"report", a.string(), "-o", (tmp.path() / "out.html").string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_text(tmp.path() / "out.html").starts_with("<!DOCTYPE html>"));
  CHECK_FALSE(fs::exists(tmp.path() / "report.html"));
}

TEST_CASE("genesis report --format svg writes the one chart --metric names", "[report]") {
  TempDir tmp;
  const auto a = testing::write_synthetic_run(tmp.path(), "a", 200);
  const auto b = testing::write_synthetic_run(tmp.path(), "b", 200, 2.0);
  auto r = run_genesis({"report", a.string(), b.string(), "--format", "svg"}, {{}, tmp.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "wrote report.svg: chart loss, 2 series\n");
  const std::string loss = read_text(tmp.path() / "report.svg");
  CHECK(loss.starts_with("<?xml"));
  const auto lines = testing::polyline_points(loss);
  REQUIRE(lines.size() == 2);
  CHECK(testing::point_count(lines[0]) == 20);

  r = run_genesis({"report", a.string(), "--format", "svg", "--metric", "eval_loss", "-o",
                   (tmp.path() / "eval.svg").string()});
  REQUIRE(r.exit_code == 0);
  const auto eval = testing::polyline_points(read_text(tmp.path() / "eval.svg"));
  REQUIRE(eval.size() == 1);
  CHECK(testing::point_count(eval[0]) == 4);  // evaluated at steps 50, 100, 150, 200

  r = run_genesis({"report", a.string(), "--format", "svg", "--metric", "nope", "-o",
                   (tmp.path() / "nope.svg").string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no chart for metric 'nope'") != std::string::npos);
  CHECK(r.err.find("loss, eval_loss") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path() / "nope.svg"));

  r = run_genesis({"report", a.string(), "--metric", "loss"}, {{}, tmp.path()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--metric chooses the chart of --format svg") != std::string::npos);
}

TEST_CASE("genesis report refuses what is no run directory", "[report]") {
  TempDir tmp;
  check_refused({(tmp.path() / "missing").string()}, "missing' does not exist");
  fs::create_directories(tmp.path() / "empty_dir");
  check_refused({(tmp.path() / "empty_dir").string()},
                "empty_dir' is not a run directory: it has no metrics.jsonl");
  const auto good = testing::write_synthetic_run(tmp.path(), "good", 50);
  check_refused({good.string(), (tmp.path() / "empty_dir").string()}, "is not a run directory");
}

TEST_CASE("genesis report names the file and line of a bad metrics.jsonl", "[report]") {
  TempDir tmp;
  const auto run = [&](const std::string& name, const std::string& metrics) {
    fs::create_directories(tmp.path() / name);
    std::ofstream(tmp.path() / name / "metrics.jsonl") << metrics;
    return (tmp.path() / name).string();
  };
  check_refused({run("empty", "")}, "empty/metrics.jsonl' holds no record");
  check_refused({run("blank", "\n\n")}, "blank/metrics.jsonl' holds no record");
  check_refused({run("empty", ""), run("blank", "\n\n")}, "empty/metrics.jsonl' holds no record");
  check_refused({run("garbled", "{\"step\": 1, \"loss\": 2}\n{\"step\": 2, \"loss\" 1}\n")},
                "garbled/metrics.jsonl' line 2: not valid JSON");
  check_refused({run("stepless", "{\"loss\": 2}\n")}, "stepless/metrics.jsonl' line 1: no numeric \"step\"");
  check_refused({run("array", "[1, 2]\n")}, "array/metrics.jsonl' line 1: not a JSON object");
  const std::string bad_summary = run("bad_summary", "{\"step\": 1, \"loss\": 2}\n");
  std::ofstream(fs::path(bad_summary) / "summary.json") << "{\"steps\": ";
  check_refused({bad_summary}, "bad_summary/summary.json' is not a JSON object");
}

TEST_CASE("genesis report leaves out a run that has logged nothing while others remain",
          "[report]") {
  // `genesis report runs/*` with one run just started (or stopped before its first log line).
  TempDir tmp;
  const auto good = testing::write_synthetic_run(tmp.path(), "good", 50);
  fs::create_directories(tmp.path() / "starting");
  std::ofstream(tmp.path() / "starting" / "metrics.jsonl") << "";
  const auto r = run_genesis({"report", good.string(), (tmp.path() / "starting").string()},
                             {{}, tmp.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("wrote report.html: 1 run, ") != std::string::npos);
  CHECK(r.err.find("left out " + (tmp.path() / "starting").string() +
                   ": it has logged no step yet") != std::string::npos);
}

TEST_CASE("genesis report of an output directory reports every run in it", "[report]") {
  TempDir tmp;
  const fs::path runs = tmp.path() / "runs";
  testing::write_synthetic_run(runs, "b_zero2", 80);
  testing::write_synthetic_run(runs, "a_ddp", 50);
  fs::create_directories(runs / "notes");  // no run: passed over
  const auto r = run_genesis({"report", runs.string()}, {{}, tmp.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("wrote report.html: 2 runs, ") != std::string::npos);
  const std::string html = read_text(tmp.path() / "report.html");
  CHECK(html.find(">a_ddp</text>") != std::string::npos);
  CHECK(html.find(">b_zero2</text>") != std::string::npos);
}

TEST_CASE("genesis report with no run reports every run under runs/", "[report]") {
  TempDir tmp;
  testing::write_synthetic_run(tmp.path() / "runs", "sft", 60);
  testing::write_synthetic_run(tmp.path() / "runs", "dpo", 40);
  const auto r = run_genesis({"report"}, {{}, tmp.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("wrote report.html: 2 runs, ") != std::string::npos);

  // In a directory with no runs/, the refusal says what to give.
  check_refused({}, "no run given, and there is no 'runs' directory here");
  // Its source line is named from the source tree's root, as libgenesis's are.
  check_refused({}, "(commands/report.cpp:");
}

TEST_CASE("genesis report skips the unfinished last line of a running job", "[report]") {
  TempDir tmp;
  fs::create_directories(tmp.path() / "running");
  std::ofstream(tmp.path() / "running" / "metrics.jsonl") << "{\"step\": 5, \"loss\": 2}\n{\"step\": 10, \"lo";
  const auto r = run_genesis({"report", (tmp.path() / "running").string()}, {{}, tmp.path()});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_text(tmp.path() / "report.html").find("no summary.json: running or stopped early") !=
        std::string::npos);
}

TEST_CASE("genesis report of real runs shows their configs side by side", "[report]") {
  TempDir tmp;
  const auto fp32 = testing::train_small_run(tmp.path() / "runs", "fp32");
  const auto fp16 = testing::train_small_run(tmp.path() / "runs", "fp16", {"training.mixed_precision=\"fp16\""});
  const auto r = run_genesis({"report", fp32.string(), fp16.string()}, {{}, tmp.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = read_text(tmp.path() / "report.html");
  CHECK(html.find("<tr class=\"differs\"><td class=\"key\">training.mixed_precision</td>"
                  "<td>&quot;no&quot;</td><td>&quot;fp16&quot;</td></tr>") != std::string::npos);
  CHECK(html.find("<tr><td class=\"key\">model.n_embd</td><td>32</td><td>32</td></tr>") != std::string::npos);
  for (const char* key : {"(loss)", "(eval_loss)", "(eval_exact_match)", "(lr)", "(tokens_per_s)",
                          "(loss_scale)", "peak_rss_mb_per_rank"})
    CHECK(html.find(key) != std::string::npos);
}

}  // namespace genesis
