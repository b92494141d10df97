// A bounded mutation fuzzer over chat templates, the Jinja a downloaded model brings: each mutated
// template must load and render a few conversations, or fail with a genesis::Error (ConfigError
// at load, ChatTemplateError while rendering), never crash, hang or throw anything else.
// Mutations are byte-level (flips, deletions, duplicated ranges) and token splices (Jinja's
// delimiters, keywords, filters and operators inserted or swapped). Renders run under tight
// limits, so a mutation that makes a loop explode ends in a limit error. The Catch2 test runs a
// fixed budget over tests/chat/templates and, when installed, the npm reference's real templates;
// tests/chat/fuzz_chat_template_asan.sh builds this file with GENESIS_FUZZ_MAIN under
// AddressSanitizer and UBSan and runs it as long as asked.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genesis/chat/chat_template.hpp"
#include "genesis/core/error.hpp"

#ifndef GENESIS_FUZZ_MAIN
#include <catch2/catch.hpp>

#include "support/reference_tokenizers.hpp"
#endif

namespace genesis::chat::fuzz {
namespace {

using nlohmann::ordered_json;
using Rng = std::mt19937_64;

const std::vector<ordered_json>& conversations() {
  static const std::vector<ordered_json> chats = {
      ordered_json::parse(
          R"([{"role": "system", "content": "Sys"}, {"role": "user", "content": "Hi 日本 😀"},
          {"role": "assistant", "content": "<think>x</think>Yo", "tool_calls": [{"type": "function",
          "function": {"name": "f", "arguments": {"a": 1}}}]}, {"role": "tool", "content": "r"},
          {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image"}]}])"),
      ordered_json::parse(R"([{"role": "user", "content": "only"}])"), ordered_json::array()};
  return chats;
}

const std::vector<std::string>& atoms() {
  static const std::vector<std::string> list = {"{{",
                                                "}}",
                                                "{%",
                                                "%}",
                                                "{#",
                                                "#}",
                                                "{%-",
                                                "-%}",
                                                "{{-",
                                                "-}}",
                                                "for ",
                                                "endfor",
                                                "if ",
                                                "endif",
                                                "else",
                                                "elif ",
                                                "set ",
                                                "macro ",
                                                "endmacro",
                                                "call ",
                                                "endcall",
                                                "generation",
                                                "endgeneration",
                                                "loop.index",
                                                "loop",
                                                "namespace(",
                                                "ns.",
                                                "range(",
                                                "raise_exception(",
                                                "|",
                                                "|tojson",
                                                "|length",
                                                "|join",
                                                "|map(",
                                                "|indent(",
                                                "is ",
                                                "not ",
                                                "in ",
                                                " and ",
                                                " or ",
                                                "(",
                                                ")",
                                                "[",
                                                "]",
                                                "{",
                                                "}",
                                                ":",
                                                ",",
                                                ".",
                                                "'",
                                                "\"",
                                                "\\",
                                                "~",
                                                "+",
                                                "-",
                                                "*",
                                                "**",
                                                "/",
                                                "//",
                                                "%",
                                                "==",
                                                "!=",
                                                "<",
                                                ">",
                                                "=",
                                                "0",
                                                "1",
                                                "-1",
                                                "99999",
                                                "1.5",
                                                "none",
                                                "true",
                                                "messages",
                                                "message",
                                                "caller()",
                                                "break",
                                                "continue",
                                                "raw",
                                                "endraw",
                                                "\n",
                                                " ",
                                                "\t",
                                                "é",
                                                "😀",
                                                "[::-1]",
                                                "[1:]",
                                                "* 100000"};
  return list;
}

void mutate(std::string& text, Rng& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t pos = text.empty() ? 0 : rng() % (text.size() + 1);
    switch (rng() % 6) {
      case 0:  // flip a byte (may break UTF-8: the load must refuse it)
        if (!text.empty()) text[rng() % text.size()] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1: {  // delete a range
        const std::size_t n =
            std::min<std::size_t>(text.size() - std::min(pos, text.size()), rng() % 24);
        text.erase(std::min(pos, text.size()), n);
        break;
      }
      case 2: {  // duplicate a range elsewhere
        if (text.empty()) break;
        const std::size_t from = rng() % text.size();
        const std::string piece = text.substr(from, rng() % 40);
        text.insert(std::min(pos, text.size()), piece);
        break;
      }
      default:  // splice in a token
        text.insert(std::min(pos, text.size()), atoms()[rng() % atoms().size()]);
    }
  }
}

struct Stats {
  std::uint64_t runs = 0, loaded = 0, rendered = 0, refused = 0;
  std::vector<std::string> failures;
};

ChatTemplateLimits fuzz_limits() {
  ChatTemplateLimits limits;
  limits.max_steps = 20000;
  limits.max_output_bytes = 1 << 20;
  limits.max_call_depth = 40;
  return limits;
}

// "" when the template behaved, else what went wrong.
std::string check_one(const std::string& source, const ordered_json& special, Stats& stats) {
  try {
    ChatTemplate t = ChatTemplate::from_source(source, "fuzz", special);
    t.set_limits(fuzz_limits());
    ++stats.loaded;
    for (const ordered_json& chat : conversations()) {
      RenderInput input;
      input.messages = &chat;
      input.add_generation_prompt = true;
      input.now = 0;
      try {
        t.render(input);
        ++stats.rendered;
      } catch (const Error&) {
        ++stats.refused;
      }
    }
  } catch (const Error&) {
    ++stats.refused;
  } catch (const std::exception& e) {
    return std::string("an exception that is not a genesis::Error: ") + e.what();
  }
  return "";
}

Stats fuzz(const std::vector<std::pair<std::string, ordered_json>>& seeds, std::uint64_t iterations,
           std::uint64_t seed) {
  Rng rng(seed);
  Stats stats;
  for (std::uint64_t i = 0; i < iterations; ++i) {
    const auto& [base, special] = seeds[i % seeds.size()];
    std::string text = base;
    mutate(text, rng);
    ++stats.runs;
    if (std::string failure = check_one(text, special, stats); !failure.empty()) {
      stats.failures.push_back(failure);
      std::ofstream(
          "fuzz-chat-template-failure-" + std::to_string(stats.failures.size()) + ".jinja",
          std::ios::binary)
          << text;
    }
  }
  return stats;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The templates to mutate: every .jinja in `dir`, and the chat_template of each
// tokenizer_config.json given.
std::vector<std::pair<std::string, ordered_json>> load_seeds(
    const std::filesystem::path& dir, const std::vector<std::filesystem::path>& configs) {
  std::vector<std::pair<std::string, ordered_json>> seeds;
  const ordered_json special = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) seeds.emplace_back(read_all(file), special);
  for (const auto& config_path : configs) {
    const ordered_json config = ordered_json::parse(read_all(config_path));
    if (config.contains("chat_template") && config["chat_template"].is_string())
      seeds.emplace_back(config["chat_template"].get<std::string>(),
                         ChatTemplate::special_tokens_of(config));
  }
  return seeds;
}

}  // namespace
}  // namespace genesis::chat::fuzz

