// The library side of `genesis ckpt` where the CLI tests cannot reach cheaply: parse_config_toml,
// write_checkpoint_directory's refusals, diff's kinds of difference, the GPT-2 name mapping's
// errors; and the nested `genesis ckpt <command>` command line (help, usage errors, bash
// completion of nested commands and their flags).
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <sstream>

#include "ckpt/ckpt_fixture.hpp"
#include "commands/cli_app.hpp"
#include "genesis/ckpt/compare.hpp"
#include "genesis/ckpt/export.hpp"
#include "genesis/ckpt/rewrite.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using nlohmann::json;
using testing::lines_of;
using testing::run_genesis;

ckpt::Manifest one_rank_header(std::int64_t step) {
  ckpt::Manifest header;
  header.step = step;
  header.strategy = "ddp";
  header.created = "2026-11-22T09:00:00Z";
  header.config_toml = config_to_toml(testing::fixture_config());
  header.ranks = {testing::fixture_rank_state(0, step)};
  return header;
}

// One rank holding every tensor of `state` whole.
std::vector<std::vector<ckpt::StatePiece>> whole(const std::map<std::string, Tensor>& state) {
  std::vector<ckpt::StatePiece> pieces;
  for (const auto& [name, t] : state) pieces.push_back({name, t.shape(), 0, t});
  return {pieces};
}

TEST_CASE("parse_config_toml reads config_to_toml's text back and names the source in errors", "[ckpt-cli]") {
  Config c = testing::fixture_config();
  c.training.learning_rate = 3e-4;
  const Config back = parse_config_toml(config_to_toml(c), "saved");
  CHECK(config_to_toml(back) == config_to_toml(c));
  CHECK(back.model.n_embd == 16);
  CHECK(back.training.gradient_accumulation_steps == 3);
  CHECK_THROWS_AS(parse_config_toml("[training]\nlearning_rat = 1\n", "ckpt/manifest.json config"), ConfigError);
  CHECK_THROWS_WITH(parse_config_toml("[training]\nlearning_rat = 1\n", "ckpt/manifest.json config"),
                    Contains("ckpt/manifest.json config:2") && Contains("learning_rate"));
  CHECK_THROWS_WITH(parse_config_toml("[model]\nkind = \"gpt\"\n", "saved"), Contains("data.source"));
}

TEST_CASE("write_checkpoint_directory commits a loadable checkpoint or nothing at all", "[ckpt-cli]") {
  testing::TempDir tmp;
  const auto state = testing::fixture_state(3, 10);
  const fs::path out = tmp.path() / "one";
  const ckpt::Manifest m = ckpt::write_checkpoint_directory(out, one_rank_header(10), whole(state));
  CHECK(m.world_size == 1);
  CHECK(m.files.size() == 1);
  const ckpt::Checkpoint c(out);
  c.verify();
  for (const auto& [name, t] : state)
    CHECK(c.read_full(name).to(DType::f32).to_vector() == t.to(DType::f32).to_vector());

  // Overlapping pieces are refused, and neither the target nor the temporary directory remains.
  const Tensor w = state.at("model.wte.weight");
  const std::int64_t n = w.numel();
  std::vector<std::vector<ckpt::StatePiece>> overlap = {
      {{"model.wte.weight", w.shape(), 0, w.reshape({n}).slice(0, 0, n / 2 + 1)}},
      {{"model.wte.weight", w.shape(), n / 2, w.reshape({n}).slice(0, n / 2, n)}}};
  ckpt::Manifest two = one_rank_header(10);
  two.ranks.push_back(two.ranks.front());
  CHECK_THROWS_WITH(ckpt::write_checkpoint_directory(tmp.path() / "bad", two, overlap),
                    Contains("do not cover the tensor exactly once"));
  CHECK_FALSE(fs::exists(tmp.path() / "bad"));
  CHECK_FALSE(fs::exists(tmp.path() / ".tmp-bad"));
  // An existing directory is never written into.
  CHECK_THROWS_AS(ckpt::write_checkpoint_directory(out, one_rank_header(10), whole(state)), InvalidArgument);
  CHECK_THROWS_AS(ckpt::write_checkpoint_directory(tmp.path() / "x", one_rank_header(10), overlap),
                  InvalidArgument);  // two ranks of pieces, one rank state
}

