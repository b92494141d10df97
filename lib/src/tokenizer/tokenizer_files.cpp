// Reading a tokenizer's files, each error naming the file.
#include "tokenizer/tokenizer_files.hpp"

#include <fstream>
#include <sstream>

#include "genesis/core/error.hpp"

namespace genesis::tokenizer {

namespace fs = std::filesystem;

TokenizerFiles find_tokenizer_files(const fs::path& path) {
  std::error_code ec;
  TokenizerFiles files;
  if (fs::is_regular_file(path, ec)) {
    files.tokenizer_json = path;
  } else if (fs::is_directory(path, ec)) {
    if (fs::is_regular_file(path / "tokenizer.json", ec)) {
      files.tokenizer_json = path / "tokenizer.json";
    } else if (fs::is_regular_file(path / "vocab.json", ec) &&
               fs::is_regular_file(path / "merges.txt", ec)) {
      files.vocab_json = path / "vocab.json";
      files.merges_txt = path / "merges.txt";
    } else {
      throw IoError("tokenizer directory '" + path.string() +
                    "' holds neither tokenizer.json nor vocab.json + merges.txt");
    }
  } else {
    throw IoError("tokenizer '" + path.string() + "' does not exist");
  }
  const fs::path dir = files.tokenizer_json ? files.tokenizer_json->parent_path()
                                            : files.vocab_json->parent_path();
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec))
    files.tokenizer_config = dir / "tokenizer_config.json";
  return files;
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json parse_tokenizer_json(std::string_view text, std::string_view name) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(std::string(name) + ": not valid JSON: " + e.what());
  }
  GENESIS_CHECK(json.is_object(), ConfigError, std::string(name) + ": not a JSON object");
  return json;
}

nlohmann::json gpt2_tokenizer_json(const fs::path& vocab_json, const fs::path& merges_txt) {
  const nlohmann::json vocab = parse_tokenizer_json(read_text_file(vocab_json), vocab_json.string());
  const std::string text = read_text_file(merges_txt);
  nlohmann::json merges = nlohmann::json::array();
  std::size_t line_number = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    const std::size_t space = line.find(' ');
    GENESIS_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                  ConfigError,
                  merges_txt.string() + ":" + std::to_string(line_number) +
                      ": a merge is two tokens separated by one space");
    merges.push_back(std::move(line));
  }
  const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", true},
                                     {"use_regex", true}};
  nlohmann::json json = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
                         {"pre_tokenizer", byte_level},
                         {"post_processor", byte_level},
                         {"decoder", byte_level},
                         {"added_tokens", nlohmann::json::array()}};
  if (auto it = vocab.find("<|endoftext|>"); it != vocab.end())
    json["added_tokens"].push_back({{"id", *it},
                                    {"content", "<|endoftext|>"},
                                    {"special", true},
                                    {"normalized", false}});
  return json;
}

SpecialTokens read_special_tokens(const fs::path& tokenizer_config, const Tokenizer& tokenizer) {
  const nlohmann::json config =
      parse_tokenizer_json(read_text_file(tokenizer_config), tokenizer_config.string());
  auto id_of = [&](const char* key) -> std::optional<std::int32_t> {
    auto it = config.find(key);
    if (it == config.end()) return std::nullopt;
    // A token is a string, or an AddedToken object with its "content".
    const nlohmann::json& value = it->is_object() ? it->value("content", nlohmann::json()) : *it;
    if (!value.is_string()) return std::nullopt;
    return tokenizer.token_to_id(value.get<std::string>());
  };
  return SpecialTokens{id_of("bos_token"), id_of("eos_token"), id_of("pad_token"),
                       id_of("unk_token")};
}

}  // namespace genesis::tokenizer
