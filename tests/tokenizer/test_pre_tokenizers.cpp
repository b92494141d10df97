// The splitting rules under the pre-tokenizers, against the examples Hugging Face's tokenizers
// documents and tests for them (its SplitDelimiterBehavior doc and normalizer.rs tests), and the
// regex rewrite that makes PCRE2 classify characters as Oniguruma does.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizers.hpp"
#include "tokenizer/regex.hpp"

using namespace genesis::tokenizer;

namespace {

std::vector<std::string> split_on(std::string_view text, std::string_view delimiter,
                                  SplitBehavior behavior, bool invert = false) {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  Pattern{std::string(delimiter), nullptr}.find_all(text, matches);
  std::vector<std::string> pieces;
  for (const Range& r : split_ranges(text, matches, behavior, invert))
    pieces.emplace_back(text.substr(r.begin, r.end - r.begin));
  return pieces;
}

using Pieces = std::vector<std::string>;

}  // namespace

TEST_CASE("split behaviours cut 'the-final--countdown' as tokenizers documents") {
  const std::string text = "the-final--countdown";
  CHECK(split_on(text, "-", SplitBehavior::kRemoved) == Pieces{"the", "final", "countdown"});
  CHECK(split_on(text, "-", SplitBehavior::kIsolated) ==
        Pieces{"the", "-", "final", "-", "-", "countdown"});
  CHECK(split_on(text, "-", SplitBehavior::kMergedWithPrevious) ==
        Pieces{"the-", "final-", "-", "countdown"});
  CHECK(split_on(text, "-", SplitBehavior::kMergedWithNext) ==
        Pieces{"the", "-final", "-", "-countdown"});
  CHECK(split_on(text, "-", SplitBehavior::kContiguous) ==
        Pieces{"the", "-", "final", "--", "countdown"});
  // invert: the delimiters are what is not matched.
  CHECK(split_on("Hello Hey", " ", SplitBehavior::kRemoved, true) == Pieces{" "});
}

TEST_CASE("byte-level characters are GPT-2's: printable bytes as themselves, the rest shifted") {
  const auto& chars = byte_level_chars();
  CHECK(chars['A'] == "A");
  CHECK(chars[' '] == "\xC4\xA0");   // U+0120 'Ġ'
  CHECK(chars['\n'] == "\xC4\x8A");  // U+010A 'Ċ'
  CHECK(chars[0xAD] == "\xC5\x83");  // the soft hyphen is not printable: U+0143
  CHECK(chars[0xE9] == "\xC3\xA9");  // 'é' stands for itself
}

TEST_CASE("regexes classify whitespace, digits and word characters as Oniguruma does") {
  CHECK(oniguruma_to_pcre2(R"(\s+(?!\S))") ==
        R"([\t\n\x0B\f\r\x{85}\p{Z}]+(?![^\t\n\x0B\f\r\x{85}\p{Z}]))");
  CHECK(oniguruma_to_pcre2(R"( ?[^\s\p{L}\p{N}]+)") ==
        R"( ?[^\t\n\x0B\f\r\x{85}\p{Z}\p{L}\p{N}]+)");
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  // U+180E MONGOLIAN VOWEL SEPARATOR is no longer a space (PCRE2's own \s still counts it);
  // U+0085 NEXT LINE is one for Oniguruma.
  Regex(R"(\s)").find_all("\xE1\xA0\x8E|\xC2\x85|\xE3\x80\x80", matches);
  REQUIRE(matches.size() == 2);
  CHECK(matches[0].first == 4);
  CHECK(matches[1].first == 7);
  CHECK_THROWS_WITH(Regex(R"([\S])"), Catch::Contains("inside a character class"));
  CHECK_THROWS_WITH(Regex("(unclosed"), Catch::Contains("does not compile"));
}

TEST_CASE("an empty match right after a match is skipped, as the onig crate's find_iter does") {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  Regex("x*").find_all("\xC3\xA9x", matches);  // "éx": "" at 0, "x", and no "" at the end
  REQUIRE(matches.size() == 2);
  CHECK(matches[0] == std::pair<std::size_t, std::size_t>{0, 0});
  CHECK(matches[1] == std::pair<std::size_t, std::size_t>{2, 3});
}
