// Where a tokenizer's files are and how they are read: tokenizer.json, or GPT-2's older
// vocab.json + merges.txt (turned into the tokenizer.json Hugging Face writes for GPT-2), and
// tokenizer_config.json's special tokens. Not here: what the files mean (tokenizer.cpp).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "genesis/tokenizer/tokenizer.hpp"

namespace genesis::tokenizer {

struct TokenizerFiles {
  std::optional<std::filesystem::path> tokenizer_json, vocab_json, merges_txt, tokenizer_config;
};
// IoError when the path does not exist or holds neither form.
TokenizerFiles find_tokenizer_files(const std::filesystem::path& path);

std::string read_text_file(const std::filesystem::path& path);
// ConfigError naming `name` when the text is not a JSON object.
nlohmann::json parse_tokenizer_json(std::string_view text, std::string_view name);
// GPT-2's tokenizer.json from its vocab.json and merges.txt: byte-level BPE without a prefix
// space, <|endoftext|> an added special token.
nlohmann::json gpt2_tokenizer_json(const std::filesystem::path& vocab_json,
                                   const std::filesystem::path& merges_txt);
SpecialTokens read_special_tokens(const std::filesystem::path& tokenizer_config,
                                  const Tokenizer& tokenizer);

}  // namespace genesis::tokenizer
