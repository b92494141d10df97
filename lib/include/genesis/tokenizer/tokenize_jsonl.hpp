// `genesis tokenize`'s work: JSONL lines of {"text": ...} to {"ids": [...]} (or back, decoding),
// and conversations {"messages": [...]} through the chat template to {"text": ..., "ids": [...]},
// line for line, on several threads, a failing line answered by {"error": ...} in its place.
// Also how a tokenizer is named everywhere: a path or a Hub id in the local Hugging Face cache.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <ostream>
#include <string>

#include "genesis/chat/chat_template.hpp"
#include "genesis/tokenizer/tokenizer.hpp"

namespace genesis::tokenizer {

// A tokenizer.json, a directory with one (a Hugging Face model directory), or a Hub id found in
// the local Hugging Face cache as model.init_from finds it; `key` names the setting in errors.
Tokenizer load_tokenizer(const std::string& path_or_id, const std::string& key);
// The directory a tokenizer named as load_tokenizer takes it lives in (the directory itself, a
// tokenizer.json's directory, a Hub id's snapshot): where its tokenizer_config.json would be.
std::filesystem::path tokenizer_directory(const std::string& path_or_id, const std::string& key);
// Whether a directory holds a tokenizer Tokenizer::load reads (tokenizer.json, or vocab.json +
// merges.txt): a model directory whose tokenizer is then the default.
bool holds_tokenizer(const std::filesystem::path& dir);

struct TokenizeJsonlOptions {
  bool decode = false;              // {"ids": [...]} in, {"text": ...} out
  bool add_special_tokens = true;   // the post-processor's tokens (a BOS), as tokenizers' default
  int threads = 0;                  // 0: every core
  std::string input_name = "stdin";  // what errors call the input
  // Renders {"messages": [...], "add_generation_prompt", "tools", "kwargs"} lines, whose ids are
  // the rendered text's without added special tokens (as apply_chat_template(tokenize=True)).
  // Unset: such a line's error is `no_chat_template`.
  const chat::ChatTemplate* chat_template = nullptr;
  std::string no_chat_template = "the tokenizer has no chat template";
};

// Returns the number of lines that failed; each failure is also passed to on_error with its
// line number (from 1) and reason. Blank lines give blank lines.
std::int64_t tokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out,
                            const TokenizeJsonlOptions& options,
                            const std::function<void(std::int64_t line, const std::string&)>&
                                on_error);

}  // namespace genesis::tokenizer
