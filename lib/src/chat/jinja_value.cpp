// Python's printing, equality, ordering, truth and iteration for the template's values. Nesting
// of containers is bounded when they are built (kMaxNesting), so printing and comparing, which
// recurse, stay within the stack whatever the template or its input does.
#include "chat/jinja_value.hpp"

#include "chat/jinja_text.hpp"

namespace genesis::chat::jinja {

namespace {

constexpr int kMaxNesting = 1000;

void check_nesting(int depth) {
  if (depth > kMaxNesting)
    fail("a list or dict nested more than " + std::to_string(kMaxNesting) + " deep");
}

bool is_numeric(const Value& v) { return v.is_bool() || v.is_int() || v.is_float(); }

}  // namespace

void fail(std::string reason) { throw JinjaError{std::move(reason)}; }

Value Object::attribute(std::string_view name) const {
  return Value::undefined("'" + repr() + "' has no attribute '" + std::string(name) + "'");
}

Value Object::call(Renderer&, Arguments&) const { fail("'" + repr() + "' is not callable"); }

bool Object::set_attribute(const std::string&, Value) { return false; }

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.data_ = Undefined{std::move(hint), unsafe};
  return v;
}

Value Value::list(std::vector<Value> items, ListKind kind, std::string range_repr) {
  auto list = std::make_shared<List>();
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  list->depth = depth + 1;
  check_nesting(list->depth);
  list->items = std::move(items);
  list->kind = kind;
  list->range_repr = std::move(range_repr);
  return Value(std::shared_ptr<const List>(std::move(list)));
}

int Value::depth() const {
  if (is_list()) return as_list().depth;
  if (is_dict()) return as_dict().depth();
  return 0;
}

const void* Value::identity() const {
  if (is_list()) return &as_list();
  if (is_dict()) return &as_dict();
  if (is_object()) return &as_object();
  return nullptr;
}

void Value::fail_undefined() const {
  const Undefined& u = std::get<Undefined>(data_);
  fail(u.hint.empty() ? "a value is undefined" : u.hint);
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items_)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items_)
    if (equal(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (key.is_list() && key.as_list().kind != ListKind::tuple)
    fail("unhashable type: '" + type_name(key) + "'");
  if (key.is_dict() || key.is_undefined()) fail("unhashable type: '" + type_name(key) + "'");
  depth_ = std::max(depth_, value.depth() + 1);
  check_nesting(depth_);
  for (auto& [k, v] : items_) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case ValueKind::undefined: return "Undefined";
    case ValueKind::none: return "NoneType";
    case ValueKind::boolean: return "bool";
    case ValueKind::integer: return "int";
    case ValueKind::floating: return "float";
    case ValueKind::string: return "str";
    case ValueKind::dict: return "dict";
    case ValueKind::object: return "object";
    case ValueKind::list:
      switch (v.as_list().kind) {
        case ListKind::tuple: return "tuple";
        case ListKind::range: return "range";
        case ListKind::dict_keys: return "dict_keys";
        case ListKind::dict_values: return "dict_values";
        case ListKind::dict_items: return "dict_items";
        case ListKind::list: break;
      }
      return "list";
  }
  return "object";
}

std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_object()) return v.as_object().repr();
  return type_name(v) + " object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::undefined:
    case ValueKind::none: return false;
    case ValueKind::boolean: return v.as_bool();
    case ValueKind::integer: return v.as_int() != 0;
    case ValueKind::floating: return v.as_float() != 0;
    case ValueKind::string: return !v.as_string().empty();
    case ValueKind::list: return !v.as_list().items.empty();
    case ValueKind::dict: return v.as_dict().size() != 0;
    case ValueKind::object: return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case ValueKind::undefined: return {};
    case ValueKind::string: return v.as_string();
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case ValueKind::undefined: return "Undefined";
    case ValueKind::none: return "None";
    case ValueKind::boolean: return v.as_bool() ? "True" : "False";
    case ValueKind::integer: return std::to_string(v.as_int());
    case ValueKind::floating: return repr_float(v.as_float());
    case ValueKind::string: return repr_string(v.as_string());
    case ValueKind::object: return v.as_object().repr();
    case ValueKind::dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.as_dict().items()) {
        if (!first) out += ", ";
        first = false;
        out += repr(key) + ": " + repr(value);
      }
      return out + "}";
    }
    case ValueKind::list: {
      const List& list = v.as_list();
      if (list.kind == ListKind::range) return list.range_repr;
      std::string out;
      for (std::size_t i = 0; i < list.items.size(); ++i) {
        if (i) out += ", ";
        out += repr(list.items[i]);
      }
      switch (list.kind) {
        case ListKind::tuple: return "(" + out + (list.items.size() == 1 ? ",)" : ")");
        case ListKind::dict_keys: return "dict_keys([" + out + "])";
        case ListKind::dict_values: return "dict_values([" + out + "])";
        case ListKind::dict_items: return "dict_items([" + out + "])";
        default: return "[" + out + "]";
      }
    }
  }
  return {};
}

bool equal(const Value& a, const Value& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_float() || b.is_float()) return a.number() == b.number();
    return a.integer() == b.integer();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::undefined:
    case ValueKind::none: return true;
    case ValueKind::string: return a.as_string() == b.as_string();
    case ValueKind::object: return &a.as_object() == &b.as_object();
    case ValueKind::list: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      const bool x_tuple = x.kind == ListKind::tuple, y_tuple = y.kind == ListKind::tuple;
      if (x_tuple != y_tuple || x.items.size() != y.items.size()) return false;
      for (std::size_t i = 0; i < x.items.size(); ++i)
        if (!equal(x.items[i], y.items[i])) return false;
      return true;
    }
    case ValueKind::dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.items()) {
        const Value* other = y.find(key);
        if (other == nullptr || !equal(value, *other)) return false;
      }
      return true;
    }
    default: return false;
  }
}

int compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_float() || b.is_float()) {
      const double x = a.number(), y = b.number();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const std::int64_t x = a.integer(), y = b.integer();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is Python's str order.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() &&
      (a.as_list().kind == ListKind::tuple) == (b.as_list().kind == ListKind::tuple)) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail("'" + std::string(op) + "' not supported between instances of '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::undefined: return {};
    case ValueKind::list: return v.as_list().items;
    case ValueKind::dict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().size());
      for (const auto& [key, value] : v.as_dict().items()) keys.push_back(key);
      return keys;
    }
    case ValueKind::string: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      for (std::size_t pos = 0; pos < s.size();) {
        std::size_t len = 1;
        const auto lead = static_cast<unsigned char>(s[pos]);
        if (lead >= 0xF0)
          len = 4;
        else if (lead >= 0xE0)
          len = 3;
        else if (lead >= 0xC0)
          len = 2;
        chars.emplace_back(s.substr(pos, len));
        pos += len;
      }
      return chars;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

std::int64_t length(const Value& v) {
  switch (v.kind()) {
    case ValueKind::undefined: return 0;
    case ValueKind::string: return static_cast<std::int64_t>(code_point_count(v.as_string()));
    case ValueKind::list: return static_cast<std::int64_t>(v.as_list().items.size());
    case ValueKind::dict: return static_cast<std::int64_t>(v.as_dict().size());
    default: fail("object of type '" + type_name(v) + "' has no len()");
  }
}

void check_string_size(std::size_t size, std::size_t limit) {
  if (size > limit)
    fail("a string of " + std::to_string(size) + " bytes would pass the limit of " +
         std::to_string(limit) + " (ChatTemplateLimits::max_output_bytes)");
}

}  // namespace genesis::chat::jinja