TEST_CASE("diff reports tensors on one side only, shape and dtype changes", "[ckpt-cli]") {
  testing::TempDir tmp;
  auto a_state = testing::fixture_state(4, 10);
  auto b_state = a_state;
  b_state.erase("model.ln_f.bias");
  b_state["model.extra"] = Tensor::ones({3});
  b_state["model.wpe.weight"] = a_state.at("model.wpe.weight").reshape({16, 8});
  b_state["model.ln_f.weight"] = a_state.at("model.ln_f.weight").to(DType::bf16);
  b_state["optimizer.h.0.ln_1.weight.exp_avg"] = a_state.at("optimizer.h.0.ln_1.weight.exp_avg") * 2.0;
  const fs::path a = tmp.path() / "a", b = tmp.path() / "b";
  ckpt::write_checkpoint_directory(a, one_rank_header(10), whole(a_state));
  ckpt::write_checkpoint_directory(b, one_rank_header(10), whole(b_state));

  const auto diffs = ckpt::diff_checkpoints(ckpt::Checkpoint(a), ckpt::Checkpoint(b), false);
  std::map<std::string, ckpt::TensorDiff> by_name;
  for (const auto& d : diffs) by_name[d.name] = d;
  CHECK(by_name.at("model.ln_f.bias").kind == ckpt::DiffKind::only_a);
  CHECK(by_name.at("model.extra").kind == ckpt::DiffKind::only_b);
  CHECK(by_name.at("model.wpe.weight").kind == ckpt::DiffKind::shape);
  CHECK(by_name.at("model.ln_f.weight").kind == ckpt::DiffKind::dtype);
  CHECK(by_name.at("model.ln_f.weight").max_abs > 0);
  CHECK(by_name.at("model.ln_f.weight").max_abs < 0.02);  // bf16 rounding of values near 1
  CHECK(by_name.at("model.wte.weight").kind == ckpt::DiffKind::same);
  CHECK(by_name.count("optimizer.h.0.ln_1.weight.exp_avg") == 0);
  CHECK_FALSE(ckpt::all_same(diffs));
  const auto all = ckpt::diff_checkpoints(ckpt::Checkpoint(a), ckpt::Checkpoint(b), true);
  CHECK(all.size() == a_state.size() + 1);  // the union of both sides' names

  const auto r = run_genesis({"ckpt", "diff", a.string(), b.string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Contains("model.extra        only in B [3] F32\n"));
  CHECK_THAT(r.out, Contains("model.ln_f.bias    only in A [16] F32\n"));
  CHECK_THAT(r.out, Contains("model.wpe.weight   shape [8, 16] vs [16, 8]\n"));
  CHECK_THAT(r.out, Contains("model.ln_f.weight  dtype F32 vs BF16, max |a-b| "));
  CHECK_THAT(r.out, Contains("differ: 4 of "));
}

TEST_CASE("the GPT-2 mapping refuses names, shapes and models it cannot map", "[ckpt-cli]") {
  const ModelConfig model = testing::fixture_config().model;
  ckpt::NamedTensors tensors;
  for (const auto& [name, t] : testing::fixture_state(5, 1))
    if (name.starts_with("model.")) tensors.emplace_back(name.substr(6), t);
  const ckpt::NamedTensors hf = ckpt::to_hf_gpt2(tensors, model);
  REQUIRE(hf.size() == tensors.size());
  CHECK(hf.front().first == "wte.weight");
  CHECK(hf.back().first == "ln_f.bias");
  for (const auto& [name, t] : hf)
    if (name == "h.1.attn.c_attn.weight") {
      CHECK(t.shape() == Shape{16, 48});
      const Tensor original = std::find_if(tensors.begin(), tensors.end(), [&](const auto& p) {
                                return p.first == name;
                              })->second;
      CHECK(t.select(0, 3).select(0, 40).item<float>() == original.select(0, 40).select(0, 3).item<float>());
    }

  auto without = tensors;
  without.erase(without.begin() + 2);
  const std::string missing = without.size() < tensors.size() ? tensors[2].first : "";
  CHECK_THROWS_WITH(ckpt::to_hf_gpt2(without, model), Contains("model." + missing));
  auto extra = tensors;
  extra.emplace_back("head.weight", Tensor::zeros({2}));
  CHECK_THROWS_WITH(ckpt::to_hf_gpt2(extra, model), Contains("model.head.weight has no GPT-2 name"));
  ModelConfig wider = model;
  wider.n_embd = 32;
  CHECK_THROWS_AS(ckpt::to_hf_gpt2(tensors, wider), InvalidArgument);

  const json config = ckpt::hf_gpt2_config(model);
  CHECK(config["n_ctx"] == 8);
  CHECK(config["layer_norm_epsilon"].get<double>() == 1e-5);
  CHECK(config["resid_pdrop"].get<double>() == 0.0);
}

TEST_CASE("export picks the genesis format for a non-GPT model and refuses hf for it", "[ckpt-cli]") {
  testing::TempDir tmp;
  ckpt::Manifest header = one_rank_header(1);
  header.config_toml = config_to_toml(Config{});  // the default: an mlp
  const Tensor w = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::map<std::string, Tensor> state = {{"model.0.weight", w},
                                               {"optimizer.0.weight.exp_avg", w * 0.5}};
  ckpt::write_checkpoint_directory(tmp.path() / "mlp", header, whole(state));
  const ckpt::Checkpoint c(tmp.path() / "mlp");

  const fs::path out = tmp.path() / "out" / "mlp.safetensors";
  CHECK_THROWS_WITH(ckpt::export_checkpoint(c, {out, ckpt::ExportFormat::hf, false}),
                    Contains("model.kind is \"mlp\""));
  CHECK_FALSE(fs::exists(out));
  const ckpt::ExportResult r = ckpt::export_checkpoint(c, {out, ckpt::ExportFormat::automatic, false});
  CHECK(r.format == ckpt::ExportFormat::genesis);
  CHECK_FALSE(r.config_file.has_value());
  CHECK(r.tensors == 1);
  CHECK(r.elements == 6);
  const ckpt::SafetensorsFile f = ckpt::load_safetensors(out);
  REQUIRE(f.tensors.size() == 1);
  CHECK(f.tensors[0].first == "0.weight");
  CHECK(f.tensors[0].second.to_vector() == w.to_vector());
  CHECK(f.metadata.at("format") == "pt");
  // Only the file itself: no temporary left beside it.
  CHECK(std::distance(fs::directory_iterator(out.parent_path()), fs::directory_iterator()) == 1);
}

// The completions bash offers for `words` (the last one being completed), from the committed
// completion script with the built genesis first on PATH.
std::string complete(const std::string& words) {
  const std::string source = std::string(GENESIS_TEST_SOURCE_DIR) + "/completions/genesis.bash";
  const std::string snippet = "source '" + source + "' || exit 3\nCOMP_WORDS=(" + words +
                              ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_genesis\n"
                              "printf '%s\\n' \"${COMPREPLY[@]}\"\n";
  const auto r = testing::run_process({"bash", "--norc", "--noprofile", "-c", snippet});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

TEST_CASE("genesis ckpt is a command with nested commands: help, usage errors, completion", "[ckpt-cli]") {
  const auto help = run_genesis({"ckpt", "--help"});
  CHECK(help.exit_code == 0);
  for (const char* sub : {"ls, list", "info, inspect", "verify", "export", "reshard", "diff"})
    CHECK_THAT(help.out, Contains(std::string("  ") + sub + " "));
  commands::CliApp cli;
  const auto nested = cli.app().get_subcommand("ckpt")->get_subcommands([](const CLI::App*) { return true; });
  CHECK(nested.size() == 6);
  for (const CLI::App* sub : nested)
    for (const CLI::Option* option : sub->get_options()) {
      INFO("ckpt " << sub->get_name() << " " << option->get_name());
      CHECK_FALSE(option->get_description().empty());
    }
  const auto ls_help = run_genesis({"ckpt", "ls", "--help"});
  CHECK(ls_help.exit_code == 0);
  CHECK_THAT(ls_help.out, Contains("RUN_DIR") && Contains("--json"));

  const auto none = run_genesis({"ckpt"});
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Contains("(see genesis ckpt --help)"));
  const auto missing = run_genesis({"ckpt", "export", "somewhere"});
  CHECK(missing.exit_code == 2);
  CHECK(lines_of(missing.err).size() == 1);
  CHECK_THAT(missing.err, Contains("--output") && Contains("(see genesis ckpt export --help)"));
  // The target as cp takes it: the stray word is named as the missing flag's value.
  const auto as_cp = run_genesis({"ckpt", "export", "somewhere", "out.safetensors"});
  CHECK(as_cp.exit_code == 2);
  CHECK_THAT(as_cp.err, Contains("did you mean '--output out.safetensors'?"));
  const auto reshard_as_cp = run_genesis({"ckpt", "reshard", "x", "y", "--world-size", "2"});
  CHECK_THAT(reshard_as_cp.err, Contains("did you mean '--output y'?"));
  // Two flags missing: the word could be either's, so no guess.
  const auto two_missing = run_genesis({"ckpt", "reshard", "x", "y"});
  CHECK(two_missing.exit_code == 2);
  CHECK_THAT(two_missing.err, !Contains("did you mean"));
  const auto bad_world = run_genesis({"ckpt", "reshard", "x", "--world-size", "0", "-o", "y"});
  CHECK(bad_world.exit_code == 2);
  CHECK_THAT(bad_world.err, Contains("--world-size"));
  const auto unknown = run_genesis({"ckpt", "lss"});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("lss"));

  CHECK(complete("genesis ckpt ''") == "ls\ninfo\nverify\nexport\nreshard\ndiff\n");
  CHECK(complete("genesis ckpt re") == "reshard\n");
  CHECK(complete("genesis ckpt export --format ''") == "auto\ngenesis\nhf\n");
  CHECK(complete("genesis ckpt reshard x --strategy zero") == "zero1\nzero2\nzero3\n");
  CHECK(complete("genesis ckpt ls --j") == "--json\n");
  CHECK(complete("genesis --log-level debug ckpt diff --a") == "--all\n");
  testing::TempDir dir;
  fs::create_directories(dir.path() / "run-a" / "checkpoints");
  dir.write("run-file", "");
  const std::string prefix = (dir.path() / "run-").string();
  CHECK(complete("genesis ckpt info '" + prefix + "'") == prefix + "a\n");  // directories only
  const auto files = lines_of(complete("genesis ckpt export x -o '" + prefix + "'"));
  CHECK(std::set<std::string>(files.begin(), files.end()) ==
        std::set<std::string>{prefix + "a", prefix + "file"});
}

}  // namespace
}  // namespace genesis
