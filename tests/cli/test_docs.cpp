// The generated completions and man pages: the copies committed under completions/ and man/
// equal what this build generates (so a changed flag cannot ship stale docs), the man pages
// render without groff warnings, and the bash completion completes what users type.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"

namespace fs = std::filesystem;
using genesis::testing::run_process;
using genesis::testing::RunOptions;

namespace {

const fs::path kSource = GENESIS_TEST_SOURCE_DIR;
const fs::path kGenerated = GENESIS_TEST_GENERATED_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file()) names.insert(entry.path().filename().string());
  return names;
}

// Runs a bash snippet after sourcing the committed completion script, with the built genesis
// first on PATH; returns its stdout.
std::string bash_with_completion(const std::string& snippet) {
  const std::string bin_dir = fs::path(GENESIS_TEST_BIN).parent_path().string();
  const char* path = std::getenv("PATH");
  RunOptions options{{{"PATH", bin_dir + ":" + (path ? path : "/usr/bin:/bin")},
                      {"GENESIS_PRESET_PATH", std::nullopt}},
                     {}};
  const std::string script =
      "source '" + (kSource / "completions" / "genesis.bash").string() + "' || exit 3\n" + snippet;
  auto result = run_process({"bash", "--norc", "--noprofile", "-c", script}, options);
  INFO("bash stderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  return result.out;
}

// The completions offered for the words of a command line (the last one being completed).
std::string complete(const std::string& words) {
  return bash_with_completion("COMP_WORDS=(" + words + ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
                              "_genesis\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n");
}

}  // namespace

TEST_CASE("committed completions and man pages match the generated ones", "[docs]") {
  const std::string refresh =
      "stale generated docs: run `cmake --build <build-dir> --target update-docs` and commit "
      "completions/ and man/";
  for (const char* sub : {"completions", "man"}) {
    auto generated = files_in(kGenerated / sub);
    auto committed = files_in(kSource / sub);
    REQUIRE_FALSE(generated.empty());
    INFO(refresh);
    CHECK(committed == generated);
    for (const auto& name : generated) {
      INFO(std::string(sub) + "/" + name);
      CHECK(read_text(kSource / sub / name) == read_text(kGenerated / sub / name));
    }
  }
  for (const char* name : {"genesis.bash", "_genesis", "genesis.fish"})
    CHECK(fs::exists(kGenerated / "completions" / name));
  CHECK(fs::exists(kGenerated / "man" / "genesis.1"));
  CHECK(fs::exists(kGenerated / "man" / "genesis-train.1"));
}

TEST_CASE("man pages render without groff warnings", "[docs]") {
  if (run_process({"sh", "-c", "command -v groff"}).exit_code != 0)
    return genesis::testing::skip_test(genesis::testing::Need::doc_tools,
                                       "groff is not installed: the man pages are not rendered");
  for (const auto& name : files_in(kGenerated / "man")) {
    INFO(name);
    auto result = run_process({"groff", "-man", "-Tutf8", "-ww", "-z", (kGenerated / "man" / name).string()});
    CHECK(result.exit_code == 0);
    CHECK(result.err.empty());
  }
  auto page = run_process({"groff", "-man", "-Tascii", "-P-cbou", (kGenerated / "man" / "genesis-train.1").string()});
  for (const char* text : {"NAME", "SYNOPSIS", "OPTIONS", "--preset PRESET", "EXAMPLES", "EXIT STATUS"}) {
    INFO(text);
    CHECK(page.out.find(text) != std::string::npos);
  }
}

TEST_CASE("zsh and fish completions parse", "[docs]") {
  const auto shells = {std::pair{"zsh", "_genesis"}, std::pair{"fish", "genesis.fish"}};
  for (auto [shell, file] : shells)
    if (run_process({"sh", "-c", std::string("command -v ") + shell}).exit_code != 0)
      return genesis::testing::skip_test(
          genesis::testing::Need::doc_tools,
          std::string(shell) + " is not installed: " + file + " is not checked");
  for (auto [shell, file] : shells) {
    auto result = run_process({shell, "-n", (kSource / "completions" / file).string()});
    INFO(result.err);
    CHECK(result.exit_code == 0);
  }
}

TEST_CASE("bash completes commands, flags, choices and presets", "[docs]") {
  CHECK(complete("genesis tr") == "train\n");
  CHECK(complete("genesis ''") == "bench-allreduce\nckpt\ndoctor\ngenerate\nlaunch\nreport\nscore\ntokenize\ntrain\n");
  CHECK(complete("genesis la") == "launch\n");

  const std::string presets = complete("genesis train --preset ''");
  CHECK(presets.find("mlp\n") != std::string::npos);
  CHECK(presets.find("gpt-tiny\n") != std::string::npos);
  CHECK(complete("genesis train --preset gpt") == "gpt-tiny\ngpt2\n");
  CHECK(complete("genesis train -p ml") == "mlp\n");
  CHECK(complete("genesis train --preset = ml") == "mlp\n");  // --preset=ml, as bash splits it

  CHECK(complete("genesis --log-level d") == "debug\n");
  CHECK(complete("genesis train --color n") == "never\n");
  const std::string flags = complete("genesis train --pr");
  CHECK(flags == "--preset\n--print-config\n");
  CHECK(complete("genesis --ver") == "--version\n");
}

TEST_CASE("bash completes config files", "[docs]") {
  genesis::testing::TempDir dir;
  dir.write("my-config.toml", "");
  const std::string prefix = (dir.path() / "my-").string();
  CHECK(complete("genesis train --config '" + prefix + "'") == prefix + "config.toml\n");
}
