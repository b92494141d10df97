// Parses a template's tokens into statements, following jinja2 3.1's parser.py rule for rule
// (precedence, tuples without parentheses, `is` tests taking one bare argument, chained
// comparisons), with transformers' extensions: loop controls (break, continue) and
// {% generation %}. What genesis does not implement fails here, at load, naming the construct
// and its line: include/extends/import/block, recursive loops, *args/**kwargs in calls, and
// filters or tests missing from jinja_builtins.
#pragma once

#include <string>

#include "chat/jinja_ast.hpp"

namespace genesis::chat::jinja {

// Nesting of expressions and statements a template may have; deeper ones fail to parse rather
// than exhaust the stack of the recursive-descent parser and of rendering.
inline constexpr int kMaxParseDepth = 200;

// The template's statements. Throws ConfigError "chat template (NAME) line N: reason".
Body parse_template(const std::string& source, const std::string& name);

}  // namespace genesis::chat::jinja
