// Training on a GPU. Everywhere: what training.device = "cuda" and backend "nccl" say when they
// cannot run. Tagged [cuda], on a GPU only (skipped elsewhere): the SFT preset
// trained on CUDA follows the CPU run's loss curve in fp32 to 1e-4, a bf16 run learns and
// reports MFU and peak GPU memory, and 2 ranks over NCCL sharing the one GPU (distinct
// NCCL_HOSTID) follow the 1-rank GPU run with the same global batch under DDP, ZeRO-1/2/3 and
// ZeRO-3 with the optimizer offloaded to the host (whose state is found on the host, and whose
// peak device memory is lower for it), and a GPU run resumed from a checkpoint ends with the same
// bytes as the run that never stopped.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "genesis/tensor/device.hpp"
#include "support/cli_run.hpp"
#include "support/gpu_required.hpp"
#include "train/resume_support.hpp"

using namespace genesis;
using nlohmann::json;

namespace {

std::vector<json> read_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// The logged training losses of a run, by step.
std::map<std::int64_t, double> losses(const std::filesystem::path& run) {
  std::map<std::int64_t, double> out;
  for (const json& line : read_lines(run / "metrics.jsonl"))
    if (line.contains("loss")) out[line["step"].get<std::int64_t>()] = line["loss"].get<double>();
  return out;
}

// A short SFT run: 40 steps, a loss logged every 5.
std::vector<std::string> sft_args(const std::filesystem::path& out, const std::string& name,
                                  const std::string& device) {
  return {"train", "--preset", "sft", "-o", out.string(), "--name", name,
          "--set", "training.max_steps=40", "--set", "training.logging_steps=5",
          "--set", "training.eval_steps=0", "--set", "training.eval_batches=1",
          "--set", "training.device=" + device};
}

testing::CliResult run(const std::vector<std::string>& args) {
  testing::CliResult r = testing::run_genesis(args, {{{"OMP_NUM_THREADS", "2"}}, {}});
  UNSCOPED_INFO("genesis " << args.front() << " exited " << r.exit_code << "\nstdout: " << r.out
                           << "\nstderr: " << r.err);
  return r;
}

bool gpu_visible() { return cuda_device_count() > 0; }

}  // namespace

TEST_CASE("training.device = cuda trains on a GPU and is refused clearly without one",
          "[train][cli]") {
  testing::TempDir dir;
  testing::CliResult r = run(sft_args(dir.path(), "gpu", "cuda"));
  if (gpu_visible()) {
    REQUIRE(r.exit_code == 0);
    CHECK(read_json(dir.path() / "gpu" / "summary.json")["device"] == "cuda:0");
  } else {
    REQUIRE(r.exit_code == 1);
    CHECK(r.err.find("training.device = \"cuda\"") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "gpu" / "checkpoints"));
  }
}

TEST_CASE("backend nccl on a CPU run is a config error naming the fix", "[train][cli]") {
  testing::TempDir dir;
  testing::CliResult r = run({"train", "--preset", "mlp", "-o", dir.path().string(), "--set",
                              "training.device=cpu", "--set", "distributed.backend=nccl"});
  REQUIRE(r.exit_code == 2);
  CHECK(r.err.find("distributed.backend = \"nccl\" reduces GPU tensors") != std::string::npos);
}

TEST_CASE("the SFT preset on CUDA follows the CPU loss curve in fp32", "[cuda][train]") {
  if (testing::skip_without_gpu("CPU-vs-CUDA training")) return;
  testing::TempDir dir;
  REQUIRE(run(sft_args(dir.path(), "cpu", "cpu")).exit_code == 0);
  REQUIRE(run(sft_args(dir.path(), "cuda", "cuda")).exit_code == 0);
  const auto cpu = losses(dir.path() / "cpu"), gpu = losses(dir.path() / "cuda");
  REQUIRE(cpu.size() == 8);
  REQUIRE(gpu.size() == cpu.size());
  for (const auto& [step, loss] : cpu) {
    INFO("step " << step << ": cpu " << loss << " cuda " << gpu.at(step));
    CHECK(std::abs(gpu.at(step) - loss) <= 1e-4);
  }
  const json summary = read_json(dir.path() / "cuda" / "summary.json");
  CHECK(summary["device"] == "cuda:0");
  CHECK(summary["peak_device_memory_mb_per_rank"][0].get<double>() > 0);
}

TEST_CASE("a bf16 GPU run learns and reports MFU and peak memory", "[cuda][train]") {
  if (testing::skip_without_gpu("bf16 GPU training")) return;
  testing::TempDir dir;
  std::vector<std::string> args = sft_args(dir.path(), "bf16", "cuda");
  args.insert(args.end(), {"--set", "training.mixed_precision=bf16"});
  testing::CliResult r = run(args);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("gpu: peak memory") != std::string::npos);
  const auto curve = losses(dir.path() / "bf16");
  CHECK(curve.rbegin()->second < curve.begin()->second);
  const json summary = read_json(dir.path() / "bf16" / "summary.json");
  CHECK(summary.contains("mfu"));
  CHECK(summary["device_name"].get<std::string>().size() > 0);
}

