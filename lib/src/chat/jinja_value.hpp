// The values a chat template computes with, modelled on the Python objects jinja2 hands around:
// undefined (jinja2's default Undefined: prints as "", iterates as empty, fails on attribute
// access) is distinct from none; bool, int and float keep Python's arithmetic and printing; lists
// and dicts are immutable once built (the sandbox forbids their mutating methods) and shared;
// everything callable or with attributes (macros, namespaces, loop, bound methods) is an Object.
// Ints are 64-bit: where Python would grow a big integer, an operation fails instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace genesis::chat::jinja {

class Value;
class Renderer;

// A failure while rendering, before chat_template.cpp names the template: `line` is filled in by
// the innermost expression or statement that saw it; `raised` marks raise_exception's message.
struct JinjaError {
  std::string reason;
  int line = 0;
  bool raised = false;
};
[[noreturn]] void fail(std::string reason);

// The kinds of Python sequence a template can see; they differ only in how repr() shows them.
enum class ListKind { list, tuple, range, dict_keys, dict_values, dict_items };

struct List {
  std::vector<Value> items;
  ListKind kind = ListKind::list;
  std::string range_repr;  // "range(0, 3)" for a range
  int depth = 1;           // nesting of containers inside, bounded by RenderLimits::max_depth
};

// A Python dict: insertion-ordered, keys compared as Python compares them (1 == 1.0 == True).
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Sets key to value, keeping the key's first position when it was already there.
  void set(Value key, Value value);
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  std::size_t size() const { return items_.size(); }
  int depth() const { return depth_; }

 private:
  std::vector<std::pair<Value, Value>> items_;
  int depth_ = 1;
};

// Arguments of a call, a filter or a test (the value filtered or tested is not among them).
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Anything with attributes or a call: macros, namespace(), loop, cycler, bound methods, globals.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string repr() const = 0;
  virtual Value attribute(std::string_view name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Renderer& renderer, Arguments& args) const;
  // Only a namespace accepts `set ns.attr = value`.
  virtual bool is_namespace() const { return false; }
  virtual bool set_attribute(const std::string& name, Value value);
};

enum class ValueKind { undefined, none, boolean, integer, floating, string, list, dict, object };

class Value {
 public:
  Value() : data_(Undefined{}) {}
  Value(bool b) : data_(b) {}
  Value(std::int64_t i) : data_(i) {}
  Value(int i) : data_(static_cast<std::int64_t>(i)) {}
  Value(double f) : data_(f) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(std::shared_ptr<const List> l) : data_(std::move(l)) {}
  Value(std::shared_ptr<const Dict> d) : data_(std::move(d)) {}
  Value(std::shared_ptr<Object> o) : data_(std::move(o)) {}

  // An undefined value; `hint` is what using it reports ("'x' is undefined"), `unsafe` makes it
  // the sandbox's refusal of a mutating method, which fails when called.
  static Value undefined(std::string hint, bool unsafe = false);
  static Value none() { return Value(nullptr); }
  static Value list(std::vector<Value> items, ListKind kind = ListKind::list,
                    std::string range_repr = {});
  static Value dict(Dict d) { return Value(std::make_shared<const Dict>(std::move(d))); }

  ValueKind kind() const { return static_cast<ValueKind>(data_.index()); }
  bool is_undefined() const { return kind() == ValueKind::undefined; }
  bool is_none() const { return kind() == ValueKind::none; }
  bool is_bool() const { return kind() == ValueKind::boolean; }
  bool is_int() const { return kind() == ValueKind::integer; }  // not a bool
  bool is_float() const { return kind() == ValueKind::floating; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python's Number
  bool is_string() const { return kind() == ValueKind::string; }
  bool is_list() const { return kind() == ValueKind::list; }  // any ListKind
  bool is_dict() const { return kind() == ValueKind::dict; }
  bool is_object() const { return kind() == ValueKind::object; }

  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  const std::shared_ptr<Object>& object_ptr() const {
    return std::get<std::shared_ptr<Object>>(data_);
  }
  const void* identity() const;  // for `is sameas` on containers and objects
  // A bool or an int as int64 (Python's bool is an int).
  std::int64_t integer() const { return is_bool() ? as_bool() : as_int(); }
  double number() const { return is_float() ? as_float() : static_cast<double>(integer()); }

  const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }
  bool undefined_unsafe() const { return std::get<Undefined>(data_).unsafe; }
  // Fails with this undefined value's hint (jinja2's UndefinedError).
  [[noreturn]] void fail_undefined() const;

  int depth() const;  // container nesting: 0 for a scalar

 private:
  struct Undefined {
    std::string hint;
    bool unsafe = false;
  };
  Value(std::nullptr_t) : data_(nullptr) {}
  std::variant<Undefined, std::nullptr_t, bool, std::int64_t, double, std::string,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Object>>
      data_;
};

// Python's type name of a value for messages: 'str', 'int', 'dict', 'NoneType', ...
std::string type_name(const Value& v);
// jinja2's description of an object in "'dict object' has no attribute 'x'".
std::string object_description(const Value& v);

bool truthy(const Value& v);
std::string to_str(const Value& v);          // str(): what {{ v }} prints
std::string repr(const Value& v);            // repr(): how v prints inside a list or dict
bool equal(const Value& a, const Value& b);  // Python ==
// Python's <, ==, > for the types that order (numbers, str, lists, tuples); fails otherwise.
int compare(const Value& a, const Value& b, std::string_view op);
// The items iteration gives: a list's items, a dict's keys, a string's characters; undefined
// gives none. Fails for what Python cannot iterate.
std::vector<Value> iterate(const Value& v);
// Python's len(); fails for what has none.
std::int64_t length(const Value& v);
// A string of at most `limit` bytes, or a failure naming the limit.
void check_string_size(std::size_t size, std::size_t limit);

}  // namespace genesis::chat::jinja
