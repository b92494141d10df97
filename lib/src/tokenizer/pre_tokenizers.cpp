// The pre-tokenizers of tokenizer.json. Each step cuts a piece into sub-pieces and hands each to
// the next step; the last step hands them to the model. A step that rewrites its piece (a prefix
// space, Metaspace's replacement, the byte-level characters) holds the new text on its stack
// frame while the later steps run over views of it.
#include "tokenizer/pre_tokenizers.hpp"

#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

namespace {

using Matches = std::vector<std::pair<std::size_t, std::size_t>>;

struct Flagged {
  std::size_t begin, end;
  bool match;
};

// tokenizers' Pattern::find_matches: the matches and the gaps between them, in order.
std::vector<Flagged> with_gaps(std::string_view text, const Matches& matches) {
  if (text.empty()) return {{0, 0, false}};
  std::vector<Flagged> out;
  out.reserve(matches.size() * 2 + 1);
  std::size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    if (prev != begin) out.push_back({prev, begin, false});
    out.push_back({begin, end, true});
    prev = end;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return out;
}

const Regex& gpt2_regex() {
  static const Regex regex(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return regex;
}

SplitBehavior parse_behavior(const std::string& name, std::string_view where) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw ConfigError("tokenizer.json: " + std::string(where) + ": unknown behavior '" + shown(name) + "'");
}

}  // namespace

std::vector<Range> split_ranges(std::string_view text, const Matches& matches,
                                SplitBehavior behavior, bool invert) {
  std::vector<Flagged> parts = with_gaps(text, matches);
  if (invert)
    for (Flagged& part : parts) part.match = !part.match;
  // `keep == false` marks what Removed drops; the merging behaviours fold as tokenizers does.
  struct Kept {
    std::size_t begin, end;
    bool drop;
  };
  std::vector<Kept> folded;
  folded.reserve(parts.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Flagged& p : parts) folded.push_back({p.begin, p.end, false});
      break;
    case SplitBehavior::kRemoved:
      for (const Flagged& p : parts) folded.push_back({p.begin, p.end, p.match});
      break;
    case SplitBehavior::kContiguous:
      for (const Flagged& p : parts) {
        if (p.match == previous_match && !folded.empty())
          folded.back().end = p.end;
        else
          folded.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Flagged& p : parts) {
        if (p.match && !previous_match && !folded.empty())
          folded.back().end = p.end;
        else
          folded.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !previous_match && !folded.empty())
          folded.back().begin = it->begin;
        else
          folded.push_back({it->begin, it->end, false});
        previous_match = it->match;
      }
      std::reverse(folded.begin(), folded.end());
      break;
  }
  std::vector<Range> out;
  out.reserve(folded.size());
  for (const Kept& k : folded)
    if (!k.drop && k.end > k.begin) out.push_back({k.begin, k.end});
  return out;
}

const std::vector<std::string>& byte_level_chars() {
  static const std::vector<std::string> chars = [] {
    std::vector<std::string> out(256);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      append_utf8(out[b], printable ? static_cast<char32_t>(b) : next++);
    }
    return out;
  }();
  return chars;
}

int byte_level_byte(char32_t cp) {
  // The characters are U+0021..U+0143: a table of 0x144 entries covers them.
  static const std::array<std::int16_t, 0x144> bytes = [] {
    std::array<std::int16_t, 0x144> table;
    table.fill(-1);
    for (int b = 0; b < 256; ++b)
      table[decode_utf8(byte_level_chars()[b], 0).cp] = static_cast<std::int16_t>(b);
    return table;
  }();
  return cp < bytes.size() ? bytes[cp] : -1;
}

std::optional<std::string> byte_level_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (std::size_t pos = 0; pos < token.size();) {
    const DecodedChar c = decode_utf8(token, pos);
    const int byte = byte_level_byte(c.cp);
    if (byte < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte));
    pos += c.len;
  }
  return bytes;
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& json) {
  PreTokenizer pre;
  if (!json.is_null()) parse_into(json, pre.steps_);
  return pre;
}

