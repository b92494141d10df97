// `genesis ckpt` end to end, run as a user runs it: ls, info, verify, export, reshard and diff on a
// 2-rank checkpoint whose tensors are split across the ranks (tests/ckpt/ckpt_fixture.hpp),
// checking the printed figures, the exit codes, one-line errors that leave files untouched,
// and the exports through independent numpy readers (a GPT-2 forward written the Hugging Face
// way among them).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ckpt/ckpt_fixture.hpp"
#include "genesis/ckpt/inspect.hpp"
#include "support/cli_run.hpp"
#include "support/setting_text.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::lines_of;
using testing::run_genesis;
using testing::run_process;

const std::string kPython = "/usr/bin/python3";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string script(const std::string& name) {
  return std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/ckpt/" + name;
}

// Whitespace-separated words of a line.
std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

double sum_of(const Tensor& t) {
  double s = 0;
  for (float v : t.to(DType::f32).to_vector()) s += v;
  return s;
}

// A run with two 2-rank checkpoints (steps 20 and 40, different weights) and a leftover
// .tmp-step-60 from an interrupted save.
struct Run {
  testing::TempDir tmp;
  fs::path dir = tmp.path() / "run";
  std::map<std::string, Tensor> state20 = testing::fixture_state(1, 20);
  std::map<std::string, Tensor> state40 = testing::fixture_state(2, 40);
  fs::path step20, step40;

  Run() {
    step20 = testing::save_fixture(dir, state20, 20, 2.5);
    step40 = testing::save_fixture(dir, state40, 40, 1.25);
    fs::create_directories(dir / "checkpoints" / ".tmp-step-60");
  }
  std::size_t model_tensors() const {
    std::size_t n = 0;
    for (const auto& [name, t] : state40) n += name.starts_with("model.");
    return n;
  }
};

// A one-line error on stderr, nothing on stdout.
void check_one_line_error(const testing::CliResult& r, int exit_code, const std::string& needle) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == exit_code);
  CHECK(r.out.empty());
  CHECK(lines_of(r.err).size() == 1);
  CHECK(r.err.find(needle) != std::string::npos);
}

