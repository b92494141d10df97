// Splits a template into jinja2's tokens, with its whitespace rules as transformers configures
// them: newlines normalized to \n and one trailing newline dropped, `{%-`/`-%}` (and for `{{`,
// `{#`) stripping, trim_blocks (the newline after a block or comment tag) and lstrip_blocks (the
// spaces before a block or comment tag that starts its line), `+` to keep either, comments
// dropped and raw blocks passed through as text. Not here: line statements (off in transformers).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace genesis::chat::jinja {

enum class TokenType {
  text,            // template data between tags
  variable_begin,  // {{
  variable_end,    // }}
  block_begin,     // {%
  block_end,       // %}
  name,
  string,    // value: the decoded string
  integer,   // integer_value
  floating,  // float_value
  op,        // value: the operator, e.g. "//" or "("
  eof,
};

struct Token {
  Token(TokenType t, std::string v, int l) : type(t), value(std::move(v)), line(l) {}
  TokenType type;
  std::string value;
  int line = 1;
  std::int64_t integer_value = 0;
  double float_value = 0;
};

// The tokens of `source` (valid UTF-8), ending with eof. Throws JinjaError (with its line) on
// text jinja2's lexer refuses: an unclosed comment or tag, an unbalanced bracket, a stray
// character.
std::vector<Token> tokenize_template(const std::string& source);

}  // namespace genesis::chat::jinja
