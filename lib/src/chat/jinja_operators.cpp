// Attribute and item access as jinja2's sandbox does them (getattr first for `.`, the item first
// for `[]`, the other as fallback, a missing one undefined, a mutating method refused), and the
// arithmetic operators with Python's rules: floor division and modulo round toward negative
// infinity, / is always float, bool counts as int. Ints are 64-bit and overflow fails; a string
// or list that repetition would make too large fails before it is allocated.
#include <cmath>
#include <limits>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_runtime.hpp"
#include "chat/jinja_text.hpp"

namespace genesis::chat::jinja {

namespace {

Value missing(const Value& obj, const Value& name) {
  return Value::undefined("'" + object_description(obj) + "' has no attribute " +
                          (name.is_string() ? "'" + name.as_string() + "'" : repr(name)));
}

[[noreturn]] void overflow() { fail("integer overflow (genesis's integers are 64-bit)"); }

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }

double python_float_mod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

double python_float_floordiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0 && (y < 0) != (mod < 0)) div -= 1.0;
  if (div != 0) {
    double floored = std::floor(div);
    if (div - floored > 0.5) floored += 1.0;
    return floored;
  }
  return std::copysign(0.0, x / y);
}

Value repeat(const Value& seq, std::int64_t times, Renderer& renderer) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() &&
        static_cast<std::uint64_t>(times) > renderer.limits().max_output_bytes / s.size())
      check_string_size(renderer.limits().max_output_bytes + 1, renderer.limits().max_output_bytes);
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(times));
    for (std::int64_t i = 0; i < times; ++i) out += s;
    return Value(std::move(out));
  }
  const List& list = seq.as_list();
  if (!list.items.empty())
    renderer.charge(static_cast<std::int64_t>(
        std::min<std::uint64_t>(static_cast<std::uint64_t>(times) * list.items.size(),
                                static_cast<std::uint64_t>(INT64_MAX / 2))));
  std::vector<Value> out;
  for (std::int64_t i = 0; i < times; ++i)
    out.insert(out.end(), list.items.begin(), list.items.end());
  return Value::list(std::move(out),
                     list.kind == ListKind::tuple ? ListKind::tuple : ListKind::list);
}

Value power(const Value& a, const Value& b) {
  if (is_integral(a) && is_integral(b)) {
    const std::int64_t base = a.integer(), exp = b.integer();
    if (exp < 0) {
      if (base == 0) fail("0.0 cannot be raised to a negative power");
      return Value(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    }
    // Square-and-multiply; for |base| >= 2 a square that overflows while bits remain means the
    // result would too.
    std::int64_t result = 1, factor = base;
    for (std::int64_t e = exp; e > 0;) {
      if ((e & 1) && __builtin_mul_overflow(result, factor, &result)) overflow();
      e >>= 1;
      if (e > 0 && __builtin_mul_overflow(factor, factor, &factor)) overflow();
    }
    return Value(result);
  }
  const double x = a.number(), y = b.number();
  if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
  if (x < 0 && y != std::floor(y)) fail("a negative number raised to a fractional power (complex)");
  const double r = std::pow(x, y);
  if (std::isinf(r) && !std::isinf(x) && !std::isinf(y)) fail("numerical result out of range");
  return Value(r);
}

}  // namespace

