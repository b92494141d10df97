// LoRA as users run it: adapters trained on a Hugging Face checkpoint (written by the independent
// reference, tests/golden/hf_reference.py), checkpoints that hold the adapters only and resume
// bit-exactly, zero3 equal to ddp, and an export in PEFT's layout that the reference (its own
// reader and LoRA math, written from PEFT's documentation) applies to the base to get genesis's
// log-probs. Bad settings fail before training with one line.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/hf_test_model.hpp"

namespace fs = std::filesystem;
using genesis::testing::CliResult;
using genesis::testing::Need;
using genesis::testing::run_genesis;
using genesis::testing::run_process;
using genesis::testing::skip_test;
using genesis::testing::TempDir;
using Json = nlohmann::json;

namespace {

const genesis::testing::RunOptions kOneThread{{{"OMP_NUM_THREADS", "1"}}, {}};

CliResult reference(std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/python3", genesis::testing::hf_reference_script()});
  return run_process(args);
}

// A tiny checkpoint the reference makes in `model`; false where PyTorch is missing.
bool make_model(const fs::path& model, std::vector<std::string> options) {
  options.insert(options.begin(), {"make", "--out", model.string()});
  const CliResult made = reference(options);
  if (made.exit_code == 3) return false;
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  return true;
}

// A few steps of LoRA on all linear layers of dir/model, in dir/runs/<name>, on 2 ranks.
CliResult train_lora(const fs::path& dir, const std::string& name, const std::string& strategy,
                     int steps, std::vector<std::string> more = {}) {
  std::vector<std::string> args{
      "launch", "--nproc", "2", "train", "-o", (dir / "runs").string(), "--name", name,
      "--set", "model.init_from=" + (dir / "model").string(),
      "--set", "data.source=\"synthetic:tokens\"", "--set", "data.num_samples=64",
      "--set", "model.block_size=32", "--set", "lora.r=4", "--set", "lora.lora_alpha=16",
      "--set", "lora.target_modules=\"all-linear\"", "--set", "training.learning_rate=0.01",
      "--set", "training.lr_scheduler_type=\"constant\"", "--set", "training.warmup_steps=0",
      "--set", "training.per_device_train_batch_size=2", "--set", "training.save_steps=2",
      "--set", "training.eval_batches=1", "--set", "training.max_steps=" + std::to_string(steps),
      "--set", "distributed.strategy=\"" + strategy + "\""};
  args.insert(args.end(), more.begin(), more.end());
  return run_genesis(args, kOneThread);
}

double eval_loss(const fs::path& run) {
  std::ifstream in(run / "summary.json");
  return Json::parse(in).at("eval_loss").get<double>();
}

std::vector<double> logprobs(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  std::getline(in, line);
  return Json::parse(line).at("logprobs").get<std::vector<double>>();
}

void check_close(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t t = 0; t < a.size(); ++t) CHECK(std::abs(a[t] - b[t]) < 1e-3);
}

}  // namespace

