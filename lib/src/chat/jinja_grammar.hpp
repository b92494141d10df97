// The parser of templates, shared by the two files that define its rules: jinja_parser.cpp
// (statements) and jinja_expressions.cpp (expressions), each rule the jinja2 parser.py function of
// the same name. Private to the parser: the interpreter sees parse_template() alone.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.hpp"
#include "chat/jinja_lexer.hpp"
#include "chat/jinja_parser.hpp"
#include "genesis/core/error.hpp"

namespace genesis::chat::jinja {

using Names = std::initializer_list<std::string_view>;

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string name)
      : tokens_(std::move(tokens)), name_(std::move(name)) {}

  Body parse() {
    Body body = subparse({});
    if (current().type != TokenType::eof) fail_here("unexpected '" + describe(current()) + "'");
    return body;
  }

 private:
  // --- token stream -------------------------------------------------------------------------
  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op) const {
    return current().type == TokenType::op && current().value == op;
  }
  bool is_name(std::string_view name) const {
    return current().type == TokenType::name && current().value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::eof: return "end of template";
      case TokenType::block_end: return "end of statement block";
      case TokenType::variable_end: return "end of print statement";
      case TokenType::block_begin: return "begin of statement block";
      case TokenType::variable_begin: return "begin of print statement";
      case TokenType::text: return "template data";
      default: return t.value;
    }
  }
  const Token& expect_op(std::string_view op) {
    if (!is_op(op))
      fail_here("expected '" + std::string(op) + "', got '" + describe(current()) + "'");
    return next();
  }
  const Token& expect_name() {
    if (current().type != TokenType::name)
      fail_here("expected a name, got '" + describe(current()) + "'");
    return next();
  }
  void expect_name(std::string_view name) {
    if (!is_name(name))
      fail_here("expected '" + std::string(name) + "', got '" + describe(current()) + "'");
    next();
  }
  void expect(TokenType type) {
    if (current().type != type) {
      const Token wanted(type, "", 0);
      fail_here("expected " + describe(wanted) + ", got '" + describe(current()) + "'");
    }
    next();
  }

  [[noreturn]] void fail_at(int line, const std::string& reason) const {
    throw ConfigError("chat template (" + name_ + ") line " + std::to_string(line) + ": " + reason);
  }
  [[noreturn]] void fail_here(const std::string& reason) const { fail_at(current().line, reason); }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth)
        p_.fail_here("nesting deeper than " + std::to_string(kMaxParseDepth) + " levels");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // --- statements (jinja_parser.cpp) --------------------------------------------------------
  Body subparse(Names end_tokens);
  Body parse_statements(Names end_tokens, bool drop_needle);
  Stmt parse_statement();
  Body parse_scope_body(Names end_tokens);
  Stmt parse_for();
  Stmt parse_if();
  Stmt parse_set();
  std::shared_ptr<MacroDef> parse_signature(std::string name);
  void finish_macro(MacroDef& macro, Names end);
  Stmt parse_macro();
  Stmt parse_call_block();
  Stmt parse_filter_block();
  Stmt parse_with();
  Stmt parse_print();
  Target parse_assign_target(bool with_tuple, bool name_only, Names extra_end, bool with_namespace);
  Target to_target(const Expr& e, int line) const;
  static bool names_used(const Body& body, std::string_view name);
  static bool expr_uses(const Expr& e, std::string_view name);

  // --- expressions (jinja_expressions.cpp) --------------------------------------------------
  static ExprPtr make(ExprKind kind, int line);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parens);
  bool is_tuple_end(Names extra_end) const;
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr node);
  std::string dotted_name();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);

  std::vector<Token> tokens_;
  std::string name_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace genesis::chat::jinja
