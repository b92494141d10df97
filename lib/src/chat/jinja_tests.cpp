// jinja2 3.1's tests (tests.py), for `x is name(args)` and select/reject. Python's type checks
// map onto the Value kinds: bool is a number but not an integer, a string is a sequence, an
// undefined value is iterable (it iterates as empty) but not a sequence.
#include <algorithm>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_runtime.hpp"
#include "chat/jinja_text.hpp"

namespace genesis::chat::jinja {

namespace {

Value one_argument(const Arguments& a, std::string_view test) {
  const auto b = bind_arguments(a, {"other"}, test);
  if (!b[0]) fail("test '" + std::string(test) + "' needs an argument");
  return *b[0];
}

void no_arguments(const Arguments& a, std::string_view test) { bind_arguments(a, {}, test); }

bool t_odd(Renderer& r, const Value& v, Arguments& a) {
  no_arguments(a, "odd");
  return equal(binary_op("%", v, Value(2), r), Value(1));
}
bool t_even(Renderer& r, const Value& v, Arguments& a) {
  no_arguments(a, "even");
  return equal(binary_op("%", v, Value(2), r), Value(0));
}
bool t_divisibleby(Renderer& r, const Value& v, Arguments& a) {
  const auto b = bind_arguments(a, {"num"}, "divisibleby");
  if (!b[0]) fail("divisibleby needs a number");
  return equal(binary_op("%", v, *b[0], r), Value(0));
}
bool t_defined(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "defined");
  return !v.is_undefined();
}
bool t_undefined(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "undefined");
  return v.is_undefined();
}
bool t_none(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "none");
  return v.is_none();
}
bool t_boolean(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "boolean");
  return v.is_bool();
}
bool t_false(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "false");
  return v.is_bool() && !v.as_bool();
}
bool t_true(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "true");
  return v.is_bool() && v.as_bool();
}
bool t_integer(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "integer");
  return v.is_int();
}
bool t_float(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "float");
  return v.is_float();
}
bool t_lower(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "lower");
  return all_of_class(to_str(v), CharClass::lower);
}
bool t_upper(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "upper");
  return all_of_class(to_str(v), CharClass::upper);
}
bool t_string(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "string");
  return v.is_string();
}
bool t_mapping(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "mapping");
  return v.is_dict();
}
bool t_number(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "number");
  return v.is_number();
}
bool t_sequence(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "sequence");
  return v.is_string() || v.is_list() || v.is_dict();
}
bool t_iterable(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "iterable");
  if (v.is_object()) return v.as_object().repr().rfind("<LoopContext", 0) == 0;
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_callable(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "callable");
  return v.is_object() && v.as_object().callable();
}
bool t_sameas(Renderer&, const Value& v, Arguments& a) {
  const Value other = one_argument(a, "sameas");
  if (v.kind() != other.kind()) return false;
  if (v.identity() != nullptr) return v.identity() == other.identity();
  // Python's `is` on scalars: None, True, False are single objects; small ints are cached.
  if (v.is_int()) return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
  if (v.is_float()) return false;
  return equal(v, other);
}
bool t_escaped(Renderer&, const Value&, Arguments& a) {
  no_arguments(a, "escaped");
  return false;  // nothing is Markup without autoescape
}
bool t_in(Renderer&, const Value& v, Arguments& a) {
  const auto b = bind_arguments(a, {"seq"}, "in");
  if (!b[0]) fail("test 'in' needs a sequence");
  return contains(*b[0], v);
}
bool t_filter(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "filter");
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool t_test(Renderer&, const Value& v, Arguments& a) {
  no_arguments(a, "test");
  return v.is_string() && find_test(v.as_string()) != nullptr;
}
bool t_eq(Renderer&, const Value& v, Arguments& a) { return equal(v, one_argument(a, "==")); }
bool t_ne(Renderer&, const Value& v, Arguments& a) { return !equal(v, one_argument(a, "!=")); }
bool t_lt(Renderer&, const Value& v, Arguments& a) {
  return compare(v, one_argument(a, "<"), "<") < 0;
}
bool t_le(Renderer&, const Value& v, Arguments& a) {
  return compare(v, one_argument(a, "<="), "<=") <= 0;
}
bool t_gt(Renderer&, const Value& v, Arguments& a) {
  return compare(v, one_argument(a, ">"), ">") > 0;
}
bool t_ge(Renderer&, const Value& v, Arguments& a) {
  return compare(v, one_argument(a, ">="), ">=") >= 0;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"false", t_false},
    {"true", t_true},
    {"integer", t_integer},
    {"float", t_float},
    {"lower", t_lower},
    {"upper", t_upper},
    {"string", t_string},
    {"mapping", t_mapping},
    {"number", t_number},
    {"sequence", t_sequence},
    {"iterable", t_iterable},
    {"callable", t_callable},
    {"sameas", t_sameas},
    {"escaped", t_escaped},
    {"in", t_in},
    {"filter", t_filter},
    {"test", t_test},
    {"==", t_eq},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"!=", t_ne},
    {"ne", t_ne},
    {"<", t_lt},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<=", t_le},
    {"le", t_le},
    {">", t_gt},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">=", t_ge},
    {"ge", t_ge},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const TestEntry& e : kTests)
    if (e.name == name) return e.fn;
  return nullptr;
}

bool is_jinja2_test(std::string_view name) { return find_test(name) != nullptr; }

}  // namespace genesis::chat::jinja
