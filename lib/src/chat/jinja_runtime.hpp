// Runs a parsed template: statements write into the output (or a block's buffer), expressions
// evaluate to Values. Scoping is jinja2's: `set` writes the innermost scope; a for loop's body
// gets a fresh scope each iteration, so nothing set in it survives the loop (templates use
// namespace() for that); if-bodies share their enclosing scope; macros, call blocks, filter
// blocks, block sets, with and generation have scopes of their own, and macros read their
// defining scope when called. One Renderer per render: nothing here is shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/jinja_ast.hpp"

namespace genesis::chat::jinja {

// Bounds for untrusted templates (ChatTemplateLimits' fields, see chat_template.hpp).
struct Limits {
  int max_call_depth = 100;
  std::int64_t max_steps = 10'000'000;
  std::size_t max_output_bytes = std::size_t{64} << 20;
};

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
  const Value* find(const std::string& name) const;
};
using FramePtr = std::shared_ptr<Frame>;

class Renderer {
 public:
  Renderer(const Limits& limits, std::int64_t now_unix_seconds)
      : limits_(limits), now_(now_unix_seconds) {}

  // Renders `body` with `globals` (the template's variables) as its outermost scope.
  std::string render(const Body& body, FramePtr globals);
  // Byte ranges of the text each {% generation %} block wrote, in transformers' convention:
  // the start is the length of the top-level output when the block ends.
  const std::vector<std::pair<std::size_t, std::size_t>>& generation() const { return spans_; }

  // For builtins: calling a value (a macro, a bound method), a test or a filter by name.
  Value call(const Value& callee, Arguments& args);
  bool run_test(std::string_view name, const Value& value, Arguments& args);
  Value run_filter(std::string_view name, const Value& value, Arguments& args);
  // Charges `n` steps (loop iterations, macro calls, items made by repetition) to the budget.
  void charge(std::int64_t n);
  const Limits& limits() const { return limits_; }
  std::int64_t now() const { return now_; }

  // A macro (or a call block's caller) called with `args`, in a scope inside `closure`.
  Value call_macro(const MacroDef& macro, const FramePtr& closure, Arguments& args);

 private:
  enum class Flow { normal, break_, continue_ };
  Flow exec(const Body& body, const FramePtr& frame);
  Flow exec_stmt(const Stmt& s, const FramePtr& frame);
  Flow exec_for(const Stmt& s, const FramePtr& frame);
  std::string capture(const Body& body, const FramePtr& frame);
  void write(std::string_view text);
  void assign(const Target& target, Value value, Frame& frame);

  Value eval(const Expr& e, Frame& frame);
  Value eval_inner(const Expr& e, Frame& frame);
  Value eval_call(const Expr& e, Frame& frame, const Value* caller);
  void eval_arguments(const Expr& e, Frame& frame, Arguments& args);
  Value lookup(const std::string& name, const Frame& frame) const;

  const Limits& limits_;
  std::int64_t now_;
  std::string root_;
  std::string* out_ = &root_;
  std::vector<std::pair<std::size_t, std::size_t>> spans_;
  std::vector<Value> placeholders_;    // the text filter blocks and block sets filter
  std::vector<FramePtr> kept_frames_;  // scopes macros were defined in (Macro holds them weakly)
  std::int64_t steps_ = 0;
  int call_depth_ = 0;
};

// Attribute access and subscription as jinja2's sandboxed environment does them.
Value get_attribute(const Value& obj, std::string_view name);
Value get_item(const Value& obj, const Value& key);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);
// + - * / // % ** with Python's semantics on 64-bit ints, floats, strings and lists.
Value binary_op(std::string_view op, const Value& a, const Value& b, Renderer& renderer);

}  // namespace genesis::chat::jinja
