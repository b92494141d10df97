// Multi-rank `genesis train` as users run it, through `genesis launch`: two ranks with batch B
// log the same losses as one rank with batch 2B (with and without accumulation), rank 0 alone
// prints and writes the run files, and strategies that are not built say so.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"

using genesis::testing::lines_of;
using genesis::testing::run_genesis;
using genesis::testing::TempDir;
using nlohmann::json;

namespace {

std::vector<std::string> small_run(const TempDir& dir, const std::string& name, int batch, int accum) {
  return {"--preset", "mlp", "-o", dir.path().string(), "--name", name,
          "--set", "model.hidden_sizes=[48,32]", "--set", "data.num_samples=3000",
          "--set", "training.optimizer=sgd", "--set", "training.learning_rate=0.05",
          "--set", "training.max_steps=12", "--set", "training.logging_steps=1",
          "--set", "training.per_device_train_batch_size=" + std::to_string(batch),
          "--set", "training.gradient_accumulation_steps=" + std::to_string(accum),
          "--set", "distributed.bucket_cap_mb=0.02"};  // several buckets
}

std::vector<json> metrics_of(const TempDir& dir, const std::string& name) {
  std::ifstream in(dir.path() / name / "metrics.jsonl");
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// One OpenMP thread per rank in both runs, so the only difference is the data split.
const genesis::testing::RunOptions kOneThread{{{"OMP_NUM_THREADS", "1"}}, {}};

// Runs a and b logged the same figures, line by line, to 1e-5: each line holds the same ones of
// the compared keys in both runs, and every key of `each_line` is on at least 6 lines, so a
// figure renamed or gone fails here instead of leaving nothing to compare.
void require_same_curve(const std::vector<json>& a, const std::vector<json>& b,
                        const std::vector<std::string>& each_line = {"loss"}) {
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() >= 6);
  std::map<std::string, int> compared;
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"loss", "eval_loss", "accuracy", "eval_accuracy"}) {
      INFO("line " << i << " " << key);
      REQUIRE(a[i].contains(key) == b[i].contains(key));
      if (!a[i].contains(key)) continue;
      const double x = a[i][key], y = b[i][key];
      INFO(x << " vs " << y);
      CHECK(std::fabs(x - y) <= 1e-5 * std::max(1.0, std::fabs(y)));
      ++compared[key];
    }
  }
  for (const std::string& key : each_line) {
    INFO(key << " compared on " << compared[key] << " lines");
    CHECK(compared[key] >= 6);
  }
}

// The figures every line of the mlp preset's runs has.
const std::vector<std::string> kClassifierFigures = {"loss", "accuracy"};

}  // namespace

TEST_CASE("train: SFT on 2 ranks, or with accumulation, follows 1 rank with the whole batch",
          "[train][ddp]") {
  // SFT scores response tokens only, so the halves of a batch hold different numbers of scored
  // targets: the mean of two half-batch means is not the whole batch's mean unless each half is
  // weighted by its share of the step's targets.
  TempDir dir;
  auto sft = [&](const std::string& name, int batch, int accum) {
    return std::vector<std::string>{
        "train", "--preset", "sft", "-o", dir.path().string(), "--name", name,
        "--set", "model.n_layer=1", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "data.num_samples=400", "--set", "training.max_steps=6",
        "--set", "training.logging_steps=1", "--set", "training.eval_steps=0",
        "--set", "training.eval_batches=1",
        "--set", "training.per_device_train_batch_size=" + std::to_string(batch),
        "--set", "training.gradient_accumulation_steps=" + std::to_string(accum)};
  };
  auto r1 = run_genesis(sft("one", 16, 1), kOneThread);
  REQUIRE(r1.exit_code == 0);
  auto ra = run_genesis(sft("accum", 8, 2), kOneThread);
  INFO("accumulation: " << ra.err);
  REQUIRE(ra.exit_code == 0);
  std::vector<std::string> dual{"launch", "--nproc", "2"};
  for (auto& a : sft("two", 8, 1)) dual.push_back(a);
  auto r2 = run_genesis(dual, kOneThread);
  INFO("2 ranks: " << r2.out << r2.err);
  REQUIRE(r2.exit_code == 0);
  require_same_curve(metrics_of(dir, "accum"), metrics_of(dir, "one"));
  require_same_curve(metrics_of(dir, "two"), metrics_of(dir, "one"));
}

TEST_CASE("train: 2 ranks with batch B log the losses of 1 rank with batch 2B", "[train][ddp]") {
  TempDir dir;
  for (int accum : {1, 2}) {
    const std::string one = "one" + std::to_string(accum), two = "two" + std::to_string(accum);
    std::vector<std::string> single{"train"};
    for (auto& a : small_run(dir, one, 32, accum)) single.push_back(a);
    std::vector<std::string> dual{"launch", "--nproc", "2", "train"};
    for (auto& a : small_run(dir, two, 16, accum)) dual.push_back(a);
    auto r1 = run_genesis(single, kOneThread);
    auto r2 = run_genesis(dual, kOneThread);
    INFO("1 rank: " << r1.err << "\n2 ranks: " << r2.out << r2.err);
    REQUIRE(r1.exit_code == 0);
    REQUIRE(r2.exit_code == 0);
    require_same_curve(metrics_of(dir, two), metrics_of(dir, one), kClassifierFigures);
  }
}