void PreTokenizer::parse_into(const nlohmann::json& json, std::vector<Step>& steps) {
  const std::string type = type_of(json, "pre_tokenizer");
  const std::string where = "pre_tokenizer " + shown(type);
  if (type == "Sequence") {
    for (const auto& child : array_field(json, "pretokenizers", where)) parse_into(child, steps);
  } else if (type == "ByteLevel") {
    steps.emplace_back(ByteLevel{bool_field(json, "add_prefix_space", where, true),
                                 bool_field(json, "use_regex", where, true)});
  } else if (type == "Split") {
    steps.emplace_back(Split{parse_pattern(field(json, "pattern", where), where),
                             parse_behavior(string_field(json, "behavior", where), where),
                             bool_field(json, "invert", where, false)});
  } else if (type == "Digits") {
    steps.emplace_back(Digits{bool_field(json, "individual_digits", where, false)});
  } else if (type == "Metaspace") {
    Metaspace m{string_field(json, "replacement", where), Prepend::kAlways,
                bool_field(json, "split", where, true)};
    GENESIS_CHECK(m.replacement.size() == utf8_length(m.replacement.empty() ? 0 : m.replacement[0]) &&
                      !m.replacement.empty(),
                  ConfigError, "tokenizer.json: " + where + ": \"replacement\" must be one character");
    if (const nlohmann::json* scheme = optional_field(json, "prepend_scheme")) {
      const std::string s = scheme->is_string() ? scheme->get<std::string>() : "";
      if (s == "always") m.prepend = Prepend::kAlways;
      else if (s == "first") m.prepend = Prepend::kFirst;
      else if (s == "never") m.prepend = Prepend::kNever;
      else throw ConfigError("tokenizer.json: " + where + ": unknown prepend_scheme '" + shown(s) + "'");
    } else if (!bool_field(json, "add_prefix_space", where, true)) {
      m.prepend = Prepend::kNever;
    }
    steps.emplace_back(std::move(m));
  } else {
    throw NotSupported("tokenizer.json: pre_tokenizer type '" + shown(type) +
                       "' is not supported (supported: ByteLevel, Split, Digits, Metaspace, "
                       "Sequence)");
  }
}

bool PreTokenizer::ends_with_byte_level() const {
  return !steps_.empty() && std::holds_alternative<ByteLevel>(steps_.back());
}

void PreTokenizer::run(std::string_view segment, bool first, PieceSink emit) const {
  if (!segment.empty()) run_from(0, segment, first, emit);
}

void PreTokenizer::split_and_continue(std::size_t index, std::string_view piece, bool first,
                                      const std::vector<Range>& ranges, PieceSink emit) const {
  for (const Range& r : ranges)
    run_from(index + 1, piece.substr(r.begin, r.end - r.begin), first && r.begin == 0, emit);
}

void PreTokenizer::run_from(std::size_t index, std::string_view piece, bool first,
                            PieceSink emit) const {
  if (index == steps_.size()) {
    emit(piece, first);
    return;
  }
  const Step& step = steps_[index];
  Matches matches;
  if (const auto* b = std::get_if<ByteLevel>(&step)) {
    std::string prefixed;
    if (b->add_prefix_space && piece.front() != ' ') {
      prefixed = " " + std::string(piece);
      piece = prefixed;
    }
    std::vector<Range> ranges{{0, piece.size()}};
    if (b->use_regex) {
      gpt2_regex().find_all(piece, matches);
      ranges = split_ranges(piece, matches, SplitBehavior::kIsolated, false);
    }
    const bool last = index + 1 == steps_.size();
    for (const Range& r : ranges) {
      const std::string_view sub = piece.substr(r.begin, r.end - r.begin);
      if (last && raw_bytes_) {
        run_from(index + 1, sub, first && r.begin == 0, emit);
        continue;
      }
      std::string mapped;
      for (char c : sub) mapped += byte_level_chars()[static_cast<unsigned char>(c)];
      run_from(index + 1, mapped, first && r.begin == 0, emit);
    }
  } else if (const auto* s = std::get_if<Split>(&step)) {
    s->pattern.find_all(piece, matches);
    split_and_continue(index, piece, first, split_ranges(piece, matches, s->behavior, s->invert),
                       emit);
  } else if (const auto* d = std::get_if<Digits>(&step)) {
    for (std::size_t pos = 0; pos < piece.size();) {
      const DecodedChar c = decode_utf8(piece, pos);
      if (is_numeric(c.cp)) matches.emplace_back(pos, pos + c.len);
      pos += c.len;
    }
    // A character predicate's gaps are whole runs, as with_gaps makes them.
    split_and_continue(index, piece, first,
                       split_ranges(piece, matches,
                                    d->individual ? SplitBehavior::kIsolated
                                                  : SplitBehavior::kContiguous,
                                    false),
                       emit);
  } else if (const auto* m = std::get_if<Metaspace>(&step)) {
    std::string text = replace_all(piece, Pattern{" ", nullptr}, m->replacement);
    const bool starts = text.compare(0, m->replacement.size(), m->replacement) == 0;
    if (!starts && (m->prepend == Prepend::kAlways || (m->prepend == Prepend::kFirst && first)))
      text.insert(0, m->replacement);
    if (!m->split) {
      run_from(index + 1, text, first, emit);
      return;
    }
    Pattern{m->replacement, nullptr}.find_all(text, matches);
    split_and_continue(index, text, first,
                       split_ranges(text, matches, SplitBehavior::kMergedWithNext, false), emit);
  }
}

}  // namespace genesis::tokenizer