TEST_CASE("LoRA adapters train under ddp and zero3 alike and export in PEFT's layout",
          "[train][hf][lora]") {
  TempDir dir;
  if (!make_model((dir.path() / "model").string(), {"--family",
                                    "llama", "--untied", "--seed", "5"}))
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");

  const CliResult ddp = train_lora(dir.path(), "ddp", "ddp", 4);
  INFO(ddp.out << ddp.err);
  REQUIRE(ddp.exit_code == 0);
  CHECK(ddp.out.find("trainable params: ") != std::string::npos);
  const CliResult zero3 = train_lora(dir.path(), "zero3", "zero3", 4);
  INFO(zero3.out << zero3.err);
  REQUIRE(zero3.exit_code == 0);
  const fs::path runs = dir.path() / "runs";
  const std::string step4 = "checkpoints/step-4";

  // The checkpoint holds the adapters only, and zero3's are ddp's.
  const CliResult info = run_genesis({"ckpt", "info", (runs / "ddp").string()});
  REQUIRE(info.exit_code == 0);
  CHECK(info.out.find("lora_A.weight") != std::string::npos);
  CHECK(info.out.find("embed_tokens") == std::string::npos);
  CHECK(info.out.find("q_proj.weight ") == std::string::npos);
  CHECK(info.out.find("holds       LoRA adapters over " + (dir.path() / "model").string()) !=
        std::string::npos);
  const CliResult listed = run_genesis({"ckpt", "ls", (runs / "ddp").string()});
  CHECK(listed.out.find("latest; LoRA adapters") != std::string::npos);
  const CliResult verified = run_genesis({"ckpt", "verify", (runs / "ddp").string()});
  CHECK(verified.exit_code == 0);
  CHECK(verified.out.find("; LoRA adapters over ") != std::string::npos);
  // Resharded to one rank, the adapters are the same and still say what they are.
  const fs::path one = dir.path() / "one-rank";
  REQUIRE(run_genesis({"ckpt", "reshard", (runs / "ddp").string(), "--world-size", "1", "-o",
                       one.string()}).exit_code == 0);
  CHECK(run_genesis({"ckpt", "info", one.string()}).out.find("LoRA adapters over") !=
        std::string::npos);
  CHECK(run_genesis({"ckpt", "diff", (runs / "ddp" / step4).string(), one.string()})
            .out.find("identical") != std::string::npos);
  const CliResult same = run_genesis({"ckpt", "diff", (runs / "ddp" / step4).string(),
                                      (runs / "zero3" / step4).string()});
  INFO(same.out << same.err);
  CHECK(same.out.find("identical") != std::string::npos);

  // Stopped at step 2 and resumed, the run ends on the same bytes.
  REQUIRE(train_lora(dir.path(), "resumed", "ddp", 2).exit_code == 0);
  const CliResult resumed = train_lora(dir.path(), "resumed", "ddp", 4, {"--resume", "auto"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const CliResult exact = run_genesis({"ckpt", "diff", (runs / "ddp" / step4).string(),
                                       (runs / "resumed" / step4).string()});
  INFO(exact.out);
  CHECK(exact.out.find("identical") != std::string::npos);

  // The export reads as PEFT's, and the reference applies it to the base to get genesis's
  // log-probs, which the adapters moved away from the base's.
  const fs::path adapter = dir.path() / "adapter";
  const CliResult exported = run_genesis({"ckpt", "export", (runs / "ddp").string(), "-o", adapter.string()});
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);
  const CliResult checked =
      reference({"check-adapter", "--adapter", adapter.string(), "--model", (dir.path() / "model").string()});
  INFO(checked.out << checked.err);
  CHECK(checked.exit_code == 0);
  const fs::path ids = dir.path() / "ids.jsonl";
  std::ofstream(ids) << "{\"ids\": [1, 5, 9, 33, 2, 7, 100, 200, 3, 17, 250]}\n";
  const CliResult ours = run_genesis({"score", (runs / "ddp").string(), "-i", ids.string(), "--device", "cpu"});
  const CliResult ours_adapter = run_genesis({"score", (dir.path() / "model").string(), "--adapter",
                                              adapter.string(), "-i", ids.string(), "--device", "cpu"});
  const CliResult theirs = reference({"logprobs", "--model", (dir.path() / "model").string(),
                                      "--adapter", adapter.string(), "--input", ids.string()});
  const CliResult base = reference({"logprobs", "--model", (dir.path() / "model").string(),
                                    "--input", ids.string()});
  INFO(ours.err << ours_adapter.err << theirs.err);
  REQUIRE((ours.exit_code == 0 && ours_adapter.exit_code == 0 && theirs.exit_code == 0 &&
           base.exit_code == 0));
  check_close(logprobs(ours.out), logprobs(theirs.out));
  check_close(logprobs(ours_adapter.out), logprobs(theirs.out));
  // --merge folds the adapters into the base: the reference reads it as a plain model.
  const fs::path merged = dir.path() / "merged";
  REQUIRE(run_genesis({"ckpt", "export", (runs / "ddp").string(), "-o", merged.string(), "--merge"})
              .exit_code == 0);
  const CliResult merged_theirs =
      reference({"logprobs", "--model", merged.string(), "--input", ids.string()});
  REQUIRE(merged_theirs.exit_code == 0);
  check_close(logprobs(merged_theirs.out), logprobs(theirs.out));

  // lora.init_from starts from that adapter: a step that moves nothing keeps its log-probs; an
  // adapter of another rank is refused before training.
  const CliResult from = train_lora(dir.path(), "from", "ddp", 1,
                                    {"--set", "lora.init_from=" + adapter.string(), "--set",
                                     "training.learning_rate=1e-12"});
  INFO(from.out << from.err);
  REQUIRE(from.exit_code == 0);
  CHECK(from.out.find("adapters from " + adapter.string()) != std::string::npos);
  const CliResult again = run_genesis({"score", (runs / "from").string(), "-i", ids.string(),
                                       "--device", "cpu"});
  REQUIRE(again.exit_code == 0);
  check_close(logprobs(again.out), logprobs(theirs.out));
  const CliResult other = train_lora(dir.path(), "other", "ddp", 1,
                                     {"--set", "lora.init_from=" + adapter.string(), "--set",
                                      "lora.r=8"});
  CHECK(other.exit_code == 2);
  CHECK(other.err.find("is an adapter of r = 4") != std::string::npos);
  const auto trained = logprobs(theirs.out), untouched = logprobs(base.out);
  double moved = 0;
  for (std::size_t t = 0; t < trained.size(); ++t) moved = std::max(moved, std::abs(trained[t] - untouched[t]));
  CHECK(moved > 1e-2);
}

TEST_CASE("an adapter the reference made scores the same in genesis, rsLoRA included",
          "[train][hf][lora]") {
  TempDir dir;
  const fs::path model = dir.path() / "model", adapter = dir.path() / "adapter";
  if (!make_model(model.string(), {"--family", "qwen3", "--tied"}))
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to score");
  REQUIRE(reference({"make-adapter", "--model", model.string(), "--out", adapter.string(), "--r",
                     "4", "--alpha", "8", "--targets", "q_proj,v_proj,down_proj", "--rslora"})
              .exit_code == 0);
  const fs::path ids = dir.path() / "ids.jsonl";
  std::ofstream(ids) << "{\"ids\": [4, 8, 15, 16, 23, 42, 108, 7]}\n";
  const CliResult ours = run_genesis({"score", model.string(), "--adapter", adapter.string(), "-i",
                                      ids.string(), "--device", "cpu"});
  const CliResult theirs = reference({"logprobs", "--model", model.string(), "--adapter",
                                      adapter.string(), "--input", ids.string()});
  INFO(ours.err << theirs.err);
  REQUIRE((ours.exit_code == 0 && theirs.exit_code == 0));
  check_close(logprobs(ours.out), logprobs(theirs.out));
}

TEST_CASE("bad LoRA settings fail before training with one line", "[train][lora]") {
  TempDir dir;
  const auto run = [&](std::vector<std::string> sets) {
    std::vector<std::string> args{"train", "--preset", "gpt-tiny", "-o", (dir.path() / "runs").string(),
                                  "--set", "training.max_steps=1"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    return run_genesis(args);
  };
  const CliResult no_module = run({"lora.r=4", "lora.target_modules=[\"q_proj\"]"});
  CHECK(no_module.exit_code != 0);
  CHECK(no_module.err.find("\"q_proj\" names no linear layer") != std::string::npos);
  CHECK(no_module.err.find("c_attn") != std::string::npos);  // what the model has instead
  const CliResult negative = run({"lora.r=-1"});
  CHECK(negative.exit_code == 2);
  CHECK(negative.err.find("lora.r") != std::string::npos);
  const CliResult no_rank = run({"lora.lora_alpha=16"});
  CHECK(no_rank.exit_code == 2);
  CHECK(no_rank.err.find("lora.lora_alpha = 16") != std::string::npos);
  CHECK(no_rank.err.find("lora.r = 0 means no adapters") != std::string::npos);
  CHECK(!fs::exists(dir.path() / "runs" / "run" / "checkpoints"));
}

// Adapters that do not fit are refused in one line before anything is scored or trained, by
// genesis as by the reference's reader (peft_adapter.py, from PEFT's source): one made for a base
// of another width, one for a base of more layers, another PEFT method, a tensor outside PEFT's
// names, a truncated weights file; and, to start training from, one of other target_modules.
TEST_CASE("adapters that do not fit the model are refused by genesis as by the reference",
          "[train][hf][lora]") {
  TempDir dir;
  const fs::path model = dir.path() / "model", wide = dir.path() / "wide",
                 deep = dir.path() / "deep";
  if (!make_model(model, {"--family", "llama", "--untied", "--seed", "5"}))
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to read");
  make_model(wide, {"--family", "llama", "--untied", "--hidden", "32"});
  make_model(deep, {"--family", "llama", "--untied", "--layers", "3"});
  const auto adapter_of = [&](const fs::path& base, const std::string& name) {
    const fs::path out = dir.path() / name;
    REQUIRE(reference({"make-adapter", "--model", base.string(), "--out", out.string(), "--r", "4",
                       "--alpha", "8", "--targets", "q_proj,v_proj"})
                .exit_code == 0);
    return out;
  };
  const fs::path good = adapter_of(model, "good");
  // A copy of the good adapter with one change made by `change` (a Python statement over `d`,
  // its directory, with the reference's safetensors reader and writer at hand).
  const auto mutated = [&](const std::string& name, const std::string& change) {
    const fs::path out = dir.path() / name;
    fs::copy(good, out);
    const std::string golden = fs::path(genesis::testing::hf_reference_script()).parent_path();
    REQUIRE(run_process({"/usr/bin/python3", "-c",
                         "import json, sys; sys.path.insert(0, '" + golden + "'); "
                         "from hf_checkpoint import read_safetensors, write_safetensors; "
                         "d = '" + out.string() + "'; " + change})
                .exit_code == 0);
    return out;
  };
  const fs::path ids = dir.path() / "ids.jsonl";
  std::ofstream(ids) << "{\"ids\": [5, 6, 7]}\n";
  // Exit 2 for an adapter that does not fit, 1 for a damaged file (an I/O error, as for a
  // damaged checkpoint); the reference reads the damaged file no better.
  const auto refused = [&](const fs::path& adapter, const std::string& words, int exit_code = 2) {
    const CliResult ours = run_genesis(
        {"score", model.string(), "--adapter", adapter.string(), "-i", ids.string()});
    const CliResult theirs = reference({"check-adapter", "--adapter", adapter.string(), "--model",
                                        model.string()});
    INFO(adapter.filename() << "\n" << ours.out << ours.err << theirs.out << theirs.err);
    CHECK(ours.exit_code == exit_code);
    CHECK(ours.out.empty());
    CHECK(std::count(ours.err.begin(), ours.err.end(), '\n') == 1);
    CHECK(ours.err.find(words) != std::string::npos);
    CHECK(theirs.exit_code == (exit_code == 2 ? 2 : 1));
  };
  REQUIRE(reference({"check-adapter", "--adapter", good.string(), "--model", model.string()})
              .exit_code == 0);
  refused(adapter_of(wide, "wide-adapter"), "(an adapter of another base?)");
  refused(adapter_of(deep, "deep-adapter"), "has no place in this model");
  refused(mutated("ia3", "c = json.load(open(d + '/adapter_config.json')); "
                         "c['peft_type'] = 'IA3'; json.dump(c, open(d + '/adapter_config.json', 'w'))"),
          "peft_type is \"IA3\"");
  refused(mutated("unprefixed",
                  "t = read_safetensors(d + '/adapter_model.safetensors'); "
                  "k = sorted(t)[0]; t[k[len('base_model.model.'):]] = t.pop(k); "
                  "write_safetensors(d + '/adapter_model.safetensors', t)"),
          "is not named under \"base_model.model.\"");
  refused(mutated("truncated", "f = d + '/adapter_model.safetensors'; "
                               "b = open(f, 'rb').read(); open(f, 'wb').write(b[:len(b) // 2])"),
          "out of bounds", 1);
  // Training from an adapter of q_proj and v_proj with lora.target_modules = all-linear.
  const CliResult other_targets = run_genesis(
      {"train", "-o", (dir.path() / "runs").string(), "--set",
       "model.init_from=" + model.string(), "--set", "data.source=\"synthetic:tokens\"",
       "--set", "lora.r=4", "--set", "lora.target_modules=all-linear", "--set",
       "lora.init_from=" + good.string()});
  CHECK(other_targets.exit_code == 2);
  CHECK(other_targets.err.find("(other target_modules?)") != std::string::npos);
  CHECK(!fs::exists(dir.path() / "runs" / "run" / "metrics.jsonl"));
}

// A few steps of LoRA on all linear layers of `model` by one objective, in dir/runs/<name>.
CliResult train_objective(const fs::path& dir, const fs::path& model, const std::string& name,
                          const std::vector<std::string>& sets) {
  std::vector<std::string> args{"train", "--preset", "sft", "-o", (dir / "runs").string(),
                                "--name", name};
  for (const std::string& s :
       {"model.init_from=" + model.string(), std::string("data.num_samples=200"),
        std::string("training.max_steps=3"), std::string("training.per_device_train_batch_size=4"),
        std::string("training.eval_batches=1"), std::string("lora.r=4"),
        std::string("lora.target_modules=all-linear")})
    args.insert(args.end(), {"--set", s});
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  return run_genesis(args, kOneThread);
}

// The first training step's loss in a run's metrics.jsonl.
double first_loss(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
    if (j.contains("loss")) return j.at("loss").get<double>();
  }
  FAIL("no loss in " << (run / "metrics.jsonl"));
  return 0;
}

TEST_CASE("LoRA trains by rm, dpo, grpo and ppo, with the policy without adapters as reference",
          "[train][hf][lora]") {
  TempDir dir;
  const fs::path model = dir.path() / "model";
  if (!make_model(model.string(), {"--family", "qwen3", "--tied",
                                    "--seed", "3"}))
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");
  const fs::path ids = dir.path() / "ids.jsonl";
  std::ofstream(ids) << "{\"ids\": [104, 101, 108, 108, 111, 32, 119, 111, 114]}\n";
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"rm", {"training.algorithm=rm", "data.source=pairs:reverse,sort"}},
      {"dpo", {"training.algorithm=dpo", "data.source=pairs:reverse,sort"}},
      {"grpo", {"training.algorithm=grpo", "grpo.num_generations=2", "grpo.beta=0.04",
                "reward.functions=[\"exact:1.0\"]"}},
      {"ppo", {"training.algorithm=ppo", "reward.functions=[\"exact:1.0\"]"}},
      // A critic model of its own: adapters on its layers too, its value head in full.
      {"ppo-critic", {"training.algorithm=ppo", "ppo.critic=model",
                      "reward.functions=[\"exact:1.0\"]"}},
  };
  for (const auto& [name, sets] : runs) {
    const CliResult r = train_objective(dir.path(), model, name, sets);
    INFO(name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    if (name != "rm")
      CHECK(r.out.find("reference  the policy with its adapters off") != std::string::npos);
    // The checkpoint holds the adapters and the value heads that train in full, nothing else.
    const CliResult info = run_genesis({"ckpt", "info", (dir.path() / "runs" / name).string()});
    std::istringstream lines(info.out);
    int model_tensors = 0, critic_adapters = 0;
    for (std::string line; std::getline(lines, line);) {
      const auto at = line.find("model.");
      if (line.rfind("  model.", 0) != 0) continue;
      ++model_tensors;
      const std::string tensor = line.substr(at, line.find(' ', at) - at);
      INFO(tensor);
      CHECK((tensor.find(".lora_") != std::string::npos || tensor == "model.score.weight" ||
             tensor == "model.critic.score.weight" || tensor.rfind("model.v_head.", 0) == 0));
      if (tensor.rfind("model.critic.", 0) == 0 && tensor.find(".lora_") != std::string::npos)
        ++critic_adapters;
    }
    CHECK(model_tensors > 0);
    CHECK((critic_adapters > 0) == (name == "ppo-critic"));
    if (name == "rm") {
      // Merged, the reward model is the family's *ForSequenceClassification: the reference's
      // score of it is genesis's score of the run, and genesis reads the merged directory alike.
      const fs::path merged = dir.path() / "merged-rm";
      const CliResult merge = run_genesis({"ckpt", "export", (dir.path() / "runs" / name).string(),
                                           "-o", merged.string(), "--merge"});
      INFO(merge.out << merge.err);
      REQUIRE(merge.exit_code == 0);
      const CliResult ours = run_genesis({"score", (dir.path() / "runs" / name).string(), "-i",
                                          ids.string(), "--device", "cpu"});
      const CliResult ours_merged =
          run_genesis({"score", merged.string(), "-i", ids.string(), "--device", "cpu"});
      const CliResult theirs =
          reference({"score", "--model", merged.string(), "--input", ids.string()});
      INFO(ours.err << ours_merged.err << theirs.err);
      REQUIRE((ours.exit_code == 0 && ours_merged.exit_code == 0 && theirs.exit_code == 0));
      const auto score = [](const std::string& out) {
        return Json::parse(out.substr(0, out.find('\n'))).at("score").get<std::vector<double>>();
      };
      REQUIRE(score(theirs.out).size() == 1);
      CHECK(std::abs(score(ours.out).at(0) - score(theirs.out)[0]) < 1e-3);
      CHECK(std::abs(score(ours_merged.out).at(0) - score(theirs.out)[0]) < 1e-3);
      CHECK(run_genesis({"generate", merged.string(), "-i", ids.string()}).err.find(
                "is a reward model") != std::string::npos);
      continue;
    }
    // The run scores as the reference applies its exported adapter to the untouched base.
    const fs::path adapter = dir.path() / ("adapter-" + name);
    REQUIRE(run_genesis({"ckpt", "export", (dir.path() / "runs" / name).string(), "-o",
                         adapter.string()}).exit_code == 0);
    const CliResult ours = run_genesis({"score", (dir.path() / "runs" / name).string(), "-i",
                                        ids.string(), "--device", "cpu"});
    const CliResult theirs = reference({"logprobs", "--model", model.string(), "--adapter",
                                        adapter.string(), "--input", ids.string()});
    INFO(ours.err << theirs.err);
    REQUIRE((ours.exit_code == 0 && theirs.exit_code == 0));
    check_close(logprobs(ours.out), logprobs(theirs.out));
  }

  // From a starting adapter (A and B random), dpo's reference is the policy with a frozen copy of
  // it: the first step's policy is its reference, so the loss is ln 2, which the base without
  // adapters as reference would not give.
  const fs::path start = dir.path() / "start";
  REQUIRE(reference({"make-adapter", "--model", model.string(), "--out", start.string(), "--r",
                     "4", "--alpha", "8", "--targets", "all-linear", "--seed", "7"})
              .exit_code == 0);
  const CliResult from = train_objective(
      dir.path(), model, "dpo-from",
      {"training.algorithm=dpo", "data.source=pairs:reverse,sort", "training.max_steps=1",
       "lora.init_from=" + start.string()});
  INFO(from.out << from.err);
  REQUIRE(from.exit_code == 0);
  CHECK(from.out.find("reference  the policy with its starting adapters") != std::string::npos);
  CHECK(std::abs(first_loss(dir.path() / "runs" / "dpo-from") - std::log(2.0)) < 1e-5);
  // A module of the logits trained in full would need a starting copy too: refused up front.
  const CliResult full = train_objective(
      dir.path(), model, "dpo-embed",
      {"training.algorithm=dpo", "data.source=pairs:reverse,sort",
       "lora.modules_to_save=[\"embed_tokens\"]"});
  CHECK(full.exit_code != 0);
  CHECK_THAT(full.err, Catch::Contains("lora.modules_to_save = \"embed_tokens\" with "
                                       "training.algorithm = \"dpo\" is not supported yet"));
}