TEST_CASE("train: rank 0 alone reports and writes the run files", "[train][ddp]") {
  TempDir dir;
  std::vector<std::string> args{"launch", "--nproc", "2", "train"};
  for (auto& a : small_run(dir, "r", 16, 1)) args.push_back(a);
  auto r = run_genesis(args, kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("16 per device x 2 processes x 1 accumulation = 32 examples per step") !=
        std::string::npos);
  CHECK(r.out.find("strategy   ddp (auto) over shm, 2 ranks") != std::string::npos);
  for (const auto& line : lines_of(r.out + r.err)) CHECK(line.rfind("[rank 1]", 0) != 0);
  std::ifstream in(dir.path() / "r" / "summary.json");
  json s = json::parse(in);
  CHECK(s["world_size"] == 2);
  CHECK(s["strategy"] == "ddp");
  CHECK(s["effective_batch_size"] == 32);
  CHECK(s["peak_rss_mb_per_rank"].size() == 2);
  CHECK(s["memory_per_rank_bytes"]["parameters"].get<std::int64_t>() > 0);
}

TEST_CASE("train: every sharded strategy logs the losses of ddp", "[train][zero]") {
  TempDir dir;
  auto run = [&](const std::string& strategy) {
    std::vector<std::string> args{"launch", "--nproc", "2", "train"};
    for (auto& a : small_run(dir, strategy, 16, 2)) args.push_back(a);
    args.insert(args.end(), {"--set", "distributed.strategy=" + strategy});
    auto r = run_genesis(args, kOneThread);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("strategy   " + strategy + " over shm") != std::string::npos);
    return metrics_of(dir, strategy);
  };
  const auto ddp = run("ddp");
  require_same_curve(run("zero1"), ddp, kClassifierFigures);
  require_same_curve(run("zero2"), ddp, kClassifierFigures);
  require_same_curve(run("zero3"), ddp, kClassifierFigures);
}

TEST_CASE("train --dry-run prints every strategy's memory and auto's choice", "[train][zero]") {
  TempDir dir;
  auto r = run_genesis({"train", "--preset", "gpt-tiny", "--dry-run", "-o", dir.path().string()},
                       {{{"WORLD_SIZE", "4"}}, {}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("120576 parameters") != std::string::npos);
  for (const char* row : {"ddp", "zero1", "zero2", "zero3", "hsdp"})
    CHECK(r.out.find(std::string(" ") + row + "  ") != std::string::npos);
  CHECK(r.out.find("* ddp") != std::string::npos);  // small model, plenty of memory
  CHECK(r.out.find("auto: ddp") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "gpt-tiny"));  // nothing trained or written

  // 1.4 MiB per rank, 80% of it usable: ddp's 1.84 MiB and zero1's 1.15 MiB do not fit,
  // zero2's 824 KiB does.
  auto small = run_genesis({"train", "--preset", "gpt-tiny", "--dry-run", "--set",
                            "distributed.memory_budget_gb=0.0013671875"},
                           {{{"WORLD_SIZE", "4"}}, {}});
  INFO(small.out);
  CHECK(small.out.find("* zero2") != std::string::npos);
  CHECK(small.out.find("auto: zero2 (ddp needs 1.84 MiB per rank, over 80% of the 1.40 MiB "
                       "budget") != std::string::npos);
  // .grad a tensor of its own beside the buckets: a second gradient.
  auto copies = run_genesis({"train", "--preset", "gpt-tiny", "--dry-run", "--set",
                             "distributed.memory_budget_gb=0.0013671875", "--set",
                             "distributed.gradient_as_bucket_view=false"},
                            {{{"WORLD_SIZE", "4"}}, {}});
  CHECK(copies.out.find("ddp needs 2.30 MiB per rank") != std::string::npos);

  // Offloading asks for a strategy that can offload, and the table says what stays on the host.
  auto offload = run_genesis({"train", "--preset", "gpt-tiny", "--dry-run", "--set",
                              "distributed.offload_optimizer=cpu"},
                             {{{"WORLD_SIZE", "4"}}, {}});
  INFO(offload.out);
  CHECK(offload.out.find("auto: zero1 (offload_optimizer asks for a ZeRO stage") !=
        std::string::npos);
  CHECK(offload.out.find("on host") != std::string::npos);
  auto params = run_genesis({"train", "--preset", "gpt-tiny", "--dry-run", "--set",
                             "distributed.offload_param=cpu"},
                            {{{"WORLD_SIZE", "4"}}, {}});
  CHECK(params.out.find("auto: zero3 (offload_param asks for zero3 or hsdp") != std::string::npos);

  // A strategy the config names is the one marked; auto's choice is only what it would pick.
  auto named = run_genesis({"train", "--preset", "gpt-tiny", "--dry-run", "--set",
                            "distributed.strategy=zero3"},
                           {{{"WORLD_SIZE", "4"}}, {}});
  INFO(named.out);
  CHECK(named.out.find("* zero3") != std::string::npos);
  CHECK(named.out.find("* ddp") == std::string::npos);
  CHECK(named.out.find("auto would pick: ddp (") != std::string::npos);

  // Persistent parameters (here all of them) are whole on every rank besides their shard.
  auto persistent = run_genesis({"train", "--preset", "gpt-tiny", "--dry-run", "--set",
                                 "distributed.param_persistence_threshold=1000000000"},
                                {{{"WORLD_SIZE", "4"}}, {}});
  INFO(persistent.out);
  CHECK(persistent.out.find("zero3         589 KiB      118 KiB      236 KiB") != std::string::npos);
}

