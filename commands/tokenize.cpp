// `genesis tokenize TOKENIZER [--input FILE]`: JSONL {"text": ...} lines to {"ids": [...]} with a
// Hugging Face tokenizer, or back with --decode; the ids are those Hugging Face's tokenizers
// gives. {"messages": [...]} lines go through the tokenizer's chat template (or
// --chat-template's) first, as transformers' apply_chat_template. The work is lib/src/tokenizer/'s
// and lib/src/chat/'s.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "commands/command_table.hpp"
#include "genesis/chat/chat_template.hpp"
#include "genesis/core/error.hpp"
#include "genesis/tokenizer/tokenize_jsonl.hpp"

namespace genesis::commands {
namespace {

struct TokenizeFlags {
  std::string tokenizer;
  std::string input;
  std::string chat_template;
  bool decode = false;
  bool no_special_tokens = false;
  int threads = 0;
};

void add_tokenize_flags(CLI::App& app, TokenizeFlags& f) {
  app.add_option("TOKENIZER", f.tokenizer,
                 "A tokenizer.json, a directory holding one (or GPT-2's vocab.json + "
                 "merges.txt), or a Hub id in the local Hugging Face cache")
      ->required()
      ->type_name("TOKENIZER");
  app.add_option("-i,--input", f.input,
                 "JSONL, {\"text\": \"...\"} per line ({\"ids\": [...]} with --decode; default: "
                 "standard input)")
      ->type_name("FILE");
  app.add_option("--chat-template", f.chat_template,
                 "A Jinja chat template for {\"messages\": [...]} lines, in place of the "
                 "tokenizer's own (tokenizer_config.json's chat_template or chat_template.jinja)")
      ->type_name("FILE");
  app.add_flag("--decode", f.decode, "Turn {\"ids\": [...]} lines into {\"text\": \"...\"}");
  app.add_flag("--no-special-tokens", f.no_special_tokens,
               "Add no special tokens around the text (no BOS); special-token strings inside "
               "the text are still matched");
  app.add_option("--threads", f.threads, "Threads that encode (0: one per core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

int run_tokenize(const TokenizeFlags& f, const RunContext& context) {
  std::ifstream file;
  if (!f.input.empty()) {
    file.open(f.input, std::ios::binary);
    GENESIS_CHECK(file.good(), InvalidArgument, "cannot read --input '" + f.input + "'");
  }
  const tokenizer::Tokenizer tokenizer = tokenizer::load_tokenizer(f.tokenizer, "TOKENIZER");
  tokenizer::TokenizeJsonlOptions options;
  // The template is read before any line: --chat-template's must load; the tokenizer's own,
  // when broken, fails only the lines that need it (text lines go on).
  const std::filesystem::path dir = tokenizer::tokenizer_directory(f.tokenizer, "TOKENIZER");
  std::optional<chat::ChatTemplate> chat_template;
  if (!f.chat_template.empty()) {
    chat_template = chat::ChatTemplate::from_file(f.chat_template, dir);
  } else if (!f.decode) {
    options.no_chat_template = "the tokenizer " + f.tokenizer +
                               " has no chat template; give one with --chat-template FILE";
    try {
      chat_template = chat::ChatTemplate::find(dir);
    } catch (const Error& e) {
      options.no_chat_template = std::string("the tokenizer's chat template cannot be used: ") +
                                 e.what() + "; give another with --chat-template FILE";
    }
  }
  if (chat_template) options.chat_template = &*chat_template;
  options.decode = f.decode;
  options.add_special_tokens = !f.no_special_tokens;
  options.threads = f.threads;
  options.input_name = f.input.empty() ? "stdin" : f.input;
  const std::int64_t failed =
      tokenizer::tokenize_jsonl(tokenizer, f.input.empty() ? std::cin : file, context.out, options,
                                [](std::int64_t, const std::string& reason) {
                                  spdlog::error("{}", reason);
                                });
  return failed > 0 ? 1 : 0;
}

}  // namespace

Command make_tokenize_command() {
  auto flags = std::make_shared<TokenizeFlags>();
  return {"tokenize", "Turn JSONL text into token ids with a Hugging Face tokenizer, or back",
          [flags](CLI::App& app) { add_tokenize_flags(app, *flags); },
          [flags](const RunContext& context) { return run_tokenize(*flags, context); }};
}

}  // namespace genesis::commands
