// Statements, following jinja2 3.1's parser.py rule for rule: each consumes its tags up to, not
// including, the final block end, which the body loop (subparse) expects, as jinja2's does.
// Macros note whether their bodies read varargs, kwargs or caller, which decides what arguments
// they accept, as jinja2 decides it.
#include "chat/jinja_builtins.hpp"
#include "chat/jinja_grammar.hpp"

namespace genesis::chat::jinja {

Body Parser::subparse(Names end_tokens) {
  DepthGuard guard(*this);
  Body body;
  while (true) {
    const Token& t = current();
    if (t.type == TokenType::eof) return body;
    if (t.type == TokenType::text) {
      Stmt s{StmtKind::text, t.line};
      s.text = t.value;
      body.push_back(std::move(s));
      next();
    } else if (t.type == TokenType::variable_begin) {
      next();
      Stmt s{StmtKind::output, t.line};
      s.exprs.push_back(parse_tuple(false, true, {}, false));
      expect(TokenType::variable_end);
      body.push_back(std::move(s));
    } else if (t.type == TokenType::block_begin) {
      next();
      if (current().type == TokenType::name &&
          std::find(end_tokens.begin(), end_tokens.end(), current().value) != end_tokens.end())
        return body;
      body.push_back(parse_statement());
      expect(TokenType::block_end);
    } else {
      fail_here("unexpected '" + describe(t) + "'");
    }
  }
}

// jinja2's parse_statements: the rest of the opening tag, then the body up to an end tag,
// left on that tag's name (or past it with drop_needle).
Body Parser::parse_statements(Names end_tokens, bool drop_needle) {
  skip_op(":");
  expect(TokenType::block_end);
  Body body = subparse(end_tokens);
  if (current().type == TokenType::eof) {
    std::string wanted;
    for (std::string_view e : end_tokens)
      wanted += (wanted.empty() ? "'" : " or '") + std::string(e) + "'";
    fail_here("unexpected end of template, expected " + wanted);
  }
  if (drop_needle) next();
  return body;
}

Stmt Parser::parse_statement() {
  const Token& t = current();
  if (t.type != TokenType::name) fail_here("tag name expected");
  const std::string& tag = t.value;
  if (tag == "for") return parse_for();
  if (tag == "if") return parse_if();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "call") return parse_call_block();
  if (tag == "filter") return parse_filter_block();
  if (tag == "with") return parse_with();
  if (tag == "print") return parse_print();
  if (tag == "generation") {
    Stmt s{StmtKind::generation, next().line};
    s.bodies.push_back(parse_scope_body({"endgeneration"}));
    return s;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail_here("'" + tag + "' outside a for loop");
    Stmt s{tag == "break" ? StmtKind::break_ : StmtKind::continue_, next().line};
    return s;
  }
  for (std::string_view unsupported :
       {"block", "extends", "include", "import", "from", "autoescape"})
    if (tag == unsupported) fail_here("unsupported tag '" + tag + "'");
  fail_here("unknown tag '" + tag + "'");
}

// A body that is a scope of its own (macro, caller, generation): loop controls inside it
// cannot reach a loop outside.
Body Parser::parse_scope_body(Names end_tokens) {
  const int saved = loop_depth_;
  loop_depth_ = 0;
  Body body = parse_statements(end_tokens, true);
  loop_depth_ = saved;
  return body;
}

Stmt Parser::parse_for() {
  Stmt s{StmtKind::for_, next().line};
  s.targets.push_back(parse_assign_target(true, false, {"in"}, false));
  expect_name("in");
  s.exprs.push_back(parse_tuple(false, false, {"recursive"}, false));
  s.exprs.push_back(skip_name("if") ? parse_expression(true) : nullptr);
  if (is_name("recursive")) fail_here("unsupported: recursive for loops");
  ++loop_depth_;
  s.bodies.push_back(parse_statements({"endfor", "else"}, false));
  --loop_depth_;
  if (next().value == "endfor") {
    s.bodies.emplace_back();
  } else {
    s.bodies.push_back(parse_statements({"endfor"}, true));
  }
  return s;
}

Stmt Parser::parse_if() {
  Stmt s{StmtKind::if_, next().line};
  while (true) {
    s.exprs.push_back(parse_tuple(false, false, {}, false));
    s.bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
    const Token& t = next();
    if (t.value == "elif") continue;
    if (t.value == "else") s.bodies.push_back(parse_statements({"endif"}, true));
    break;
  }
  return s;
}

Stmt Parser::parse_set() {
  const int line = next().line;
  Target target = parse_assign_target(true, false, {}, true);
  if (skip_op("=")) {
    Stmt s{StmtKind::set, line};
    s.targets.push_back(std::move(target));
    s.exprs.push_back(parse_tuple(false, true, {}, false));
    return s;
  }
  Stmt s{StmtKind::set_block, line};
  s.targets.push_back(std::move(target));
  s.exprs.push_back(is_op("|") ? parse_filter(nullptr, false) : nullptr);
  s.bodies.push_back(parse_statements({"endset"}, true));
  return s;
}