TEST_CASE("train: auto picks ddp for a small model and says so", "[train][zero]") {
  TempDir dir;
  std::vector<std::string> args{"launch", "--nproc", "2", "train"};
  for (auto& a : small_run(dir, "auto", 16, 1)) args.push_back(a);
  auto r = run_genesis(args, kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("strategy   ddp (auto) over shm, 2 ranks") != std::string::npos);
  CHECK(r.out.find("  auto       ddp's") != std::string::npos);
}

TEST_CASE("train: an unknown strategy is a config error", "[train][ddp]") {
  auto bad = run_genesis({"train", "--preset", "mlp", "--set", "distributed.strategy=zero4"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("distributed.strategy must be one of") != std::string::npos);
}

TEST_CASE("train: the gpt-tiny preset logs ddp's losses under every strategy", "[train][zero]") {
  TempDir dir;
  auto run = [&](const std::string& strategy, int nproc, const std::string& extra = "") {
    std::vector<std::string> args{"launch", "--nproc", std::to_string(nproc), "train",
                                  "--preset", "gpt-tiny", "-o", dir.path().string(),
                                  "--name", strategy + std::to_string(nproc),
                                  "--set", "data.num_samples=800",
                                  "--set", "training.per_device_train_batch_size=" + std::to_string(8 / nproc),
                                  "--set", "training.gradient_accumulation_steps=2",
                                  "--set", "training.max_steps=6", "--set", "training.logging_steps=1",
                                  "--set", "training.max_grad_norm=0.5",  // clipping active
                                  "--set", "training.eval_batches=2",
                                  "--set", "distributed.bucket_cap_mb=0.05",
                                  "--set", "distributed.strategy=" + strategy};
    if (!extra.empty()) args.insert(args.end(), {"--set", extra});
    auto r = run_genesis(args, kOneThread);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return metrics_of(dir, strategy + std::to_string(nproc));
  };
  const auto ddp2 = run("ddp", 2);
  for (const char* s : {"zero1", "zero2", "zero3"}) {
    INFO(s);
    require_same_curve(run(s, 2), ddp2);
  }
  require_same_curve(run("hsdp", 4, "distributed.hsdp_shard_size=2"), run("ddp", 4));
}

TEST_CASE("summary.json sets the measured peak beside the plan's estimate and --dry-run says it again",
          "[train][zero]") {
  TempDir dir;
  std::vector<std::string> args{"launch", "--nproc", "2", "train"};
  for (auto& a : small_run(dir, "zero3", 16, 2)) args.push_back(a);
  args.insert(args.end(), {"--set", "distributed.strategy=zero3"});
  auto r = run_genesis(args, kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir.path() / "zero3" / "summary.json");
  const json summary = json::parse(in);
  const double estimate = summary.at("memory_estimate_mb").get<double>();
  const auto tensors = summary.at("peak_host_tensor_mb_per_rank").get<std::vector<double>>();
  REQUIRE(tensors.size() == 2);
  // The plan counts the model state alone; the peak in tensors holds it and the activations.
  CHECK(estimate > 0);
  CHECK(tensors[0] >= estimate);
  CHECK(summary.at("peak_vs_estimate").get<double>() == Approx(std::max(tensors[0], tensors[1]) / estimate));

  std::vector<std::string> dry{"train", "--dry-run"};
  for (auto& a : small_run(dir, "zero3", 16, 2)) dry.push_back(a);
  auto d = run_genesis(dry, {{{"WORLD_SIZE", "2"}}, {}});
  INFO(d.out << d.err);
  REQUIRE(d.exit_code == 0);
  CHECK(d.out.find("last run   zero3 on 2 ranks peaked at ") != std::string::npos);
  CHECK(d.out.find(" MiB estimated for its state") != std::string::npos);
}
