// Expressions, following jinja2 3.1's parser.py: its precedence (`or` < `and` < `not` <
// comparisons, chained as Python's < + - < ~ < * / // % < ** < unary < filters and tests <
// postfix), tuples without parentheses where jinja2 allows them, and `is` tests taking one bare
// argument. Filters and tests are looked up here, so an unknown one fails at load.
#include "chat/jinja_builtins.hpp"
#include "chat/jinja_grammar.hpp"

namespace genesis::chat::jinja {

ExprPtr Parser::make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  DepthGuard guard(*this);
  int line = current().line;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    ExprPtr test = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
    ExprPtr e = make(ExprKind::condition, line);
    e->operands.push_back(std::move(test));
    e->operands.push_back(std::move(expr1));
    e->operands.push_back(std::move(otherwise));
    expr1 = std::move(e);
    line = current().line;
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  const int line = current().line;
  ExprPtr left = parse_and();
  while (skip_name("or")) {
    ExprPtr e = make(ExprKind::logical_or, line);
    e->operands.push_back(std::move(left));
    e->operands.push_back(parse_and());
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  const int line = current().line;
  ExprPtr left = parse_not();
  while (skip_name("and")) {
    ExprPtr e = make(ExprKind::logical_and, line);
    e->operands.push_back(std::move(left));
    e->operands.push_back(parse_not());
    left = std::move(e);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (is_name("not")) {
    ExprPtr e = make(ExprKind::logical_not, next().line);
    e->operands.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = current().line;
  ExprPtr expr = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (current().type == TokenType::op &&
        (current().value == "==" || current().value == "!=" || current().value == "<" ||
         current().value == "<=" || current().value == ">" || current().value == ">=")) {
      op = next().value;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && look().type == TokenType::name && look().value == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ExprKind::compare, line);
      cmp->operands.push_back(std::move(expr));
    }
    cmp->ops.push_back(op);
    cmp->operands.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(expr);
}

ExprPtr Parser::binary(std::string op, ExprPtr left, ExprPtr right, int line) {
  ExprPtr e = make(ExprKind::binary, line);
  e->name = std::move(op);
  e->operands.push_back(std::move(left));
  e->operands.push_back(std::move(right));
  return e;
}

ExprPtr Parser::parse_math1() {
  const int line = current().line;
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    std::string op = next().value;
    left = binary(std::move(op), std::move(left), parse_concat(), line);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = current().line;
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  ExprPtr e = make(ExprKind::concat, line);
  e->operands.push_back(std::move(first));
  while (skip_op("~")) e->operands.push_back(parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  const int line = current().line;
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = next().value;
    left = binary(std::move(op), std::move(left), parse_pow(), line);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  const int line = current().line;
  ExprPtr left = parse_unary(true);
  while (skip_op("**")) left = binary("**", std::move(left), parse_unary(true), line);
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const Token& t = next();
    node = make(t.value == "-" ? ExprKind::negate : ExprKind::plus, t.line);
    node->operands.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  DepthGuard guard(*this);
  const Token& t = current();
  if (t.type == TokenType::name) {
    next();
    if (t.value == "true" || t.value == "True" || t.value == "false" || t.value == "False") {
      ExprPtr e = make(ExprKind::constant, t.line);
      e->value = Value(t.value == "true" || t.value == "True");
      return e;
    }
    if (t.value == "none" || t.value == "None") {
      ExprPtr e = make(ExprKind::constant, t.line);
      e->value = Value::none();
      return e;
    }
    ExprPtr e = make(ExprKind::name, t.line);
    e->name = t.value;
    return e;
  }
  if (t.type == TokenType::string) {
    ExprPtr e = make(ExprKind::constant, t.line);
    std::string s;
    while (current().type == TokenType::string) s += next().value;
    e->value = Value(std::move(s));
    return e;
  }
  if (t.type == TokenType::integer || t.type == TokenType::floating) {
    ExprPtr e = make(ExprKind::constant, t.line);
    e->value = t.type == TokenType::integer ? Value(t.integer_value) : Value(t.float_value);
    next();
    return e;
  }
  if (is_op("(")) {
    next();
    ExprPtr e = parse_tuple(false, true, {}, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  fail_here("unexpected '" + describe(t) + "'");
}

// jinja2's parse_tuple: one expression, or a tuple when commas follow (no parentheses needed).
ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr, Names extra_end,
                            bool explicit_parens) {
  const int line = current().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(","))
      is_tuple = true;
    else
      break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail_here("expected an expression, got '" + describe(current()) + "'");
  }
  ExprPtr e = make(ExprKind::tuple, line);
  e->operands = std::move(items);
  return e;
}

bool Parser::is_tuple_end(Names extra_end) const {
  const Token& t = current();
  if (t.type == TokenType::variable_end || t.type == TokenType::block_end ||
      (t.type == TokenType::op && t.value == ")"))
    return true;
  return t.type == TokenType::name &&
         std::find(extra_end.begin(), extra_end.end(), t.value) != extra_end.end();
}

ExprPtr Parser::parse_list() {
  ExprPtr e = make(ExprKind::list, expect_op("[").line);
  while (!is_op("]")) {
    if (!e->operands.empty()) expect_op(",");
    if (is_op("]")) break;
    e->operands.push_back(parse_expression(true));
  }
  expect_op("]");
  return e;
}

ExprPtr Parser::parse_dict() {
  ExprPtr e = make(ExprKind::dict, expect_op("{").line);
  while (!is_op("}")) {
    if (!e->operands.empty()) expect_op(",");
    if (is_op("}")) break;
    e->operands.push_back(parse_expression(true));
    expect_op(":");
    e->operands.push_back(parse_expression(true));
  }
  expect_op("}");
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("["))
      node = parse_subscript(std::move(node));
    else if (is_op("("))
      node = parse_call(std::move(node));
    else
      return node;
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|"))
      node = parse_filter(std::move(node), false);
    else if (is_name("is"))
      node = parse_test(std::move(node));
    else if (is_op("("))
      node = parse_call(std::move(node));
    else
      return node;
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  DepthGuard guard(*this);
  const Token& t = next();
  if (t.value == ".") {
    const Token& attr = next();
    if (attr.type == TokenType::name) {
      ExprPtr e = make(ExprKind::getattr, t.line);
      e->name = attr.value;
      e->operands.push_back(std::move(node));
      return e;
    }
    if (attr.type != TokenType::integer) fail_at(attr.line, "expected name or number");
    ExprPtr index = make(ExprKind::constant, attr.line);
    index->value = Value(attr.integer_value);
    ExprPtr e = make(ExprKind::getitem, t.line);
    e->operands.push_back(std::move(node));
    e->operands.push_back(std::move(index));
    return e;
  }
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  ExprPtr e = make(ExprKind::getitem, t.line);
  e->operands.push_back(std::move(node));
  if (args.size() == 1) {
    e->operands.push_back(std::move(args[0]));
  } else {
    ExprPtr tuple = make(ExprKind::tuple, t.line);
    tuple->operands = std::move(args);
    e->operands.push_back(std::move(tuple));
  }
  return e;
}

ExprPtr Parser::parse_subscribed() {
  const int line = current().line;
  std::vector<ExprPtr> args;
  if (is_op(":")) {
    next();
    args.push_back(nullptr);
  } else {
    ExprPtr node = parse_expression(true);
    if (!is_op(":")) return node;
    next();
    args.push_back(std::move(node));
  }
  if (is_op(":"))
    args.push_back(nullptr);
  else if (!is_op("]") && !is_op(","))
    args.push_back(parse_expression(true));
  else
    args.push_back(nullptr);
  if (is_op(":")) {
    next();
    args.push_back(!is_op("]") && !is_op(",") ? parse_expression(true) : nullptr);
  } else {
    args.push_back(nullptr);
  }
  ExprPtr e = make(ExprKind::slice, line);
  e->operands = std::move(args);
  return e;
}

void Parser::parse_call_args(Expr& e) {
  const int line = expect_op("(").line;
  bool require_comma = false;
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) fail_here("unsupported: *args and **kwargs in a call");
    if (current().type == TokenType::name && look().type == TokenType::op && look().value == "=") {
      std::string key = next().value;
      next();
      e.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!e.kwargs.empty()) fail_at(line, "invalid syntax for function call expression");
      e.args.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr node) {
  DepthGuard guard(*this);
  ExprPtr e = make(ExprKind::call, current().line);
  e->operands.push_back(std::move(node));
  parse_call_args(*e);
  return e;
}

