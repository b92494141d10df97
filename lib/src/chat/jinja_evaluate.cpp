// The interpreter's expressions: evaluation of each node, calls with their arguments, and
// Python's slicing. Errors carry the line of the innermost node that saw them (eval fills it in
// on the way out). Statements, scopes and macros are jinja_runtime.cpp's.
#include <optional>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_runtime.hpp"
#include "chat/jinja_text.hpp"

namespace genesis::chat::jinja {

Value Renderer::eval(const Expr& e, Frame& frame) {
  try {
    return eval_inner(e, frame);
  } catch (JinjaError& error) {
    if (error.line == 0) error.line = e.line;
    throw;
  }
}

void Renderer::eval_arguments(const Expr& e, Frame& frame, Arguments& args) {
  for (const ExprPtr& a : e.args) args.positional.push_back(eval(*a, frame));
  for (const auto& [key, a] : e.kwargs) args.keyword.emplace_back(key, eval(*a, frame));
}

Value Renderer::eval_call(const Expr& e, Frame& frame, const Value* caller) {
  const Value callee = eval(*e.operands[0], frame);
  Arguments args;
  eval_arguments(e, frame, args);
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  return call(callee, args);
}

namespace {

// Python's slice.indices() applied: the positions a[start:stop:step] takes from a sequence of n.
std::vector<std::size_t> slice_positions(std::int64_t n, const Value& start_v, const Value& stop_v,
                                         const Value& step_v) {
  auto as_index = [](const Value& v) -> std::optional<std::int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool())
      fail("slice indices must be integers or None or have an __index__ method");
    return v.integer();
  };
  const std::int64_t step = as_index(step_v).value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<std::int64_t> i, std::int64_t fallback) {
    if (!i) return fallback;
    std::int64_t v = *i;
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    return v;
  };
  const std::int64_t start = clamp(as_index(start_v), step < 0 ? n - 1 : 0);
  const std::int64_t stop = clamp(as_index(stop_v), step < 0 ? -1 : n);
  std::vector<std::size_t> out;
  if (step > 0)
    for (std::int64_t i = start; i < stop; i += step) out.push_back(static_cast<std::size_t>(i));
  else
    for (std::int64_t i = start; i > stop; i += step) out.push_back(static_cast<std::size_t>(i));
  return out;
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (is_ascii(s)) {
      std::string out;
      for (std::size_t i : slice_positions(static_cast<std::int64_t>(s.size()), start, stop, step))
        out.push_back(s[i]);
      return Value(std::move(out));
    }
    const std::u32string cps = to_u32(s);
    std::u32string out;
    for (std::size_t i : slice_positions(static_cast<std::int64_t>(cps.size()), start, stop, step))
      out.push_back(cps[i]);
    return Value(to_utf8(out));
  }
  if (obj.is_list()) {
    const List& list = obj.as_list();
    std::vector<Value> out;
    for (std::size_t i :
         slice_positions(static_cast<std::int64_t>(list.items.size()), start, stop, step))
      out.push_back(list.items[i]);
    return Value::list(std::move(out),
                       list.kind == ListKind::tuple ? ListKind::tuple : ListKind::list);
  }
  return Value::undefined("'" + object_description(obj) + "' has no attribute 'slice'");
}

}  // namespace

Value Renderer::eval_inner(const Expr& e, Frame& frame) {
  switch (e.kind) {
    case ExprKind::constant: return e.value;
    case ExprKind::name: return lookup(e.name, frame);
    case ExprKind::getattr: return get_attribute(eval(*e.operands[0], frame), e.name);
    case ExprKind::getitem: {
      const Value obj = eval(*e.operands[0], frame);
      const Expr& key = *e.operands[1];
      if (key.kind == ExprKind::slice) {
        Value parts[3];
        for (int i = 0; i < 3; ++i)
          if (key.operands[static_cast<std::size_t>(i)])
            parts[i] = eval(*key.operands[static_cast<std::size_t>(i)], frame);
          else
            parts[i] = Value::none();
        return slice_value(obj, parts[0], parts[1], parts[2]);
      }
      return get_item(obj, eval(key, frame));
    }
    case ExprKind::slice: fail("a slice outside a subscript");
    case ExprKind::call: return eval_call(e, frame, nullptr);
    case ExprKind::filter: {
      const Value value = eval(*e.operands[0], frame);
      Arguments args;
      eval_arguments(e, frame, args);
      return e.filter(*this, value, args);
    }
    case ExprKind::test: {
      const Value value = eval(*e.operands[0], frame);
      Arguments args;
      eval_arguments(e, frame, args);
      return Value(e.test(*this, value, args));
    }
    case ExprKind::negate:
    case ExprKind::plus: {
      const Value v = eval(*e.operands[0], frame);
      if (v.is_undefined()) v.fail_undefined();
      if (!v.is_number())
        fail(std::string("bad operand type for unary ") + (e.kind == ExprKind::negate ? "-" : "+") +
             ": '" + type_name(v) + "'");
      if (e.kind == ExprKind::plus) return v.is_bool() ? Value(v.integer()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.integer() == INT64_MIN) fail("integer overflow (genesis's integers are 64-bit)");
      return Value(-v.integer());
    }
    case ExprKind::logical_not: return Value(!truthy(eval(*e.operands[0], frame)));
    case ExprKind::binary:
      return binary_op(e.name, eval(*e.operands[0], frame), eval(*e.operands[1], frame), *this);
    case ExprKind::logical_and: {
      Value left = eval(*e.operands[0], frame);
      return truthy(left) ? eval(*e.operands[1], frame) : left;
    }
    case ExprKind::logical_or: {
      Value left = eval(*e.operands[0], frame);
      return truthy(left) ? left : eval(*e.operands[1], frame);
    }
    case ExprKind::concat: {
      std::string out;
      for (const ExprPtr& o : e.operands) {
        const Value v = eval(*o, frame);
        const std::string piece = to_str(v);
        check_string_size(out.size() + piece.size(), limits_.max_output_bytes);
        out += piece;
      }
      return Value(std::move(out));
    }
    case ExprKind::compare: {
      Value left = eval(*e.operands[0], frame);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.operands[i + 1], frame);
        const std::string& op = e.ops[i];
        bool ok;
        if (op == "==")
          ok = equal(left, right);
        else if (op == "!=")
          ok = !equal(left, right);
        else if (op == "in")
          ok = contains(right, left);
        else if (op == "notin")
          ok = !contains(right, left);
        else {
          const int c = compare(left, right, op);
          ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::condition:
      if (truthy(eval(*e.operands[0], frame))) return eval(*e.operands[1], frame);
      if (e.operands[2]) return eval(*e.operands[2], frame);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    case ExprKind::list:
    case ExprKind::tuple: {
      std::vector<Value> items;
      items.reserve(e.operands.size());
      for (const ExprPtr& o : e.operands) items.push_back(eval(*o, frame));
      return Value::list(std::move(items),
                         e.kind == ExprKind::tuple ? ListKind::tuple : ListKind::list);
    }
    case ExprKind::dict: {
      Dict d;
      for (std::size_t i = 0; i + 1 < e.operands.size(); i += 2) {
        Value key = eval(*e.operands[i], frame);
        d.set(std::move(key), eval(*e.operands[i + 1], frame));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::placeholder:
      if (placeholders_.empty()) fail("a filter block's text used outside its block");
      return placeholders_.back();
  }
  return Value();
}

}  // namespace genesis::chat::jinja
