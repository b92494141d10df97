// Hugging Face checkpoints of every family, as a user meets them: tiny random checkpoints in
// transformers' exact layout (sharded, BF16, tied and untied, grouped-query, a sliding window
// shorter than the text), written and scored by an independent PyTorch implementation that
// follows the model cards (tests/golden/hf_reference.py); `genesis score` must give its
// log-probabilities within 1e-3 and `genesis generate` its greedy tokens.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"

namespace fs = std::filesystem;
using genesis::testing::CliResult;
using genesis::testing::Need;
using genesis::testing::run_genesis;
using genesis::testing::run_process;
using genesis::testing::skip_test;
using genesis::testing::TempDir;
using Json = nlohmann::json;

namespace {

const std::string kReference =
    std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/golden/hf_reference.py";

// Runs the reference; false when torch is missing (exit code 3), which the caller reports.
bool reference(const std::vector<std::string>& args, CliResult& result) {
  std::vector<std::string> argv{"/usr/bin/python3", kReference};
  argv.insert(argv.end(), args.begin(), args.end());
  result = run_process(argv);
  if (result.exit_code == 3) return false;
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  return true;
}

std::vector<Json> json_lines(const std::string& text) {
  std::vector<Json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(Json::parse(line));
  return lines;
}

// Prompts of three lengths (left padding in a batch, a window shorter than the longest).
fs::path write_ids(const fs::path& dir) {
  const fs::path file = dir / "ids.jsonl";
  std::ofstream out(file);
  std::uint64_t x = 12345;
  for (int length : {23, 9, 16}) {
    Json ids = Json::array();
    for (int i = 0; i < length; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      ids.push_back(static_cast<std::int64_t>((x >> 33) % 300) + 3);
    }
    out << Json{{"ids", ids}}.dump() << "\n";
  }
  return file;
}

struct Family {
  const char* what;
  std::vector<std::string> make;
};

const Family kFamilies[] = {
    {"llama, untied, grouped-query", {"--family", "llama", "--kv-heads", "2"}},
    {"llama 3.x, tied, llama3 rope scaling, one kv head",
     {"--family", "llama", "--tied", "--kv-heads", "1", "--rope-scaling", "llama3"}},
    {"mistral, a sliding window shorter than the text", {"--family", "mistral", "--window", "6"}},
    {"qwen2, q/k/v biases, windows from layer 1 on",
     {"--family", "qwen2", "--window", "5", "--max-window-layers", "1"}},
    {"qwen3, bf16 in three shards, q/k norms, head_dim apart",
     {"--family", "qwen3", "--dtype", "bfloat16", "--shards", "3"}},
    {"gpt2 as save_pretrained writes it", {"--family", "gpt2"}},
};

void check_family(const Family& family) {
  TempDir dir;
  const fs::path model = dir.path() / "model";
  std::vector<std::string> make{"make", "--out", model.string(), "--seed", "7"};
  make.insert(make.end(), family.make.begin(), family.make.end());
  CliResult made;
  if (!reference(make, made)) {
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no reference to compare");
  }
  const fs::path ids = write_ids(dir.path());

  CliResult expected;
  REQUIRE(reference({"logprobs", "--model", model.string(), "--input", ids.string()}, expected));
  const CliResult scored =
      run_genesis({"score", model.string(), "--input", ids.string(), "--device", "cpu"});
  INFO(scored.err);
  REQUIRE(scored.exit_code == 0);
  const std::vector<Json> want = json_lines(expected.out), got = json_lines(scored.out);
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto a = want[i].at("logprobs").get<std::vector<double>>();
    const auto b = got[i].at("logprobs").get<std::vector<double>>();
    REQUIRE(a.size() == b.size());
    for (std::size_t t = 0; t < a.size(); ++t) worst = std::max(worst, std::abs(a[t] - b[t]));
  }
  INFO(family.what << ": largest |log-prob difference| " << worst);
  CHECK(worst < 1e-3);

  CliResult greedy;
  REQUIRE(reference(
      {"generate", "--model", model.string(), "--input", ids.string(), "--max-new-tokens", "12"},
      greedy));
  const CliResult generated = run_genesis({"generate", model.string(), "--input", ids.string(),
                                           "--max-new-tokens", "12", "--device", "cpu"});
  INFO(generated.err);
  REQUIRE(generated.exit_code == 0);
  const std::vector<Json> want_ids = json_lines(greedy.out), got_ids = json_lines(generated.out);
  REQUIRE(got_ids.size() == want_ids.size());
  for (std::size_t i = 0; i < want_ids.size(); ++i)
    CHECK(got_ids[i].at("ids") == want_ids[i].at("ids"));
}

}  // namespace

TEST_CASE("genesis score and generate agree with an independent implementation of each family",
          "[nn][hf]") {
  for (const Family& family : kFamilies) {
    DYNAMIC_SECTION(family.what) { check_family(family); }
  }
}