std::shared_ptr<MacroDef> Parser::parse_signature(std::string name) {
  auto macro = std::make_shared<MacroDef>();
  macro->name = std::move(name);
  expect_op("(");
  while (!is_op(")")) {
    if (!macro->params.empty()) expect_op(",");
    macro->params.push_back(expect_name().value);
    if (skip_op("="))
      macro->defaults.push_back(parse_expression(true));
    else if (!macro->defaults.empty())
      fail_here("non-default argument follows default argument");
  }
  expect_op(")");
  return macro;
}

void Parser::finish_macro(MacroDef& macro, Names end) {
  macro.body = parse_scope_body(end);
  macro.uses_varargs = names_used(macro.body, "varargs");
  macro.uses_kwargs = names_used(macro.body, "kwargs");
  macro.uses_caller = names_used(macro.body, "caller");
}

Stmt Parser::parse_macro() {
  Stmt s{StmtKind::macro, next().line};
  std::string name = expect_name().value;
  auto macro = parse_signature(std::move(name));
  finish_macro(*macro, {"endmacro"});
  s.macro = std::move(macro);
  return s;
}

Stmt Parser::parse_call_block() {
  Stmt s{StmtKind::call_block, next().line};
  auto caller = is_op("(") ? parse_signature("caller") : std::make_shared<MacroDef>();
  caller->name = "caller";
  ExprPtr call = parse_expression(true);
  if (call->kind != ExprKind::call) fail_at(s.line, "expected a call after 'call'");
  s.exprs.push_back(std::move(call));
  finish_macro(*caller, {"endcall"});
  s.macro = std::move(caller);
  return s;
}

Stmt Parser::parse_filter_block() {
  Stmt s{StmtKind::filter_block, next().line};
  s.exprs.push_back(parse_filter(nullptr, true));
  s.bodies.push_back(parse_statements({"endfilter"}, true));
  return s;
}

Stmt Parser::parse_with() {
  Stmt s{StmtKind::with, next().line};
  while (current().type != TokenType::block_end) {
    if (!s.targets.empty()) expect_op(",");
    s.targets.push_back(parse_assign_target(true, false, {}, false));
    expect_op("=");
    s.exprs.push_back(parse_expression(true));
  }
  s.bodies.push_back(parse_statements({"endwith"}, true));
  return s;
}

Stmt Parser::parse_print() {
  Stmt s{StmtKind::output, next().line};
  std::vector<ExprPtr> items;
  while (current().type != TokenType::block_end) {
    if (!items.empty()) expect_op(",");
    items.push_back(parse_expression(true));
  }
  // {% print a, b %} prints each: one output statement over a tuple would print the tuple.
  ExprPtr tuple = make(ExprKind::concat, s.line);
  tuple->operands = std::move(items);
  s.exprs.push_back(std::move(tuple));
  return s;
}

Target Parser::parse_assign_target(bool with_tuple, bool name_only, Names extra_end,
                                   bool with_namespace) {
  if (with_namespace && look().type == TokenType::op && look().value == ".") {
    Target t;
    t.kind = Target::Kind::attribute;
    t.name = expect_name().value;
    next();
    t.attribute = expect_name().value;
    return t;
  }
  if (name_only) {
    Target t;
    t.kind = Target::Kind::name;
    t.name = expect_name().value;
    return t;
  }
  const int line = current().line;
  ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
  return to_target(*e, line);
}

Target Parser::to_target(const Expr& e, int line) const {
  if (e.kind == ExprKind::name) {
    Target t;
    t.kind = Target::Kind::name;
    t.name = e.name;
    return t;
  }
  if (e.kind == ExprKind::tuple) {
    Target t;
    t.kind = Target::Kind::tuple;
    for (const ExprPtr& item : e.operands) t.items.push_back(to_target(*item, line));
    return t;
  }
  fail_at(line, "can't assign to this expression");
}

// Whether any expression in `body` (nested bodies included) reads the variable `name`.
bool Parser::names_used(const Body& body, std::string_view name) {
  for (const Stmt& s : body) {
    for (const ExprPtr& e : s.exprs)
      if (e && expr_uses(*e, name)) return true;
    for (const Body& b : s.bodies)
      if (names_used(b, name)) return true;
    if (s.macro) {
      for (const ExprPtr& e : s.macro->defaults)
        if (expr_uses(*e, name)) return true;
      if (names_used(s.macro->body, name)) return true;
    }
  }
  return false;
}

bool Parser::expr_uses(const Expr& e, std::string_view name) {
  if (e.kind == ExprKind::name && e.name == name) return true;
  for (const ExprPtr& o : e.operands)
    if (o && expr_uses(*o, name)) return true;
  for (const ExprPtr& o : e.args)
    if (expr_uses(*o, name)) return true;
  for (const auto& [key, o] : e.kwargs)
    if (expr_uses(*o, name)) return true;
  return false;
}

Body parse_template(const std::string& source, const std::string& name) {
  std::vector<Token> tokens;
  try {
    tokens = tokenize_template(source);
  } catch (const JinjaError& e) {
    throw ConfigError("chat template (" + name + ") line " + std::to_string(e.line) + ": " +
                      e.reason);
  }
  return Parser(std::move(tokens), name).parse();
}

}  // namespace genesis::chat::jinja
