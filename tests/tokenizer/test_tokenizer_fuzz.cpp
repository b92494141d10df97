// A bounded mutation fuzzer over tokenizer.json, the file a downloaded model brings: every mutated
// file must load into a working tokenizer or fail with exactly one genesis::Error with a one-line
// message, never a crash, a hang or another exception; a tokenizer that loads must encode and
// decode a few hard texts the same way. Mutations are structural (a component's type or option
// changed, a merge, a vocabulary entry, an added token or a regex rewritten) and byte-level
// (truncation, flipped bytes). The Catch2 test runs a fixed budget on Llama 2's file;
// tests/tokenizer/fuzz_tokenizer_asan.sh builds this file with GENESIS_FUZZ_MAIN under
// AddressSanitizer and UBSan and runs it as long as asked.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/tokenizer/tokenizer.hpp"

#ifndef GENESIS_FUZZ_MAIN
#include <catch2/catch.hpp>

#include "support/environment_skip.hpp"
#include "support/reference_tokenizers.hpp"
#endif

namespace genesis::fuzz {
namespace {

using nlohmann::json;
using Rng = std::mt19937_64;

const std::vector<std::string>& probe_texts() {
  static const std::vector<std::string> texts = {
      "Hello world, it's 2026!", "  leading\tand\r\ntrailing  ", "<s>inside</s> <unk>",
      "na\xC3\xAFve caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
      "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      std::string(300, 'a'), ""};
  return texts;
}

std::string random_string(Rng& rng) {
  static const std::vector<std::string> atoms = {
      "a", " ", "\\", "(", ")", "[", "]", "{", "}", "*", "+", "?", "|", "\\p{L}", "\\s", "\\S",
      "(?!", "(?i:", "\xE2\x96\x81", "<0x41>", "<s>", "\xC3\xA9", "\n", "^", "$", "\\d", "{1,3}"};
  std::string s;
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) s += atoms[rng() % atoms.size()];
  return s;
}

json random_value(Rng& rng) {
  switch (rng() % 8) {
    case 0: return nullptr;
    case 1: return static_cast<bool>(rng() % 2);
    case 2: return static_cast<std::int64_t>(rng() % 5) - 2;
    case 3: return static_cast<std::int64_t>(rng());
    case 4: return 0.5;
    case 5: return json::array({random_string(rng), random_string(rng)});
    case 6: return json::object({{"String", random_string(rng)}});
    default: return random_string(rng);
  }
}

// A component that tokenizers would accept, its options drawn at random, so most mutated files
// load and reach the encoder; now and then an option gets a value of the wrong kind.
json plausible_component(Rng& rng) {
  static const std::vector<std::string> behaviors = {"Removed", "Isolated", "MergedWithPrevious",
                                                     "MergedWithNext", "Contiguous"};
  const std::string pattern = random_string(rng);
  const json string_or_regex = rng() % 2 ? json{{"String", pattern}} : json{{"Regex", pattern}};
  switch (rng() % 12) {
    case 0: return {{"type", std::vector<std::string>{"NFC", "NFD", "NFKC", "NFKD"}[rng() % 4]}};
    case 1: return {{"type", "Lowercase"}};
    case 2: return {{"type", "Strip"}, {"strip_left", rng() % 2 == 0}, {"strip_right", true}};
    case 3: return {{"type", "Replace"}, {"pattern", string_or_regex}, {"content", random_string(rng)}};
    case 4: return {{"type", "Prepend"}, {"prepend", random_string(rng)}};
    case 5: return {{"type", "ByteLevel"}, {"add_prefix_space", rng() % 2 == 0},
                    {"use_regex", rng() % 2 == 0}};
    case 6: return {{"type", "Split"}, {"pattern", string_or_regex},
                    {"behavior", behaviors[rng() % behaviors.size()]}, {"invert", rng() % 2 == 0}};
    case 7: return {{"type", "Digits"}, {"individual_digits", rng() % 2 == 0}};
    case 8: return {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"},
                    {"prepend_scheme", std::vector<std::string>{"always", "first", "never"}[rng() % 3]},
                    {"split", rng() % 2 == 0}};
    case 9: return {{"type", std::vector<std::string>{"ByteFallback", "Fuse"}[rng() % 2]}};
    case 10: return {{"type", "Strip"}, {"content", " "}, {"start", rng() % 3}, {"stop", rng() % 3}};
    default: return {{"type", "Sequence"}, {"normalizers", json::array()},
                     {"pretokenizers", json::array()}, {"decoders", json::array()}};
  }
}

// One structural change somewhere in the file: a component replaced (by one of its kind, one of
// another kind, or junk), a merge or vocabulary entry or added token rewritten, a model option
// changed, a key removed.
void mutate_structure(json& file, Rng& rng) {
  static const std::vector<std::string> components = {"normalizer", "pre_tokenizer",
                                                      "post_processor", "decoder"};
  json& model = file["model"];
  switch (rng() % 8) {
    case 0:
    case 1: {  // a component replaced, or appended to a Sequence
      json c = plausible_component(rng);
      if (rng() % 4 == 0) c[std::vector<std::string>{"pattern", "content", "behavior",
                                                     "prepend_scheme", "start"}[rng() % 5]] =
          random_value(rng);
      json& slot = file[components[rng() % components.size()]];
      if (slot.is_object() && slot.value("type", "") == "Sequence" && rng() % 2) {
        for (const char* list : {"normalizers", "pretokenizers", "decoders", "processors"})
          if (slot.contains(list) && slot[list].is_array()) slot[list].push_back(c);
      } else {
        slot = c;
      }
      break;
    }
    case 2: {  // a merge rewritten: two tokens of the vocabulary, or junk
      json& merges = model["merges"];
      if (merges.is_array() && !merges.empty())
        merges[rng() % merges.size()] =
            rng() % 2 ? json(merges[rng() % merges.size()]) : random_value(rng);
      break;
    }
    case 3: {  // a vocabulary entry added with a fresh or an existing id, or junk
      json& vocab = model["vocab"];
      if (vocab.is_object())
        vocab[random_string(rng)] = rng() % 4 ? json(rng() % (vocab.size() + 10)) : random_value(rng);
      break;
    }
    case 4: {  // an added token with random content and flags
      json token = {{"id", rng() % 4 ? json(rng() % 32010) : random_value(rng)},
                    {"content", random_string(rng)}};
      for (const char* key : {"special", "lstrip", "rstrip", "single_word", "normalized"})
        token[key] = rng() % 8 ? json(rng() % 2 == 0) : random_value(rng);
      if (file["added_tokens"].is_array() || file["added_tokens"].is_null())
        file["added_tokens"].push_back(token);
      break;
    }
    case 5: {  // a model option
      static const std::vector<std::string> flags = {"fuse_unk", "byte_fallback", "ignore_merges"};
      static const std::vector<std::string> keys = {"type", "dropout", "unk_token", "vocab",
                                                    "merges", "continuing_subword_prefix",
                                                    "end_of_word_suffix"};
      if (rng() % 2)
        model[flags[rng() % flags.size()]] = rng() % 2 == 0;
      else
        model[keys[rng() % keys.size()]] = random_value(rng);
      break;
    }
    case 6:  // a key removed
      file.erase(std::vector<std::string>{"model", "added_tokens", "normalizer", "decoder",
                                          "pre_tokenizer", "post_processor"}[rng() % 6]);
      break;
    default:  // a component replaced by a value of another kind
      file[components[rng() % components.size()]] = random_value(rng);
      break;
  }
}

void mutate_bytes(std::string& text, Rng& rng) {
  if (rng() % 2) {
    text.resize(rng() % (text.size() + 1));
  } else {
    for (int i = 0; i < 4 && !text.empty(); ++i) text[rng() % text.size()] ^= 1 << (rng() % 8);
  }
}

struct Stats {
  std::uint64_t runs = 0, loaded = 0, refused = 0;
  std::vector<std::string> failures;
};

// Loads one mutated file; returns "" on an acceptable outcome, else what went wrong.
std::string check_one(const std::string& text, Stats& stats) {
  try {
    const tokenizer::Tokenizer t = tokenizer::Tokenizer::from_json(text, "tokenizer.json");
    for (const std::string& probe : probe_texts()) {
      const std::vector<std::int32_t> ids = t.encode(probe);
      if (t.encode(probe) != ids) return "encoding the same text twice differed";
      for (std::int32_t id : ids)
        if (id < 0 || id >= t.vocab_size()) return "an id outside the vocabulary";
      t.decode(ids);
    }
    ++stats.loaded;
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.empty() || what.find('\n') != std::string::npos)
      return "an error that is not one line: " + what;
    ++stats.refused;
  } catch (const std::exception& e) {
    return std::string("an exception that is not a genesis::Error: ") + e.what();
  }
  return "";
}

Stats fuzz(const std::string& seed_text, std::uint64_t iterations, std::uint64_t seed) {
  const json base = json::parse(seed_text);
  Rng rng(seed);
  Stats stats;
  for (std::uint64_t i = 0; i < iterations; ++i) {
    std::string text;
    if (rng() % 4 == 0) {
      text = seed_text;
      mutate_bytes(text, rng);
    } else {
      json file = base;
      const int changes = 1 + static_cast<int>(rng() % 3);
      for (int c = 0; c < changes; ++c) mutate_structure(file, rng);
      text = file.dump();
    }
    ++stats.runs;
    if (std::string failure = check_one(text, stats); !failure.empty()) {
      stats.failures.push_back(failure);
      const std::string name = "fuzz-tokenizer-failure-" + std::to_string(stats.failures.size()) +
                               ".json";
      std::ofstream(name, std::ios::binary) << text;
    }
  }
  return stats;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace
}  // namespace genesis::fuzz

#ifdef GENESIS_FUZZ_MAIN
// fuzz_tokenizer TOKENIZER_JSON ITERATIONS [SEED]: exit 1 on any failure, each failing file saved
// as fuzz-tokenizer-failure-N.json in the working directory.
int main(int argc, char** argv) {
  using namespace genesis::fuzz;
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_tokenizer TOKENIZER_JSON ITERATIONS [SEED]\n");
    return 2;
  }
  const std::uint64_t iterations = std::strtoull(argv[2], nullptr, 10);
  const std::uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  const auto start = std::chrono::steady_clock::now();
  const Stats stats = fuzz(read_all(argv[1]), iterations, seed);
  std::printf("fuzz_tokenizer: %llu files (seed %llu) in %.1f s: %llu loaded, %llu refused, "
              "%zu failures\n",
              static_cast<unsigned long long>(stats.runs), static_cast<unsigned long long>(seed),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              static_cast<unsigned long long>(stats.loaded),
              static_cast<unsigned long long>(stats.refused), stats.failures.size());
  for (std::size_t i = 0; i < stats.failures.size() && i < 20; ++i)
    std::printf("FAIL %s\n", stats.failures[i].c_str());
  return stats.failures.empty() ? 0 : 1;
}
#else
TEST_CASE("mutated tokenizer.json files load or fail with one clear error") {
  const auto file = genesis::testing::reference_tokenizer_file("llama2");
  if (!file)
    return genesis::testing::skip_test(genesis::testing::Need::node,
                                       "the npm reference tokenizers are not installed");
  const auto stats = genesis::fuzz::fuzz(genesis::fuzz::read_all(file->string()), 150, 7);
  INFO((stats.failures.empty() ? std::string() : stats.failures.front()));
  CHECK(stats.failures.empty());
  CHECK(stats.loaded > 10);   // the mutations reach the encoder, not only the parser
  CHECK(stats.refused > 10);
}
#endif