TEST_CASE("LoRA over a base stored in bf16 trains as over the f32 base and under bf16 autocast",
          "[train][hf][lora]") {
  TempDir dir;
  if (!make_model((dir.path() / "model").string(), {"--family",
                                    "llama", "--untied", "--seed", "5"}))
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");
  std::vector<double> eval_losses;
  for (const std::string dtype : {"f32", "bf16"}) {
    const CliResult r = train_lora(dir.path(), dtype, "ddp", 2, {"--set", "lora.base_dtype=" + dtype});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    eval_losses.push_back(eval_loss(dir.path() / "runs" / dtype));
  }
  CHECK(eval_losses[0] != eval_losses[1]);  // the stored weights are rounded ...
  CHECK(std::abs(eval_losses[0] - eval_losses[1]) < 1e-2);  // ... and nothing else changes
  // bf16 autocast over the bf16 base: the products in bf16 too, the curve the same to a few 1e-3.
  const CliResult autocast =
      train_lora(dir.path(), "autocast", "ddp", 2,
                 {"--set", "lora.base_dtype=bf16", "--set", "training.mixed_precision=\"bf16\""});
  INFO(autocast.out << autocast.err);
  REQUIRE(autocast.exit_code == 0);
  const double bf16 = eval_loss(dir.path() / "runs" / "autocast");
  CHECK(bf16 != eval_losses[1]);
  CHECK(std::abs(bf16 - eval_losses[0]) < 2e-2);

  // MFU's FLOPs: 6 a token for each trained parameter, 4 for each frozen one (no weight gradient),
  // against full fine-tuning's 6 for all; the attention term is the same.
  const CliResult full = run_genesis(
      {"train", "-o", (dir.path() / "runs").string(), "--name", "full", "--set",
       "model.init_from=" + (dir.path() / "model").string(), "--set",
       "data.source=\"synthetic:tokens\"", "--set", "data.num_samples=64", "--set",
       "model.block_size=32", "--set", "training.max_steps=3", "--set",
       "training.per_device_train_batch_size=2"},
      kOneThread);
  REQUIRE(full.exit_code == 0);
  const auto summary = [&](const std::string& name) {
    std::ifstream in(dir.path() / "runs" / name / "summary.json");
    return Json::parse(in);
  };
  const auto flops_per_token = [](const Json& s) {
    return s.at("flops_per_s").get<double>() / s.at("tokens_per_s").get<double>();
  };
  const Json lora = summary("f32"), whole = summary("full");
  const double frozen = whole.at("num_parameters").get<double>();
  const double trained = lora.at("num_parameters").get<double>() - frozen;
  CHECK(trained > 0);
  CHECK(flops_per_token(lora) - flops_per_token(whole) ==
        Approx(6 * trained - 2 * frozen).epsilon(1e-6));
}

