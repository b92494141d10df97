// The preference algorithms (training.algorithm = "dpo" and "rm") and model.init_from as a user
// runs them: a DPO policy starts from a trained run (or its export) and is its own frozen
// reference, so the first step's loss is log 2; for both, 2 ranks under each strategy follow 1
// rank with the same global batch, bf16 and fp16 train from the same start, and a resumed run
// ends where an uninterrupted one does; a run that cannot be what it asks for stops with one
// line, exit 2, before writing anything.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"
#include "support/small_runs.hpp"

namespace genesis {
namespace {

using json = nlohmann::json;
using testing::CliResult;
using testing::run_genesis;
using testing::TempDir;
using testing::kOneThread;
using testing::make_init;
using testing::metrics_of;
using testing::small_model;
using testing::resume_from;
using testing::with;

// The preset `preset` ("dpo" or "rm") on the small model from `init`: `world` ranks of `batch`
// pairs each.
std::vector<std::string> preference(const std::string& preset, const TempDir& dir,
                                    const std::filesystem::path& init, const std::string& name,
                                    int world, int batch, const std::string& strategy,
                                    int steps = 6) {
  std::vector<std::string> args;
  if (world > 1) args = {"launch", "--nproc", std::to_string(world)};
  return with(with(args, {"train", "--preset", preset, "-o", dir.path().string(), "--name", name,
                          "--set", "model.init_from=\"" + init.string() + "\"", "--set",
                          "data.source=\"pairs:reverse,sort\"", "--set",
                          "training.max_steps=" + std::to_string(steps), "--set",
                          "training.logging_steps=1", "--set", "training.eval_steps=0", "--set",
                          "training.train_batch_size=" + std::to_string(world * batch), "--set",
                          "training.per_device_train_batch_size=" + std::to_string(batch),
                          "--set", "distributed.strategy=\"" + strategy + "\""}),
              small_model());
}

std::vector<std::string> dpo(const TempDir& dir, const std::filesystem::path& init,
                             const std::string& name, int world, int batch,
                             const std::string& strategy, int steps = 6) {
  return preference("dpo", dir, init, name, world, batch, strategy, steps);
}

// What a run of each preset logs that depends on every parameter.
const std::map<std::string, std::vector<const char*>> kCompared = {
    {"dpo", {"loss", "rewards/margins", "logps/chosen"}}, {"rm", {"loss", "margin", "accuracy"}}};

}  // namespace

TEST_CASE("dpo: starts at log 2 from its init", "[dpo]") {
  TempDir dir;
  const auto init = make_init(dir);
  const CliResult one = run_genesis(dpo(dir, init, "one", 1, 8, "ddp"), kOneThread);
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  CHECK(one.out.find("init from  " + (init / "checkpoints" / "step-20").string()) !=
        std::string::npos);
  const std::vector<json> want = metrics_of(dir.path() / "one");
  REQUIRE(want.size() == 6);
  CHECK(want.back()["loss"].get<double>() < want[0]["loss"].get<double>());
  for (const char* key : {"rewards/accuracies", "rewards/margins", "rewards/chosen",
                          "rewards/rejected", "logps/chosen", "logps/rejected"})
    CHECK(want.back().contains(key));
  // Six steps toward the chosen answers: most pairs already ranked right, by a positive margin,
  // and a sequence's log-probability is below 0 (a cut-short rejected one can be the likelier).
  CHECK(want.back()["rewards/accuracies"].get<double>() > 0.5);
  CHECK(want.back()["rewards/accuracies"].get<double>() <= 1.0);
  CHECK(want.back()["rewards/margins"].get<double>() > 0.0);
  CHECK(want.back()["logps/chosen"].get<double>() < 0.0);
  // The policy is its reference at the first step: every pair's margin is 0, and DPO's loss
  // alone (the preset adds the answers' likelihood, rpo_alpha) is log 2.
  auto pure = dpo(dir, init, "pure", 1, 8, "ddp", 1);
  for (const char* extra : {"--set", "dpo.rpo_alpha=0"}) pure.push_back(extra);
  REQUIRE(run_genesis(pure, kOneThread).exit_code == 0);
  CHECK(metrics_of(dir.path() / "pure")[0]["loss"].get<double>() ==
        Approx(std::log(2.0)).epsilon(1e-6));
  CHECK(metrics_of(dir.path() / "pure")[0]["rewards/margins"].get<double>() == 0.0);
}

TEST_CASE("dpo and rm: 2 ranks follow 1 rank under every strategy", "[dpo][rm]") {
  TempDir dir;
  const auto init = make_init(dir);
  // (run name, strategy, settings): each strategy, with offload, HSDP's replicas, gradient
  // checkpointing (beside the same strategy without it) and accumulation (2 ranks x 2
  // micro-batches of 2).
  struct Variant {
    const char* name;
    const char* strategy;
    std::vector<std::string> sets;
  };
  const std::vector<Variant> variants = {
      {"ddp", "ddp", {}},
      {"zero1", "zero1", {}},
      {"zero2", "zero2", {"distributed.offload_optimizer=\"cpu\""}},
      {"zero3", "zero3", {"distributed.offload_param=\"cpu\""}},
      {"zero3-plain", "zero3", {}},
      {"hsdp", "hsdp", {"distributed.hsdp_shard_size=1"}},
      {"checkpointing", "zero3", {"training.gradient_checkpointing=true"}},
      {"accumulation", "ddp", {"training.per_device_train_batch_size=2"}}};
  for (const auto& [preset, keys] : kCompared) {
    INFO(preset);
    const CliResult one = run_genesis(preference(preset, dir, init, preset + "-one", 1, 8, "ddp"),
                                      kOneThread);
    INFO(one.out << one.err);
    REQUIRE(one.exit_code == 0);
    const std::vector<json> want = metrics_of(dir.path() / (preset + "-one"));
    REQUIRE(want.size() == 6);
    for (const char* key : keys) CHECK(want.back()[key].get<double>() != 0.0);  // each is read
    std::map<std::string, double> peak_mb;  // rank 0's peak host memory in tensors, by variant
    for (const Variant& v : variants) {
      INFO(v.name);
      const std::string name = preset + "-" + v.name;
      auto args = preference(preset, dir, init, name, 2, 4, v.strategy);
      for (const std::string& set : v.sets) args.insert(args.end(), {"--set", set});
      const CliResult two = run_genesis(args, kOneThread);
      INFO(two.out << two.err);
      REQUIRE(two.exit_code == 0);
      const std::vector<json> got = metrics_of(dir.path() / name);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        for (const char* key : keys) {
          INFO("step " << i + 1 << " " << key);
          CHECK(got[i][key].get<double>() ==
                Approx(want[i][key].get<double>()).epsilon(1e-5).margin(1e-6));
        }
      std::ifstream summary(dir.path() / name / "summary.json");
      peak_mb[v.name] = json::parse(summary)["peak_host_tensor_mb_per_rank"][0].get<double>();
    }
    // Checkpointing did recompute: the block's activations were made again in backward instead
    // of kept, which moves the peak of host memory in tensors. DPO's is lower (the vocabulary's
    // log-probabilities no longer sit beside the block's activations: 1.77 MB against 2.12 when
    // written); the reward model's one block is its peak either way, made again in backward
    // beside the gradients, so its peak is a little higher (1.08 MB against 1.05).
    INFO("peak host tensor memory: " << peak_mb["checkpointing"] << " MB checkpointed, "
                                     << peak_mb["zero3-plain"] << " MB without");
    CHECK(peak_mb["checkpointing"] != peak_mb["zero3-plain"]);
    if (preset == "dpo") CHECK(peak_mb["checkpointing"] < 0.9 * peak_mb["zero3-plain"]);
  }
}

// Reduced precision: the same run follows fp32's losses to a few percent (a DPO policy and its
// reference round alike).
TEST_CASE("dpo and rm: bf16 and fp16 autocast follow fp32's losses", "[dpo][rm]") {
  TempDir dir;
  const auto init = make_init(dir);
  for (const auto& [preset, keys] : kCompared) {
    const std::string f32_name = preset + "-f32";
    REQUIRE(run_genesis(preference(preset, dir, init, f32_name, 1, 8, "ddp"), kOneThread)
                .exit_code == 0);
    const std::vector<json> f32 = metrics_of(dir.path() / f32_name);
    for (const char* precision : {"bf16", "fp16"}) {
      INFO(preset << ", " << precision);
      const std::string name = preset + "-" + precision;
      auto args = preference(preset, dir, init, name, 2, 4, "zero2");
      args.insert(args.end(),
                  {"--set", std::string("training.mixed_precision=\"") + precision + "\""});
      const CliResult r = run_genesis(args, kOneThread);
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      const std::vector<json> got = metrics_of(dir.path() / name);
      REQUIRE(got.size() == f32.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("step " << i + 1);
        CHECK(got[i]["loss"].get<double>() == Approx(f32[i]["loss"].get<double>()).epsilon(0.03));
      }
    }
  }
}

TEST_CASE("dpo and rm: a resumed run ends where an uninterrupted one does", "[dpo][rm]") {
  TempDir dir;
  const auto init = make_init(dir);
  for (const auto& [preset, keys] : kCompared) {
    INFO(preset);
    const std::string whole_name = preset + "-whole", resumed_name = preset + "-resumed";
    auto whole = preference(preset, dir, init, whole_name, 1, 8, "ddp", 8);
    for (const char* extra : {"--set", "training.save_steps=4"}) whole.push_back(extra);
    const CliResult a = run_genesis(whole, kOneThread);
    INFO(a.out << a.err);
    REQUIRE(a.exit_code == 0);
    // DPO's reference comes from model.init_from again; the policy from the checkpoint.
    const auto step4 = dir.path() / whole_name / "checkpoints" / "step-4";
    const CliResult b = run_genesis(
        with(preference(preset, dir, init, resumed_name, 1, 8, "ddp", 8), resume_from(step4)),
        kOneThread);
    INFO(b.out << b.err);
    REQUIRE(b.exit_code == 0);
    CHECK(b.out.find("resumed    from " + step4.string()) != std::string::npos);
    const std::vector<json> x = metrics_of(dir.path() / whole_name),
                            y = metrics_of(dir.path() / resumed_name);
    REQUIRE(x.size() == 8);
    REQUIRE(y.size() == 4);
    for (const char* key : keys) CHECK(x.back()[key] == y.back()[key]);
    const CliResult diff = run_genesis({"ckpt", "diff", (dir.path() / whole_name).string(),
                                        (dir.path() / resumed_name).string()});
    INFO(diff.out << diff.err);
    CHECK(diff.exit_code == 0);
  }
}

TEST_CASE("dpo: precomputed reference log-probabilities train as the held reference does",
          "[dpo]") {
  TempDir dir;
  const auto init = make_init(dir);
  const CliResult held = run_genesis(dpo(dir, init, "held", 2, 4, "zero3"), kOneThread);
  REQUIRE(held.exit_code == 0);
  auto args = dpo(dir, init, "pre", 2, 4, "zero3");
  for (const char* extra : {"--set", "dpo.precompute_ref_log_probs=true", "--set",
                            "training.save_steps=3"})
    args.push_back(extra);
  const CliResult pre = run_genesis(args, kOneThread);
  INFO(pre.out << pre.err);
  REQUIRE(pre.exit_code == 0);
  CHECK(pre.out.find("reference  ") == std::string::npos);  // no reference model held
  const auto file = dir.path() / "pre" / "reference_log_probs.safetensors";
  REQUIRE(std::filesystem::exists(file));
  const std::vector<json> a = metrics_of(dir.path() / "held"), b = metrics_of(dir.path() / "pre");
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    CHECK(b[i]["loss"].get<double>() == Approx(a[i]["loss"].get<double>()).epsilon(1e-5));

  // A resumed run reads them back (its policy is no longer the reference); without the file it
  // refuses rather than compute them from the trained policy.
  const auto step3 = dir.path() / "pre" / "checkpoints" / "step-3";
  const auto resume = with(args, resume_from(step3));
  const CliResult again = run_genesis(resume, kOneThread);
  INFO(again.out << again.err);
  CHECK(again.exit_code == 0);
  CHECK(metrics_of(dir.path() / "pre").back()["loss"] == b.back()["loss"]);
  std::filesystem::remove(file);
  const CliResult lost = run_genesis(resume, kOneThread);
  CHECK(lost.exit_code == 2);
  CHECK(lost.err.find("the resumed run has no") != std::string::npos);
}

// The reference is a second set of parameters under the same sharding; precomputed, it is none.
TEST_CASE("dpo: the memory plan counts the held reference", "[dpo]") {
  const auto plan = [](const char* precompute) {
    return run_genesis({"train", "--preset", "dpo", "--dry-run", "--set",
                        std::string("dpo.precompute_ref_log_probs=") + precompute},
                       {{{"WORLD_SIZE", "2"}}, {}});
  };
  const CliResult held = plan("false"), precomputed = plan("true");
  INFO(held.out << held.err << precomputed.out);
  REQUIRE(held.exit_code == 0);
  REQUIRE(precomputed.exit_code == 0);
  // 118144 parameters, f32: 462 KiB each (ddp's gradients view its buckets: one copy); zero3 on
  // 2 ranks holds half of each.
  CHECK(held.out.find("ddp           923 KiB      462 KiB") != std::string::npos);
  CHECK(precomputed.out.find("ddp           462 KiB      462 KiB") != std::string::npos);
  CHECK(held.out.find("zero3         462 KiB      231 KiB") != std::string::npos);
  CHECK(precomputed.out.find("zero3         231 KiB      231 KiB") != std::string::npos);
}

TEST_CASE("init_from: a reward model starts from an SFT run or its export, its head fresh",
          "[dpo]") {
  TempDir dir;
  const auto init = make_init(dir);
  const auto rm = [&](const std::string& name, const std::string& from) {
    return with({"train", "--preset", "rm", "-o", dir.path().string(), "--name", name, "--set",
                 "model.init_from=\"" + from + "\"", "--set", "training.max_steps=2", "--set",
                 "training.eval_steps=0"},
                small_model());
  };
  const CliResult from_run = run_genesis(rm("from-run", init.string()), kOneThread);
  INFO(from_run.out << from_run.err);
  REQUIRE(from_run.exit_code == 0);
  CHECK(from_run.out.find("score.weight initialised fresh") != std::string::npos);
  for (const char* format : {"genesis", "hf"}) {
    INFO(format);
    const auto file = dir.path() / format / "model.safetensors";
    const CliResult exported = run_genesis(
        {"ckpt", "export", init.string(), "-o", file.string(), "--format", format});
    INFO(exported.out << exported.err);
    REQUIRE(exported.exit_code == 0);
    const CliResult from_file = run_genesis(rm(std::string("from-") + format, file.string()), kOneThread);
    INFO(from_file.out << from_file.err);
    REQUIRE(from_file.exit_code == 0);
    // The same weights, so the same first loss as from the run.
    CHECK(metrics_of(dir.path() / (std::string("from-") + format))[0]["loss"] ==
          metrics_of(dir.path() / "from-run")[0]["loss"]);
  }
  // The reward model exports with its head in genesis's names (GPT-2's have none for it), and
  // starts another reward model with nothing fresh.
  const auto rm_file = dir.path() / "rm.safetensors";
  const CliResult rm_export =
      run_genesis({"ckpt", "export", (dir.path() / "from-run").string(), "-o", rm_file.string()});
  INFO(rm_export.out << rm_export.err);
  REQUIRE(rm_export.exit_code == 0);
  const CliResult hf = run_genesis({"ckpt", "export", (dir.path() / "from-run").string(), "-o",
                                    (dir.path() / "rm-hf.safetensors").string(), "--format", "hf"});
  CHECK(hf.exit_code == 2);
  CHECK(hf.err.find("has a value head (model.head = \"value\"): export it with --format genesis") !=
        std::string::npos);
  const CliResult again = run_genesis(rm("from-rm", rm_file.string()), kOneThread);
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(again.out.find("initialised fresh") == std::string::npos);
}

TEST_CASE("dpo and init_from refuse what they cannot train, in one line, before writing",
          "[dpo]") {
  TempDir dir;
  const auto init = make_init(dir);
  const auto refused = [&](std::vector<std::string> args, const std::string& message) {
    const CliResult r = run_genesis(args, kOneThread);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "dpo"));
  };
  refused(with({"train", "--preset", "dpo", "-o", dir.path().string(), "--set",
                "model.init_from=\"\""},
               small_model()),
          "model.init_from is empty: training.algorithm = \"dpo\" improves a trained policy");
  // A model of another width than the run it starts from.
  auto wider = dpo(dir, init, "dpo", 1, 8, "ddp");
  for (const char* extra : {"--set", "model.n_embd=64"}) wider.push_back(extra);
  refused(wider, "tensor 'wte.weight' is [258, 32] there and [258, 64] in this model");
  refused(dpo(dir, dir.path() / "nothing-here", "dpo", 1, 8, "ddp"),
          "model.init_from = \"" + (dir.path() / "nothing-here").string() +
              "\": there is no such run, checkpoint or file");
  // The preset's own init names the command that makes it.
  refused(with({"train", "--preset", "dpo", "-o", dir.path().string(), "--set",
                "model.init_from=\"" + (dir.path() / "sft").string() + "\""},
               small_model()),
          "there is no such run, checkpoint or file; `genesis launch --nproc 2 train --preset "
          "sft` makes runs/sft");
  // Pairs from a file: an empty chosen, and a prompt longer than block_size.
  const auto pairs = dir.path() / "pairs.jsonl";
  for (const auto& [line, message] :
       std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "a", "chosen": "", "rejected": "b"})", "the chosen response is empty"},
           {R"({"prompt": ")" + std::string(40, 'x') + R"(", "chosen": "a", "rejected": "b"})",
            "block_size"}}) {
    std::ofstream out(pairs);
    out << line << "\n";
    for (int i = 0; i < 60; ++i) out << R"({"prompt": "a", "chosen": "b", "rejected": "c"})" << "\n";
    out.close();
    auto args = dpo(dir, init, "dpo", 1, 8, "ddp");
    for (const std::string& extra :
         {std::string("--set"), "data.source=\"jsonl:" + pairs.string() + "\""})
      args.push_back(extra);
    refused(args, message);
  }
}

}  // namespace genesis
