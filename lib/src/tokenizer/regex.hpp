// The regular expressions of tokenizer.json, compiled by PCRE2 (with its JIT) to behave as the
// Oniguruma engine Hugging Face's tokenizers uses: \s, \S, \d, \D, \w and \W are rewritten to
// Oniguruma's Unicode definitions, so the two engines agree on every code point both know.
// Matching walks a whole string the way Rust's find_iter does. Not here: what a pre-tokenizer
// does with the matches (pre_tokenizers.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace genesis::tokenizer {

class Regex {
 public:
  // Throws ConfigError naming the pattern and PCRE2's reason when it does not compile.
  explicit Regex(std::string_view oniguruma_pattern);
  // A literal string: matched as itself, every character taken literally.
  static Regex literal(std::string_view text);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Every non-overlapping match in text (valid UTF-8) as byte offsets [begin, end), left to
  // right. An empty match right after the previous match is skipped, as the onig crate does.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  void compile(const std::string& pcre_pattern);
  std::string pattern_;
  struct Code;
  std::unique_ptr<Code> code_;
};

// Oniguruma's escapes spelled in PCRE2's syntax (exposed for the test that checks the rewrite).
std::string oniguruma_to_pcre2(std::string_view pattern);

}  // namespace genesis::tokenizer