std::string Parser::dotted_name() {
  std::string name = expect_name().value;
  while (skip_op(".")) name += "." + expect_name().value;
  return name;
}

// A chain of filters; with a null node (a filter block, a block set) the chain starts from a
// placeholder for the block's text.
ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  if (!node) node = make(ExprKind::placeholder, current().line);
  while (is_op("|") || start_inline) {
    DepthGuard guard(*this);
    if (!start_inline) next();
    const int line = current().line;
    ExprPtr e = make(ExprKind::filter, line);
    e->name = dotted_name();
    e->filter = find_filter(e->name);
    if (e->filter == nullptr)
      fail_at(line, (is_jinja2_filter(e->name) ? "unsupported filter '" : "unknown filter '") +
                        e->name + "'");
    e->operands.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*e);
    node = std::move(e);
    start_inline = false;
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  DepthGuard guard(*this);
  const int line = next().line;
  const bool negated = skip_name("not");
  ExprPtr e = make(ExprKind::test, line);
  e->name = dotted_name();
  e->test = find_test(e->name);
  if (e->test == nullptr)
    fail_at(line,
            (is_jinja2_test(e->name) ? "unsupported test '" : "unknown test '") + e->name + "'");
  e->operands.push_back(std::move(node));
  const Token& t = current();
  const bool bare_argument =
      (t.type == TokenType::name || t.type == TokenType::string || t.type == TokenType::integer ||
       t.type == TokenType::floating ||
       (t.type == TokenType::op && (t.value == "(" || t.value == "[" || t.value == "{"))) &&
      !(t.type == TokenType::name && (t.value == "else" || t.value == "or" || t.value == "and"));
  if (is_op("(")) {
    parse_call_args(*e);
  } else if (bare_argument) {
    if (is_name("is")) fail_here("you cannot chain multiple tests with is");
    e->args.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return e;
  ExprPtr n = make(ExprKind::logical_not, line);
  n->operands.push_back(std::move(e));
  return n;
}

}  // namespace genesis::chat::jinja