TEST_CASE("genesis ckpt ls lists committed checkpoints, the latest, and ignored leftovers", "[ckpt-cli]") {
  Run run;
  const auto r = run_genesis({"ckpt", "ls", run.dir.string()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "checkpoints in " + (run.dir / "checkpoints").string());
  CHECK(words_of(lines[1]) ==
        std::vector<std::string>{"step", "created", "(UTC)", "size", "world", "strategy", "loss"});
  for (auto [line, step, loss, latest] : {std::tuple{lines[2], 20, "2.5000", false},
                                          std::tuple{lines[3], 40, "1.2500", true}}) {
    const ckpt::Manifest m = ckpt::read_manifest(run.dir / "checkpoints" / ("step-" + std::to_string(step)));
    std::vector<std::string> expected = {std::to_string(step), m.created};
    for (const auto& w : words_of(ckpt::size_text(m.total_bytes()))) expected.push_back(w);
    expected.insert(expected.end(), {"2", "zero2", loss});
    if (latest) expected.push_back("latest");
    CHECK(words_of(line) == expected);
  }
  CHECK(lines[4] == "ignored: .tmp-step-60 (an interrupted save; never loaded, removed at the next save)");

  // The checkpoints/ directory itself means the same run; `list` is `ls`.
  CHECK(run_genesis({"ckpt", "ls", (run.dir / "checkpoints").string()}).out == r.out);
  CHECK(run_genesis({"ckpt", "list", run.dir.string()}).out == r.out);

  const auto j = run_genesis({"ckpt", "ls", run.dir.string(), "--json"});
  REQUIRE(j.exit_code == 0);
  const json listing = json::parse(j.out);
  CHECK(listing["latest"] == "step-40");
  CHECK(listing["ignored"] == json::array({".tmp-step-60"}));
  REQUIRE(listing["checkpoints"].size() == 2);
  const json& last = listing["checkpoints"][1];
  CHECK(last["step"] == 40);
  CHECK(last["latest"] == true);
  CHECK(last["world_size"] == 2);
  CHECK(last["loss"].get<double>() == 1.25);
  CHECK(last["bytes"].get<std::int64_t>() == ckpt::read_manifest(run.step40).total_bytes());
  CHECK(listing["checkpoints"][0]["latest"] == false);

  check_one_line_error(run_genesis({"ckpt", "ls", run.step40.string()}), 2, "genesis ckpt info");
  check_one_line_error(run_genesis({"ckpt", "ls", (run.dir / "nope").string()}), 1, "does not exist");
  // A mistyped step is answered with the steps there are.
  const fs::path mistyped = run.dir / "checkpoints" / "step-4";
  check_one_line_error(run_genesis({"ckpt", "info", mistyped.string()}), 1,
                       "'" + mistyped.string() + "' does not exist; " +
                           (run.dir / "checkpoints").string() + " holds step-20, step-40");
  // The output directory holding the run: no checkpoints of its own, and the run named.
  const auto parent = run_genesis({"ckpt", "ls", run.dir.parent_path().string()});
  CHECK(parent.exit_code == 0);
  CHECK(parent.out == "no checkpoints in " + run.dir.parent_path().string() +
                          "\nruns in it with checkpoints (genesis ckpt ls RUN):\n  " +
                          run.dir.string() + "\n");
  // "latest" alone, as if it were the word for a run's newest checkpoint.
  check_one_line_error(run_genesis({"ckpt", "info", "latest"}, {{}, run.dir}), 1,
                       "'latest' does not exist (a run's newest checkpoint: give the run "
                       "directory, or --resume auto)");
}

TEST_CASE("genesis ckpt ls shows what an interrupted delete left as incomplete until the next save",
          "[ckpt-cli]") {
  Run run;
  const fs::path root = run.dir / "checkpoints";
  const auto clean = lines_of(run_genesis({"ckpt", "ls", run.dir.string()}).out);
  REQUIRE(clean.size() == 5);
  // A kill while pruning: step-10 deleted in place lost its manifest first (what an older genesis
  // left), .del-step-15 was renamed for deletion and half removed.
  for (const char* name : {"step-10", ".del-step-15"}) {
    fs::create_directory(root / name);
    fs::copy_file(run.step20 / "rank-00001.safetensors", root / name / "rank-00001.safetensors");
  }
  const auto r = run_genesis({"ckpt", "ls", run.dir.string()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 7);
  CHECK(words_of(lines[2]) == words_of("10  incomplete: no manifest (an interrupted save or delete); it "
                                       "is removed at the next save"));
  CHECK(lines[3] == clean[2]);  // the rows of steps 20 and 40, as wide as without the note
  CHECK(lines[4] == clean[3]);
  CHECK(lines[5] == "ignored: .del-step-15 (an interrupted delete; never loaded, removed at the next save)");
  CHECK(lines[6] == "ignored: .tmp-step-60 (an interrupted save; never loaded, removed at the next save)");

  const json listing = json::parse(run_genesis({"ckpt", "ls", run.dir.string(), "--json"}).out);
  REQUIRE(listing["checkpoints"].size() == 3);
  CHECK(listing["checkpoints"][0]["step"] == 10);
  CHECK(listing["checkpoints"][0]["incomplete"] == true);
  CHECK(listing["checkpoints"][1]["incomplete"] == false);
  CHECK(listing["ignored"] == json::array({".del-step-15", ".tmp-step-60"}));
  // Neither is a checkpoint to the other tools.
  check_one_line_error(run_genesis({"ckpt", "info", (root / "step-10").string()}), 1, "no manifest.json");

  // The next save (by the rank that prunes) removes both, and the listing is clean again.
  testing::save_fixture(run.dir, run.state40, 60, 1.0);
  CHECK_FALSE(fs::exists(root / "step-10"));
  CHECK_FALSE(fs::exists(root / ".del-step-15"));
  const auto after = run_genesis({"ckpt", "ls", run.dir.string()});
  REQUIRE(after.exit_code == 0);
  CHECK(after.out.find("incomplete") == std::string::npos);
  CHECK(after.out.find("ignored") == std::string::npos);
  CHECK(lines_of(after.out).size() == 5);  // header, steps 20, 40 and 60
}

TEST_CASE("genesis ckpt info shows the facts, the files and every tensor's sharding", "[ckpt-cli]") {
  Run run;
  const auto r = run_genesis({"ckpt", "info", run.dir.string()});  // the run: its latest
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(run_genesis({"ckpt", "inspect", run.dir.string()}).out == r.out);  // an alias
  const auto lines = lines_of(r.out);
  auto line_of = [&](const std::string& head) {
    for (const auto& l : lines)
      if (l.rfind(head, 0) == 0) return words_of(l.substr(head.size()));
    return std::vector<std::string>{"<no line " + head + ">"};
  };
  CHECK(line_of("checkpoint ") == std::vector<std::string>{run.step40.string()});
  CHECK(line_of("step ") == std::vector<std::string>{"40"});
  CHECK(line_of("world size ") == std::vector<std::string>{"2"});
  CHECK(line_of("strategy ") == std::vector<std::string>{"zero2"});
  CHECK(line_of("run name ") == std::vector<std::string>{"ckpt-fixture"});
  CHECK(line_of("loss ") == std::vector<std::string>{"1.2500"});
  CHECK(line_of("  rank-00001.safetensors ").at(0) == "rank");

  // The fixture's layout: tensor i whole on rank i % 2 when i % 3 == 0, else split in halves.
  int i = 0;
  for (const auto& [name, t] : run.state40) {
    const std::int64_t n = t.numel(), half = n / 2;
    const std::string sharding =
        (i % 3 == 0 || n < 2) ? "whole, rank " + std::to_string(i % 2)
                              : "2 pieces: rank 0 [0, " + std::to_string(half) + "), rank 1 [" +
                                    std::to_string(half) + ", " + std::to_string(n) + ")";
    ++i;
    const std::string dtype = t.dtype() == DType::i64 ? "I64" : "F32";
    std::string found;
    for (const auto& l : lines)
      if (l.rfind("  " + name + " ", 0) == 0) found = l;
    INFO(name);
    CHECK(found.find("  " + shape_str(t.shape()) + " ") != std::string::npos);
    CHECK(found.find(" " + dtype + "  ") != std::string::npos);
    CHECK(found.ends_with("  " + sharding));
  }

  const auto j = run_genesis({"ckpt", "info", run.step20.string(), "--json"});
  REQUIRE(j.exit_code == 0);
  const json info = json::parse(j.out);
  CHECK(info["step"] == 20);
  CHECK(info["run_name"] == "ckpt-fixture");
  CHECK(info["files"].size() == 2);
  CHECK(info["tensors"].size() == run.state20.size());
  CHECK(info["info"]["loss"].get<double>() == 2.5);
}

// Flips one byte in the middle of the data of `key` in a safetensors file.
void flip_byte_of(const fs::path& file, const std::string& key) {
  std::string blob = read_text(file);
  std::uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  const json header = json::parse(blob.substr(8, n));
  const auto begin = header[key]["data_offsets"][0].get<std::size_t>();
  const auto end = header[key]["data_offsets"][1].get<std::size_t>();
  blob[8 + n + (begin + end) / 2] ^= 0x10;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << blob;
}

TEST_CASE("genesis ckpt verify passes a sound checkpoint and names a damaged file", "[ckpt-cli]") {
  Run run;
  const ckpt::Manifest m = ckpt::read_manifest(run.step40);
  const auto ok = run_genesis({"ckpt", "verify", run.step40.string()});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out == "ok: step-40: 2 files, " + std::to_string(run.state40.size()) + " tensors, " +
                      ckpt::size_text(m.total_bytes()) + ", every checksum matches\n");

  // Damage a tensor that rank 1 saved whole, and one rank-0 tensor stays readable.
  std::string damaged, intact;
  for (const auto& [name, entry] : m.tensors) {
    if (entry.shards.size() != 1) continue;
    if (entry.shards[0].file == "rank-00001.safetensors" && damaged.empty()) damaged = name;
    if (entry.shards[0].file == "rank-00000.safetensors" && intact.empty()) intact = name;
  }
  REQUIRE_FALSE(damaged.empty());
  REQUIRE_FALSE(intact.empty());
  flip_byte_of(run.step40 / "rank-00001.safetensors", damaged);

  check_one_line_error(run_genesis({"ckpt", "verify", run.step40.string()}), 1,
                       "rank-00001.safetensors");
  const ckpt::Checkpoint checkpoint(run.step40);
  CHECK_THROWS_AS(checkpoint.read_full(damaged), IoError);
  CHECK_THROWS_WITH(checkpoint.read_full(damaged), Catch::Contains("rank-00001.safetensors") &&
                                                       Catch::Contains("checksum"));
  CHECK(sum_of(checkpoint.read_full(intact)) == sum_of(run.state40.at(intact)));
  // The other checkpoint of the run is untouched.
  CHECK(run_genesis({"ckpt", "verify", run.step20.string()}).exit_code == 0);
}

TEST_CASE("genesis ckpt: bad paths and existing outputs are one-line errors that write nothing", "[ckpt-cli]") {
  Run run;
  const fs::path empty = run.tmp.path() / "empty";
  fs::create_directories(empty);
  for (const char* command : {"info", "verify"})
    check_one_line_error(run_genesis({"ckpt", command, empty.string()}), 1, "is not a checkpoint");
  check_one_line_error(
      run_genesis({"ckpt", "export", empty.string(), "-o", (run.tmp.path() / "x.safetensors").string()}),
      1, "is not a checkpoint");
  CHECK_FALSE(fs::exists(run.tmp.path() / "x.safetensors"));
  // diff keeps 1 for "they differ", so a bad path is 2.
  check_one_line_error(run_genesis({"ckpt", "diff", empty.string(), run.step40.string()}), 2,
                       "is not a checkpoint");

  SECTION("a truncated manifest") {
    const fs::path copy = run.dir / "checkpoints" / "step-60";
    fs::copy(run.step40, copy, fs::copy_options::recursive);
    const std::string text = read_text(copy / "manifest.json");
    std::ofstream(copy / "manifest.json", std::ios::trunc) << text.substr(0, text.size() / 2);
    check_one_line_error(run_genesis({"ckpt", "verify", copy.string()}), 1, "not valid JSON");
    check_one_line_error(run_genesis({"ckpt", "info", copy.string()}), 1, "manifest.json");
    const auto ls = run_genesis({"ckpt", "ls", run.dir.string()});
    CHECK(ls.exit_code == 0);
    CHECK(ls.out.find("  60  damaged: ") != std::string::npos);
  }
  SECTION("export never replaces a file without --force") {
    const fs::path out = run.tmp.path() / "out";
    fs::create_directories(out);
    const auto target = run.tmp.write("out/model.safetensors", "precious");
    check_one_line_error(run_genesis({"ckpt", "export", run.dir.string(), "-o", target.string()}), 2,
                         "--force");
    CHECK(read_text(target) == "precious");
    CHECK_FALSE(fs::exists(out / "config.json"));

    // hf writes config.json too: an existing one blocks the export before anything is written.
    fs::remove(target);
    run.tmp.write("out/config.json", "{}");
    check_one_line_error(run_genesis({"ckpt", "export", run.dir.string(), "-o", target.string()}), 2,
                         "config.json");
    CHECK_FALSE(fs::exists(target));
    CHECK(read_text(out / "config.json") == "{}");
    CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 1);

    const auto forced = run_genesis({"ckpt", "export", run.dir.string(), "-o", target.string(), "--force"});
    CHECK(forced.exit_code == 0);
    CHECK(read_text(out / "config.json") != "{}");
  }
  SECTION("reshard never writes into an existing directory") {
    const fs::path out = run.tmp.path() / "resharded";
    fs::create_directories(out);
    run.tmp.write("resharded/notes.txt", "mine");
    check_one_line_error(
        run_genesis({"ckpt", "reshard", run.dir.string(), "--world-size", "3", "-o", out.string()}), 2,
        "already exists");
    CHECK(read_text(out / "notes.txt") == "mine");
    CHECK(std::distance(fs::directory_iterator(out), fs::directory_iterator()) == 1);
  }
}

