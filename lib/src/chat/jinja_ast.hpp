// The parsed form of a template: expressions and statements as jinja2's parser builds them
// (nodes.py), one node type each with the fields its kinds use. Filters and tests are looked up
// while parsing, so an unknown name fails at load and rendering calls through a pointer.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.hpp"

namespace genesis::chat::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using Body = std::vector<Stmt>;

// A filter: the value, its call arguments; a test likewise, answering true or false.
using FilterFn = Value (*)(Renderer&, const Value&, Arguments&);
using TestFn = bool (*)(Renderer&, const Value&, Arguments&);

enum class ExprKind {
  constant,     // value
  name,         // name
  getattr,      // operands[0].name
  getitem,      // operands[0][operands[1]]
  slice,        // operands: start, stop, step; a null operand is an omitted one
  call,         // operands[0](args..., kwargs...)
  filter,       // operands[0] | name(args..., kwargs...)
  test,         // operands[0] is name(args..., kwargs...)
  negate,       // -operands[0]
  plus,         // +operands[0]
  logical_not,  // not operands[0]
  binary,       // operands[0] op operands[1]: + - * / // % **
  logical_and,
  logical_or,
  concat,       // operands joined by ~
  compare,      // operands[0] ops[0] operands[1] ops[1] operands[2] ... (chained as Python)
  condition,    // operands[1] if operands[0] else operands[2] (null: undefined)
  list,         // [operands...]
  tuple,        // (operands...)
  dict,         // {operands[0]: operands[1], ...}
  placeholder,  // the text of a filter block or block set, which its filters apply to
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;       // constant
  std::string name;  // name, attribute, filter, test, or binary/compare operator
  std::vector<ExprPtr> operands;
  std::vector<ExprPtr> args;  // call, filter, test
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // compare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

// Where `set` and `for` store: a name, a tuple of targets, or a namespace's attribute.
struct Target {
  enum class Kind { name, tuple, attribute };
  Kind kind = Kind::name;
  std::string name;           // the name, or the namespace's name
  std::string attribute;      // attribute: the attribute set
  std::vector<Target> items;  // tuple
};

// A macro's signature and body; call blocks give their caller one too.
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
  bool uses_varargs = false;  // the body names varargs, kwargs or caller: jinja2 then
  bool uses_kwargs = false;   // accepts extra positional or keyword arguments, or a
  bool uses_caller = false;   // caller
};

enum class StmtKind {
  text,          // text
  output,        // {{ exprs[0] }}
  if_,           // exprs: one test per branch; bodies: one per branch, then else's
  for_,          // target in exprs[0] [if exprs[1]]; bodies[0], else bodies[1]
  set,           // target = exprs[0]
  set_block,     // target = bodies[0]'s text through exprs[0]'s filters (may be null)
  macro,         // macro
  call_block,    // exprs[0] is the call, macro is the caller
  filter_block,  // bodies[0]'s text through exprs[0]'s filters
  with,          // targets = exprs, in a new scope, bodies[0]
  break_,
  continue_,
  generation,  // bodies[0], whose text's byte range is recorded
};

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  StmtKind kind;
  int line = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  std::vector<Target> targets;
  std::shared_ptr<const MacroDef> macro;
};

}  // namespace genesis::chat::jinja
