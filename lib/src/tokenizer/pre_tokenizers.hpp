// tokenizer.json's "pre_tokenizer": ByteLevel, Split, Digits, Metaspace and Sequence of them,
// cutting one normalized segment into the pieces the model encodes one at a time, with the
// splitting rules (the five delimiter behaviours, invert) of Hugging Face's tokenizers. Pieces
// are passed to a callback as views, so no piece is copied unless a step rewrites it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/function_ref.hpp"
#include "tokenizer/normalizers.hpp"

namespace genesis::tokenizer {

// How a Split step treats the delimiters it finds (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
struct Range {
  std::size_t begin, end;
};
// The pieces a split makes of text from its matches, empty pieces left out.
std::vector<Range> split_ranges(std::string_view text,
                                const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                                SplitBehavior behavior, bool invert);

// The 256 characters GPT-2's byte-level BPE writes bytes as (printable bytes stand for
// themselves, the rest are shifted to U+0100 and up), each as UTF-8.
const std::vector<std::string>& byte_level_chars();
// The byte a byte-level character stands for, or -1 when the code point is none of them.
int byte_level_byte(char32_t cp);
// A token spelled in byte-level characters, as the bytes it stands for; nullopt when one of its
// characters is not a byte-level character.
std::optional<std::string> byte_level_bytes(std::string_view token);

// A piece and whether it starts where the input starts (Metaspace's prepend_scheme "first").
using PieceSink = FunctionRef<void(std::string_view piece, bool first)>;

class PreTokenizer {
 public:
  PreTokenizer() = default;  // none: each segment is one piece
  static PreTokenizer from_json(const nlohmann::json& json);
  // Whether the last step is ByteLevel: the model may then take the raw bytes of each piece
  // instead of their byte-level characters (set_raw_bytes), which is the same and faster.
  bool ends_with_byte_level() const;
  void set_raw_bytes(bool raw) { raw_bytes_ = raw; }
  void run(std::string_view segment, bool first, PieceSink emit) const;

 private:
  struct ByteLevel {
    bool add_prefix_space;
    bool use_regex;
  };
  struct Split {
    Pattern pattern;
    SplitBehavior behavior;
    bool invert;
  };
  struct Digits {
    bool individual;
  };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Metaspace {
    std::string replacement;
    Prepend prepend;
    bool split;
  };
  using Step = std::variant<ByteLevel, Split, Digits, Metaspace>;
  static void parse_into(const nlohmann::json& json, std::vector<Step>& steps);
  void run_from(std::size_t index, std::string_view piece, bool first, PieceSink emit) const;
  void split_and_continue(std::size_t index, std::string_view piece, bool first,
                          const std::vector<Range>& ranges, PieceSink emit) const;
  std::vector<Step> steps_;
  bool raw_bytes_ = false;
};

}  // namespace genesis::tokenizer