#ifdef GENESIS_FUZZ_MAIN
// fuzz_chat_template TEMPLATE_DIR ITERATIONS [SEED [TOKENIZER_CONFIG...]]: exit 1 on any failure,
// each failing template saved as fuzz-chat-template-failure-N.jinja in the working directory.
int main(int argc, char** argv) {
  using namespace genesis::chat::fuzz;
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_chat_template TEMPLATE_DIR ITERATIONS [SEED [CONFIG...]]\n");
    return 2;
  }
  const std::uint64_t iterations = std::strtoull(argv[2], nullptr, 10);
  const std::uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  std::vector<std::filesystem::path> configs(argv + std::min(argc, 4), argv + argc);
  const auto start = std::chrono::steady_clock::now();
  const Stats stats = fuzz(load_seeds(argv[1], configs), iterations, seed);
  std::printf(
      "fuzz_chat_template: %llu templates (seed %llu) in %.1f s: %llu loaded, %llu "
      "renders, %llu refusals, %zu failures\n",
      static_cast<unsigned long long>(stats.runs), static_cast<unsigned long long>(seed),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      static_cast<unsigned long long>(stats.loaded),
      static_cast<unsigned long long>(stats.rendered),
      static_cast<unsigned long long>(stats.refused), stats.failures.size());
  for (std::size_t i = 0; i < stats.failures.size() && i < 20; ++i)
    std::printf("FAIL %s\n", stats.failures[i].c_str());
  return stats.failures.empty() ? 0 : 1;
}
#else
TEST_CASE("mutated chat templates render or fail with a genesis error", "[chat]") {
  using namespace genesis::chat::fuzz;
  std::vector<std::filesystem::path> configs;
  for (const char* name : {"qwen3", "llama3", "gemma3"})
    if (auto file = genesis::testing::reference_tokenizer_file(name))
      configs.push_back(file->parent_path() / "tokenizer_config.json");
  const auto seeds =
      load_seeds(std::filesystem::path(GENESIS_TEST_SOURCE_DIR) / "tests/chat/templates", configs);
  REQUIRE(seeds.size() >= 5);
  const Stats stats = fuzz(seeds, 8000, 11);
  INFO((stats.failures.empty() ? std::string() : stats.failures.front()));
  CHECK(stats.failures.empty());
  CHECK(stats.loaded > 300);  // the mutations reach rendering, not only the parser
  CHECK(stats.rendered > 300);
  CHECK(stats.refused > 300);
}
#endif