Value get_attribute(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (!name.empty() && name[0] == '_') {
    if (obj.is_dict())
      if (const Value* v = obj.as_dict().find(name)) return *v;
    return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                                type_name(obj) + "' object is unsafe.",
                            true);
  }
  if (auto method = find_method(obj, name)) return *method;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
  } else if (obj.is_object()) {
    return obj.as_object().attribute(name);
  }
  return missing(obj, Value(std::string(name)));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (obj.is_dict()) {
    if (!key.is_dict() && !(key.is_list() && key.as_list().kind != ListKind::tuple))
      if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && is_integral(key)) {
    const std::int64_t n = length(obj);
    std::int64_t i = key.integer();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (obj.is_list()) return obj.as_list().items[static_cast<std::size_t>(i)];
      const std::string& s = obj.as_string();
      if (is_ascii(s)) return Value(std::string(1, s[static_cast<std::size_t>(i)]));
      const std::size_t begin = byte_offset_of(s, static_cast<std::size_t>(i));
      const std::size_t end = byte_offset_of(s, static_cast<std::size_t>(i) + 1);
      return Value(s.substr(begin, end - begin));
    }
  }
  if (key.is_string()) {
    const std::string& name = key.as_string();
    if (!name.empty() && name[0] == '_' && !obj.is_dict())
      return Value::undefined(
          "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
    if (name.empty() || name[0] != '_')
      if (auto method = find_method(obj, name)) return *method;
    if (obj.is_object()) return obj.as_object().attribute(name);
  }
  return missing(obj, key);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::undefined: return false;
    case ValueKind::string:
      if (item.is_undefined()) item.fail_undefined();
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case ValueKind::list:
      for (const Value& v : container.as_list().items)
        if (equal(v, item)) return true;
      return false;
    case ValueKind::dict:
      if (item.is_dict() || (item.is_list() && item.as_list().kind != ListKind::tuple))
        fail("unhashable type: '" + type_name(item) + "'");
      return container.as_dict().find(item) != nullptr;
    default: fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value binary_op(std::string_view op, const Value& a, const Value& b, Renderer& renderer) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = is_integral(a) && is_integral(b);
  if (op == "+") {
    if (ints) {
      std::int64_t r;
      if (__builtin_add_overflow(a.integer(), b.integer(), &r)) overflow();
      return Value(r);
    }
    if (numbers) return Value(a.number() + b.number());
    if (a.is_string() && b.is_string()) {
      check_string_size(a.as_string().size() + b.as_string().size(),
                        renderer.limits().max_output_bytes);
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() &&
        (a.as_list().kind == ListKind::tuple) == (b.as_list().kind == ListKind::tuple) &&
        a.as_list().kind != ListKind::range && b.as_list().kind != ListKind::range) {
      std::vector<Value> items = a.as_list().items;
      renderer.charge(static_cast<std::int64_t>(b.as_list().items.size()));
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return Value::list(std::move(items), a.as_list().kind);
    }
    if (a.is_string()) fail("can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.is_list() && a.as_list().kind == ListKind::list)
      fail("can only concatenate list (not \"" + type_name(b) + "\") to list");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      std::int64_t r;
      if (__builtin_sub_overflow(a.integer(), b.integer(), &r)) overflow();
      return Value(r);
    }
    if (numbers) return Value(a.number() - b.number());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      std::int64_t r;
      if (__builtin_mul_overflow(a.integer(), b.integer(), &r)) overflow();
      return Value(r);
    }
    if (numbers) return Value(a.number() * b.number());
    if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, b.integer(), renderer);
    if ((b.is_string() || b.is_list()) && is_integral(a)) return repeat(b, a.integer(), renderer);
    if (a.is_string() || b.is_string())
      fail("can't multiply sequence by non-int of type '" + type_name(a.is_string() ? b : a) + "'");
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported("/", a, b);
    if (b.number() == 0) fail("division by zero");
    return Value(a.number() / b.number());
  }
  if (op == "//" || op == "%") {
    if (a.is_string() && op == "%") return percent_format(a.as_string(), b, renderer);
    if (!numbers) unsupported(op, a, b);
    if (ints) {
      const std::int64_t x = a.integer(), y = b.integer();
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "%") return Value(std::int64_t{0});
        overflow();
      }
      std::int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      return Value(op == "//" ? q : r);
    }
    if (b.number() == 0) fail(op == "//" ? "float floor division by zero" : "float modulo");
    return Value(op == "//" ? python_float_floordiv(a.number(), b.number())
                            : python_float_mod(a.number(), b.number()));
  }
  if (op == "**") {
    if (!numbers) unsupported("** or pow()", a, b);
    return power(a, b);
  }
  fail("unknown operator '" + std::string(op) + "'");
}

}  // namespace genesis::chat::jinja
