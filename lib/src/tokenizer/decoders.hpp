// tokenizer.json's "decoder": ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace and
// Sequence of them, turning the tokens of a list of ids back into text as tokenizers'
// decode_chain does (each step maps the list of token strings to a new list, which is joined at
// the end; without a decoder the tokens are joined with spaces).
#pragma once

#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/normalizers.hpp"

namespace genesis::tokenizer {

class Decoder {
 public:
  Decoder() = default;
  static Decoder from_json(const nlohmann::json& json);
  bool empty() const { return steps_.empty(); }
  // Whether the decoder is ByteLevel alone: decoding is then the tokens' bytes, concatenated.
  bool is_byte_level_only() const;
  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct ByteLevel {};
  struct Replace {
    Pattern pattern;
    std::string content;
  };
  struct ByteFallback {};
  struct Fuse {};
  struct Strip {
    std::string content;  // one character
    std::size_t start, stop;
  };
  struct Metaspace {
    std::string replacement;
    bool prepend;  // prepend_scheme is not "never": the first token loses its replacements
  };
  using Step = std::variant<ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace>;
  static void parse_into(const nlohmann::json& json, std::vector<Step>& steps);
  std::vector<Step> steps_;
};

}  // namespace genesis::tokenizer