// With lora_dropout: checkpointing's recompute draws the forward's masks again.
TEST_CASE("LoRA trains the same under zero1, zero2, hsdp, offload and checkpointing",
          "[train][hf][lora][multiproc]") {
  TempDir dir;
  if (!make_model((dir.path() / "model").string(), {"--family",
                                    "llama", "--untied", "--seed", "5"}))
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");
  const std::vector<std::vector<std::string>> variants = {
      {"--set", "distributed.strategy=\"ddp\""},
      {"--set", "distributed.strategy=\"zero1\""},
      {"--set", "distributed.strategy=\"zero2\"", "--set", "distributed.offload_optimizer=\"cpu\""},
      {"--set", "distributed.strategy=\"hsdp\"", "--set", "distributed.hsdp_shard_size=1"},
      {"--set", "distributed.strategy=\"zero3\"", "--set", "distributed.offload_param=\"cpu\"",
       "--set", "training.gradient_checkpointing=true"},
  };
  std::vector<double> eval_losses;
  int i = 0;
  for (const auto& more : variants) {
    const std::string name = "v" + std::to_string(i++);
    std::vector<std::string> sets = more;
    sets.insert(sets.end(), {"--set", "lora.lora_dropout=0.1"});
    const CliResult r = train_lora(dir.path(), name, "ddp", 2, sets);
    INFO(more[1] << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    eval_losses.push_back(eval_loss(dir.path() / "runs" / name));
  }
  for (const double loss : eval_losses) CHECK(std::abs(loss - eval_losses[0]) < 1e-4);
}

TEST_CASE("GPT-2's Conv1D layers take LoRA as PEFT's fan_in_fan_out: adapter and merge",
          "[train][hf][lora]") {
  TempDir dir;
  const fs::path model = dir.path() / "model";
  if (!make_model(model.string(), {"--family", "gpt2", "--tied"}))
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");
  const CliResult trained = run_genesis(
      {"train", "-o", (dir.path() / "runs").string(), "--name", "g", "--set",
       "model.init_from=" + model.string(), "--set", "data.source=synthetic:tokens", "--set",
       "model.block_size=32", "--set", "data.num_samples=64", "--set", "lora.r=4", "--set",
       "lora.target_modules=all-linear", "--set", "training.learning_rate=0.02", "--set",
       "training.max_steps=3", "--set", "training.eval_batches=1"},
      kOneThread);
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  const fs::path run = dir.path() / "runs" / "g", adapter = dir.path() / "adapter",
                 merged = dir.path() / "merged", ids = dir.path() / "ids.jsonl";
  REQUIRE(run_genesis({"ckpt", "export", run.string(), "-o", adapter.string()}).exit_code == 0);
  REQUIRE(run_genesis({"ckpt", "export", run.string(), "-o", merged.string(), "--merge"})
              .exit_code == 0);
  std::ifstream config_in(adapter / "adapter_config.json");
  CHECK(Json::parse(config_in).at("fan_in_fan_out") == true);
  std::ofstream(ids) << "{\"ids\": [3, 1, 4, 1, 5, 9, 2, 6, 5, 35]}\n";
  const CliResult ours = run_genesis({"score", run.string(), "-i", ids.string(), "--device", "cpu"});
  const CliResult theirs = reference({"logprobs", "--model", model.string(), "--adapter",
                                      adapter.string(), "--input", ids.string()});
  const CliResult merged_theirs =
      reference({"logprobs", "--model", merged.string(), "--input", ids.string()});
  INFO(ours.err << theirs.err << merged_theirs.err);
  REQUIRE((ours.exit_code == 0 && theirs.exit_code == 0 && merged_theirs.exit_code == 0));
  check_close(logprobs(ours.out), logprobs(theirs.out));
  check_close(logprobs(merged_theirs.out), logprobs(theirs.out));
}