TEST_CASE("a line genesis score cannot process gets an error line in its place, the rest go on",
          "[nn][hf]") {
  TempDir dir;
  const fs::path model = dir.path() / "model";
  CliResult made;
  if (!reference({"make", "--out", model.string(), "--family", "llama"}, made)) {
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to read");
  }
  const fs::path input = dir.path() / "lines.jsonl";
  std::ofstream(input) << "{\"ids\": [5, 6, 7]}\nnot json\n{\"ids\": [5, 99999]}\n"
                          "{\"text\": \"needs a tokenizer\"}\n{\"ids\": [8, 9]}\n";
  const CliResult r =
      run_genesis({"score", model.string(), "-i", input.string(), "--device", "cpu"});
  CHECK(r.exit_code == 1);
  const std::vector<Json> lines = json_lines(r.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0].at("logprobs").size() == 2);
  CHECK(lines[1].contains("error"));
  CHECK(lines[2].at("error").get<std::string>().find("99999") != std::string::npos);
  CHECK(lines[3].at("error").get<std::string>().find("tokenizer") != std::string::npos);
  CHECK(lines[4].at("logprobs").size() == 1);
  CHECK(r.err.find("line 2") != std::string::npos);
  CHECK(r.err.find("line 3") != std::string::npos);
}

// A reward model as transformers stores one: genesis score reads its score head where
// *ForSequenceClassification does, at the last token that is not pad_token_id (0 here), and
// generate refuses it.
TEST_CASE("genesis score of a ForSequenceClassification model is the reference's reward",
          "[nn][hf]") {
  TempDir dir;
  const fs::path model = dir.path() / "model";
  CliResult made;
  if (!reference({"make", "--out", model.string(), "--family", "qwen3", "--sequence-classification",
                  "--num-labels", "1", "--seed", "4"},
                 made)) {
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to read");
  }
  const fs::path input = dir.path() / "lines.jsonl";
  std::ofstream(input) << "{\"ids\": [5, 9, 22, 7]}\n{\"ids\": [5, 9, 0, 0]}\n";
  CliResult expected;
  REQUIRE(reference({"score", "--model", model.string(), "--input", input.string()}, expected));
  const CliResult r =
      run_genesis({"score", model.string(), "-i", input.string(), "--device", "cpu"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<Json> ours = json_lines(r.out), theirs = json_lines(expected.out);
  REQUIRE(ours.size() == 2);
  REQUIRE(theirs.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    REQUIRE(ours[i].at("score").size() == 1);
    CHECK(std::abs(ours[i].at("score")[0].get<double>() - theirs[i].at("score")[0].get<double>()) <
          1e-4);
  }
  const CliResult generate = run_genesis({"generate", model.string(), "-i", input.string()});
  CHECK(generate.exit_code == 2);
  CHECK(generate.err.find("is a reward model") != std::string::npos);
}

namespace {

// One line on stderr, the exit status given, and `words` in it.
void check_refused(const CliResult& r, int exit_code, const std::string& words) {
  INFO(r.out << r.err);
  CHECK(r.exit_code == exit_code);
  CHECK(r.err.find(words) != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

void edit_config(const fs::path& dir, const std::function<void(Json&)>& change) {
  std::ifstream in(dir / "config.json");
  Json config = Json::parse(in);
  in.close();
  change(config);
  std::ofstream(dir / "config.json") << config.dump(2);
}

}  // namespace

TEST_CASE("a checkpoint or config genesis cannot use is refused in one line naming what is wrong",
          "[nn][hf]") {
  TempDir dir;
  const fs::path good = dir.path() / "good";
  CliResult made;
  if (!reference({"make", "--out", good.string(), "--family", "qwen3", "--shards", "2"}, made)) {
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to break");
  }
  const fs::path ids = write_ids(dir.path());
  auto broken = [&](const std::string& name) {
    const fs::path copy = dir.path() / name;
    fs::copy(good, copy, fs::copy_options::recursive);
    return copy;
  };
  auto score = [&](const fs::path& model) {
    return run_genesis({"score", model.string(), "-i", ids.string(), "--device", "cpu"});
  };
  auto train = [&](const std::vector<std::string>& sets) {
    std::vector<std::string> args{"train", "--preset", "sft", "--dry-run"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    return run_genesis(args);
  };

  const fs::path falcon = broken("falcon");
  edit_config(falcon, [](Json& c) { c["model_type"] = "falcon"; });
  check_refused(score(falcon), 2, "model_type = \"falcon\" is not supported");

  const fs::path yarn = broken("yarn");
  edit_config(yarn, [](Json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
  check_refused(train({"model.init_from=" + yarn.string()}), 2, "\"yarn\" is not supported");

  const fs::path narrow = broken("narrow");
  edit_config(narrow, [](Json& c) { c["intermediate_size"] = 96; });
  check_refused(score(narrow), 2, "this model's is [96, 64]");

  const fs::path truncated = broken("truncated");
  const fs::path shard = truncated / "model-00002-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 100);
  check_refused(score(truncated), 2, "model-00002-of-00002.safetensors");

  const fs::path missing = broken("missing");
  fs::remove(missing / "model-00001-of-00002.safetensors");
  check_refused(score(missing), 2, "model-00001-of-00002.safetensors");

  check_refused(run_genesis({"score", "nobody/no-such-model", "-i", ids.string()},
                            {{{"HF_HUB_CACHE", dir.path().string()}}, {}}),
                2, "huggingface-cli download nobody/no-such-model");
  check_refused(train({"model.init_from=" + good.string(), "model.n_layer=3"}), 2,
                "model.n_layer: gpt settings beside a Hugging Face model");
}