// Runs a Python helper and returns its stdout parsed as JSON.
json run_python(const std::vector<std::string>& args) {
  REQUIRE(fs::exists(kPython));
  std::vector<std::string> argv = {kPython};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_process(argv);
  INFO("python stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

TEST_CASE("genesis ckpt export consolidates split tensors, an independent reader sees them whole", "[ckpt-cli]") {
  Run run;
  const fs::path out = run.tmp.path() / "export" / "weights.safetensors";
  const auto r = run_genesis({"ckpt", "export", run.dir.string(), "-o", out.string(), "--format", "genesis"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.rfind("wrote " + out.string() + ": " + std::to_string(run.model_tensors()) +
                        " tensors (genesis names)", 0) == 0);
  CHECK_FALSE(fs::exists(out.parent_path() / "config.json"));
  CHECK(std::distance(fs::directory_iterator(out.parent_path()), fs::directory_iterator()) == 1);

  const json read = run_python({script("read_export.py"), out.string()});
  CHECK(read["metadata"]["format"] == "pt");
  std::map<std::string, json> by_name;
  for (const json& t : read["tensors"]) by_name[t["name"].get<std::string>()] = t;
  CHECK(by_name.size() == run.model_tensors());
  for (const auto& [name, t] : run.state40) {
    if (!name.starts_with("model.")) continue;
    INFO(name);
    REQUIRE(by_name.count(name.substr(6)) == 1);
    const json& e = by_name[name.substr(6)];
    CHECK(e["dtype"] == "F32");
    CHECK(e["shape"].get<Shape>() == t.shape());
    CHECK(e["sum"].get<double>() == Approx(sum_of(t)).margin(1e-9));
  }
}

TEST_CASE("genesis ckpt export --format hf: a numpy GPT-2 forward on it matches genesis's GPT", "[ckpt-cli]") {
  Run run;
  const fs::path dir = run.tmp.path() / "hf";
  const auto r = run_genesis({"ckpt", "export", run.dir.string(), "-o", (dir / "model.safetensors").string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("(hf names)") != std::string::npos);
  CHECK(r.out.find("wrote " + (dir / "config.json").string()) != std::string::npos);

  const json config = json::parse(read_text(dir / "config.json"));
  CHECK(config["architectures"] == json::array({"GPT2LMHeadModel"}));
  CHECK(config["model_type"] == "gpt2");
  CHECK(config["n_layer"] == 2);
  CHECK(config["n_head"] == 2);
  CHECK(config["n_embd"] == 16);
  CHECK(config["n_positions"] == 8);
  CHECK(config["vocab_size"] == 32);
  CHECK(config["activation_function"] == "gelu_new");
  CHECK(config["tie_word_embeddings"] == true);

  const json read = run_python({script("read_export.py"), (dir / "model.safetensors").string()});
  CHECK(read["metadata"] == json{{"format", "pt"}});
  std::map<std::string, Shape> shapes;
  for (const json& t : read["tensors"]) shapes[t["name"].get<std::string>()] = t["shape"].get<Shape>();
  CHECK(shapes.at("h.0.attn.c_attn.weight") == Shape{16, 48});
  CHECK(shapes.at("h.1.mlp.c_proj.weight") == Shape{64, 16});
  CHECK(shapes.count("lm_head.weight") == 0);

  const std::vector<std::vector<std::int64_t>> ids = {{1, 5, 7, 31, 0, 2, 9}, {3, 3, 9, 12, 30, 4, 8}};
  const json logits = run_python({script("gpt2_numpy.py"), dir.string(), "1,5,7,31,0,2,9;3,3,9,12,30,4,8"});

  Generator gen(7);
  nn::GPT gpt(testing::gpt_config_of(testing::fixture_config().model), gen);
  std::map<std::string, Tensor> weights;
  for (const auto& [name, t] : run.state40)
    if (name.starts_with("model.")) weights[name.substr(6)] = t;
  gpt.load_state_dict(weights);
  gpt.eval();
  const Tensor idx = Tensor::from_vector<std::int64_t>(
      {1, 5, 7, 31, 0, 2, 9, 3, 3, 9, 12, 30, 4, 8}, {2, 7});
  const Tensor out = gpt.forward(idx);
  REQUIRE(out.shape() == Shape{2, 7, 32});
  const std::vector<float> ours = out.to_vector();
  double worst = 0, largest = 0;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t t = 0; t < 7; ++t)
      for (std::size_t v = 0; v < 32; ++v) {
        const double theirs = logits[b][t][v].get<double>();
        worst = std::max(worst, std::fabs(theirs - ours[(b * 7 + t) * 32 + v]));
        largest = std::max(largest, std::fabs(theirs));
      }
  INFO("largest |logit| " << largest);
  CHECK(largest > 0.1);  // the comparison is not of zeros
  CHECK(worst < 1e-4);
}

TEST_CASE("genesis ckpt export into a directory writes model.safetensors and config.json there",
          "[ckpt-cli]") {
  Run run;
  const fs::path made = run.tmp.path() / "made";
  fs::create_directories(made);
  const fs::path slash = run.tmp.path() / "new";  // given as "new/": created
  const fs::path bare = run.tmp.path() / "bare";  // no .safetensors: a directory, as save_pretrained
  for (const std::string& given : {made.string(), slash.string() + "/", bare.string()}) {
    INFO(given);
    const auto r = run_genesis({"ckpt", "export", run.dir.string(), "-o", given});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const fs::path dir = given == made.string() ? made : given == bare.string() ? bare : slash;
    CHECK(r.out.rfind("wrote " + (dir / "model.safetensors").string(), 0) == 0);
    CHECK(fs::is_regular_file(dir / "model.safetensors"));
    CHECK(json::parse(read_text(dir / "config.json"))["model_type"] == "gpt2");
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);
  }
  const auto again = run_genesis({"ckpt", "export", run.dir.string(), "-o", made.string()});
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("model.safetensors' already exists: pass --force") != std::string::npos);
}

TEST_CASE("genesis ckpt reshard 2 -> 3 -> 1 keeps every logical tensor and the global batch", "[ckpt-cli]") {
  Run run;
  const fs::path x3 = run.tmp.path() / "x3", x1 = run.tmp.path() / "x1";
  const auto r3 = run_genesis({"ckpt", "reshard", run.dir.string(), "--world-size", "3", "-o", x3.string()});
  INFO(r3.out << r3.err);
  REQUIRE(r3.exit_code == 0);
  CHECK(lines_of(r3.out).at(1) ==
        "global batch 24 kept: per_device_train_batch_size 4 x 3 ranks x gradient_accumulation_steps 2");
  const ckpt::Manifest m3 = ckpt::read_manifest(x3);
  CHECK(m3.world_size == 3);
  CHECK(m3.ranks.size() == 3);
  CHECK(m3.files.size() == 3);
  CHECK(m3.strategy == "zero2");
  CHECK(m3.step == 40);
  const Config c3 = parse_config_toml(m3.config_toml, "x3");
  CHECK(c3.training.per_device_train_batch_size * c3.training.gradient_accumulation_steps * 3 == 24);
  CHECK(m3.info["resharded_from"]["world_size"] == 2);
  CHECK(run_genesis({"ckpt", "verify", x3.string()}).exit_code == 0);
  for (const auto& [name, entry] : m3.tensors) CHECK(entry.shards.size() == 1);

  const auto r1 = run_genesis({"ckpt", "reshard", x3.string(), "--world-size", "1", "--strategy", "ddp",
                               "-o", x1.string()});
  REQUIRE(r1.exit_code == 0);
  const ckpt::Manifest m1 = ckpt::read_manifest(x1);
  CHECK(m1.world_size == 1);
  CHECK(m1.strategy == "ddp");
  const Config c1 = parse_config_toml(m1.config_toml, "x1");
  CHECK(c1.training.per_device_train_batch_size == 4);
  CHECK(c1.training.gradient_accumulation_steps == 6);
  CHECK(c1.distributed.strategy == "ddp");

  for (const fs::path& p : {x3, x1}) {
    const auto d = run_genesis({"ckpt", "diff", run.step40.string(), p.string(), "--all"});
    INFO(d.out);
    CHECK(d.exit_code == 0);
    CHECK(d.out.rfind("identical: " + std::to_string(run.state40.size()) + " tensors", 0) == 0);
  }
  const ckpt::Checkpoint c(x1);
  for (const auto& [name, t] : run.state40) CHECK(sum_of(c.read_full(name)) == sum_of(t));

  // 24 is not divisible by 5: refused before anything is written.
  const fs::path x5 = run.tmp.path() / "x5";
  check_one_line_error(run_genesis({"ckpt", "reshard", run.dir.string(), "--world-size", "5", "-o", x5.string()}),
                       2, "the global batch 24");
  const auto refused = run_genesis({"ckpt", "reshard", run.dir.string(), "--world-size", "5", "-o", x5.string()});
  CHECK(refused.err.find("divisible by 5") != std::string::npos);
  CHECK_FALSE(fs::exists(x5));
  CHECK_FALSE(fs::exists(run.tmp.path() / ".tmp-x5"));
}

TEST_CASE("genesis ckpt diff prints what differs and exits 1, identical checkpoints exit 0", "[ckpt-cli]") {
  Run run;
  const auto same = run_genesis({"ckpt", "diff", run.dir.string(), run.step40.string()});
  CHECK(same.exit_code == 0);
  CHECK(same.out == "identical: " + std::to_string(run.model_tensors()) + " model tensors (A: " +
                        run.step40.string() + ", B: " + run.step40.string() + ")\n");

  const auto d = run_genesis({"ckpt", "diff", run.step20.string(), run.step40.string()});
  CHECK(d.exit_code == 1);
  const auto lines = lines_of(d.out);
  REQUIRE(lines.size() == run.model_tensors() + 1);
  CHECK(lines.back().rfind("differ: " + std::to_string(run.model_tensors()) + " of " +
                               std::to_string(run.model_tensors()) + " model tensors",
                           0) == 0);
  // The largest difference printed for wte matches the tensors' own.
  const Tensor a = run.state20.at("model.wte.weight"), b = run.state40.at("model.wte.weight");
  double expected = 0;
  const auto va = a.to_vector(), vb = b.to_vector();
  for (std::size_t i = 0; i < va.size(); ++i) expected = std::max(expected, std::fabs(double(va[i]) - vb[i]));
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", expected);
  bool found = false;
  for (const auto& l : lines)
    if (l.rfind("model.wte.weight ", 0) == 0) {
      found = true;
      CHECK(words_of(l) == std::vector<std::string>{"model.wte.weight", "max", "|a-b|", text, "in",
                                                    std::to_string(va.size()), "of",
                                                    std::to_string(va.size()), "elements"});
    }
  CHECK(found);
  const auto all = run_genesis({"ckpt", "diff", run.step20.string(), run.step40.string(), "--all"});
  CHECK(all.exit_code == 1);
  bool step_found = false;
  for (const auto& l : lines_of(all.out))
    if (l.rfind("optimizer.wte.weight.step ", 0) == 0) {
      step_found = true;
      CHECK(words_of(l) == std::vector<std::string>{"optimizer.wte.weight.step", "max", "|a-b|", "20",
                                                    "in", "1", "of", "1", "elements"});
    }
  CHECK(step_found);
}

}  // namespace
}  // namespace genesis