TEST_CASE("2 ranks over NCCL follow the 1-rank GPU run under every strategy",
          "[cuda][cuda_ranks][train]") {
  if (testing::skip_without_gpu("NCCL training")) return;
  testing::TempDir dir;
  // One rank with batch 2B, two with B each: the same examples per step.
  std::vector<std::string> one = sft_args(dir.path(), "one", "cuda");
  one.insert(one.end(), {"--set", "training.per_device_train_batch_size=32"});
  REQUIRE(run(one).exit_code == 0);
  const auto reference = losses(dir.path() / "one");
  // ZeRO-3 with its optimizer offloaded to the host covers the CPU offload path.
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"ddp", "none"}, {"zero1", "none"}, {"zero2", "none"}, {"zero3", "none"}, {"zero3", "cpu"}};
  std::map<std::string, double> peak_mb;  // rank 0's peak device memory, by run
  for (const auto& [strategy, offload] : runs) {
    const std::string name = strategy + "-" + offload;
    std::string two = std::string(GENESIS_TEST_BIN);
    for (const std::string& a : sft_args(dir.path(), name, "cuda")) two += " '" + a + "'";
    two += " --set training.per_device_train_batch_size=16 --set distributed.strategy=" +
           strategy + " --set distributed.offload_optimizer=" + offload;
    REQUIRE(run({"launch", "--nproc", "2", "--", "sh", "-c", "NCCL_HOSTID=h$RANK exec " + two})
                .exit_code == 0);
    const json summary = read_json(dir.path() / name / "summary.json");
    CHECK(summary["backend"] == "nccl");
    CHECK(summary["strategy"] == strategy);
    // The report reads where each tensor is: the offloaded optimizer state, and nothing else, is
    // found in host memory.
    const json& memory = summary["memory_per_rank_bytes"];
    INFO(name << ": " << memory.dump());
    CHECK(memory["optimizer_state"].get<std::int64_t>() > 0);
    CHECK(memory["offloaded_to_host"].get<std::int64_t>() ==
          (offload == "cpu" ? memory["optimizer_state"].get<std::int64_t>() : 0));
    peak_mb[name] = summary["peak_device_memory_mb_per_rank"][0].get<double>();
    const auto curve = losses(dir.path() / name);
    REQUIRE(curve.size() == reference.size());
    for (const auto& [step, loss] : reference) {
      INFO(name << " step " << step << ": 1 rank " << loss << ", 2 ranks " << curve.at(step));
      CHECK(std::abs(curve.at(step) - loss) <= 1e-4);
    }
  }
  // The state that left the device is not in its peak (the device allocator's own count).
  INFO("peak device memory: zero3 " << peak_mb["zero3-none"] << " MB, offloaded "
                                    << peak_mb["zero3-cpu"] << " MB");
  CHECK(peak_mb["zero3-cpu"] < peak_mb["zero3-none"]);
}

TEST_CASE("a GPU run resumed from step 6 ends bit for bit as the run that never stopped",
          "[cuda][train]") {
  if (testing::skip_without_gpu("GPU resume")) return;
  namespace fs = std::filesystem;
  testing::TempDir dir;
  std::vector<std::string> args = sft_args(dir.path(), "whole", "cuda");
  args.insert(args.end(), {"--set", "training.max_steps=12", "--set", "training.save_steps=6",
                           "--set", "training.logging_steps=1"});
  REQUIRE(run(args).exit_code == 0);
  const fs::path whole = dir.path() / "whole";
  const fs::path copy = dir.path() / "step-6";
  fs::copy(whole / "checkpoints" / "step-6", copy, fs::copy_options::recursive);

  std::vector<std::string> resumed = args;
  resumed[std::find(resumed.begin(), resumed.end(), "--name") - resumed.begin() + 1] = "resumed";
  resumed.insert(resumed.end(), {"--set", "training.resume_from_checkpoint=" + copy.string()});
  REQUIRE(run(resumed).exit_code == 0);
  // Every shard file of step 12 (weights, optimizer state, RNG) holds the same bytes.
  const auto a = testing::resume::rank_files(testing::resume::checkpoint_of(whole, 12));
  const auto b = testing::resume::rank_files(testing::resume::checkpoint_of(dir.path() / "resumed", 12));
  REQUIRE_FALSE(a.empty());
  REQUIRE(a.size() == b.size());
  for (const auto& [name, bytes] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    CHECK(b.at(name) == bytes);
  }
  const auto loss_a = losses(whole), loss_b = losses(dir.path() / "resumed");
  for (std::int64_t step = 7; step <= 12; ++step) {
    INFO("step " << step);
    CHECK(loss_b.at(step) == loss_a.at(step));
  }
}
