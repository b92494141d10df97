// A small random Llama in Hugging Face's exact layout, made by the reference implementation
// (tests/golden/hf_reference.py), with a tokenizer of our own beside it: a byte-level BPE over
// GPT-2's 256 byte characters (ids 0..255) with two merges ("re" 256, " a" 257), a BOS (300) the
// post-processor adds and an end-of-turn token (301) tokenizer_config.json names as eos_token.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"
#include "tokenizer/pre_tokenizers.hpp"

namespace genesis::testing {

inline constexpr std::int64_t kBos = 300, kEot = 301;

// The independent reference implementation the hf tests run (with /usr/bin/python3).
inline std::string hf_reference_script() {
  return std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/golden/hf_reference.py";
}

// The tokenizer above, as tokenizer.json and tokenizer_config.json in `dir`.
inline void write_tokenizer(const std::filesystem::path& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  const auto& chars = tokenizer::byte_level_chars();
  for (int b = 0; b < 256; ++b) vocab[chars[b]] = b;
  vocab["re"] = 256;
  vocab[chars[' '] + "a"] = 257;
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                     {"trim_offsets", false}, {"use_regex", true}};
  const nlohmann::json file = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"r e", chars[' '] + " a"}}}},
      {"added_tokens",
       {{{"id", kBos}, {"content", "<|bos|>"}, {"special", true}, {"normalized", false}},
        {{"id", kEot}, {"content", "<|eot|>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {kBos}},
                                         {"tokens", {"<|bos|>"}}}}}}}},
      {"decoder", byte_level}};
  std::ofstream(dir / "tokenizer.json") << file.dump();
  std::ofstream(dir / "tokenizer_config.json")
      << nlohmann::json{{"bos_token", "<|bos|>"}, {"eos_token", "<|eot|>"}}.dump();
}

// The random Llama (vocabulary 320) with the tokenizer above in `model`; false where PyTorch is
// missing.
inline bool make_llama(const std::filesystem::path& model) {
  const CliResult made = run_process(
      {"/usr/bin/python3", hf_reference_script(), "make", "--out", model.string(), "--family", "llama", "--seed", "3"});
  if (made.exit_code == 3) return false;
  REQUIRE(made.exit_code == 0);
  write_tokenizer(model);
  return true;
}

}  // namespace genesis::testing
