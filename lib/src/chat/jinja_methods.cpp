// The methods templates call on strings, dicts and lists ("x".strip(), d.items(), ...), with
// Python's signatures and results; indices are code points. Every name Python's str, dict, list
// and tuple have is recognised: the sandbox's mutating ones (append, pop, update, ...) give its
// refusal, and the few genesis leaves out (encode, format_map, translate, ...) fail when called.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_runtime.hpp"
#include "chat/jinja_text.hpp"

namespace genesis::chat::jinja {

namespace {

using Bound = std::vector<std::optional<Value>>;

constexpr std::string_view kStrMethods[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
constexpr std::string_view kDictMethods[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
constexpr std::string_view kDictMutating[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListMutating[] = {"append", "clear",  "extend",  "insert",
                                              "pop",    "remove", "reverse", "sort"};

template <std::size_t N>
bool among(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

const std::string& string_arg(const std::optional<Value>& v, std::string_view method) {
  if (!v || !v->is_string())
    fail(std::string(method) + "() argument must be str, not " + (v ? type_name(*v) : "nothing"));
  return v->as_string();
}

std::int64_t int_arg(const std::optional<Value>& v, std::int64_t fallback) {
  if (!v || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool())
    fail("'" + type_name(*v) + "' object cannot be interpreted as an integer");
  return v->integer();
}

// Python's [start:end] bounds on a sequence of n, as byte offsets into `s`.
std::pair<std::size_t, std::size_t> span(const std::string& s, const std::optional<Value>& start,
                                         const std::optional<Value>& end) {
  const auto n = static_cast<std::int64_t>(code_point_count(s));
  auto clamp = [&](std::int64_t i) {
    if (i < 0) i = std::max<std::int64_t>(0, i + n);
    return std::min(i, n);
  };
  const std::int64_t a = clamp(int_arg(start, 0)), b = clamp(int_arg(end, n));
  return {byte_offset_of(s, static_cast<std::size_t>(a)),
          byte_offset_of(s, static_cast<std::size_t>(std::max(a, b)))};
}

std::int64_t code_points_before(const std::string& s, std::size_t byte) {
  return static_cast<std::int64_t>(code_point_count(std::string_view(s).substr(0, byte)));
}

Value pad(const std::string& s, const Bound& b, std::string_view method, Renderer& r) {
  const std::int64_t width = int_arg(b[0], 0);
  std::string fill = " ";
  if (b[1]) {
    fill = string_arg(b[1], method);
    if (code_point_count(fill) != 1) fail("The fill character must be exactly one character long");
  }
  const auto n = static_cast<std::int64_t>(code_point_count(s));
  if (width <= n) return Value(s);
  check_string_size(s.size() + static_cast<std::size_t>(width - n) * fill.size(),
                    r.limits().max_output_bytes);
  const std::int64_t margin = width - n;
  std::int64_t left = 0;
  if (method == "rjust")
    left = margin;
  else if (method == "center")
    left = margin / 2 + (margin & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (std::int64_t i = left; i < margin; ++i) out += fill;
  return Value(std::move(out));
}

// str.format with automatic ({}), numbered ({0}) and named ({name}) fields, without format
// specs or conversions.
Value format_string(const std::string& s, const Arguments& args, Renderer& r) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}')
        ++i;
      else
        fail("Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const std::size_t close = s.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    const std::string field = s.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      fail("genesis's str.format takes plain fields only ({}, {0}, {name}), not '{" + field + "}'");
    const Value* value = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size())
        fail("Replacement index " + std::to_string(auto_index) +
             " out of range for positional args tuple");
      value = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      const std::size_t index = std::stoul(field);
      if (index >= args.positional.size())
        fail("Replacement index " + field + " out of range for positional args tuple");
      value = &args.positional[index];
    } else {
      for (const auto& [key, v] : args.keyword)
        if (key == field) value = &v;
      if (value == nullptr) fail("'" + field + "'");
    }
    out += to_str(*value);
    check_string_size(out.size(), r.limits().max_output_bytes);
    i = close;
  }
  return Value(std::move(out));
}

// One %-conversion of Python's printf-style formatting: `spec` is what lies between % and the
// type letter (flags, width, precision), applied through C's printf for numbers.
std::string format_one(char type, const std::string& spec, const Value& v) {
  char buffer[512];
  const std::string c_spec = "%" + spec;
  switch (type) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = type == 's' ? to_str(v) : repr(v);
      std::size_t width = 0, precision = std::string::npos;
      bool left = spec.find('-') != std::string::npos;
      std::string digits = spec;
      if (const std::size_t dot = spec.find('.'); dot != std::string::npos) {
        precision = static_cast<std::size_t>(std::atoi(spec.c_str() + dot + 1));
        digits = spec.substr(0, dot);
      }
      digits.erase(0, digits.find_first_of("123456789") == std::string::npos
                          ? digits.size()
                          : digits.find_first_of("123456789"));
      if (!digits.empty()) width = static_cast<std::size_t>(std::atoi(digits.c_str()));
      if (precision != std::string::npos && code_point_count(text) > precision)
        text = text.substr(0, byte_offset_of(text, precision));
      const std::size_t n = code_point_count(text);
      if (n < width)
        text = left ? text + std::string(width - n, ' ') : std::string(width - n, ' ') + text;
      return text;
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
    case 'c': {
      if (!v.is_number())
        fail("%" + std::string(1, type) + " format: a real number is required, not " +
             type_name(v));
      const long long i = v.is_float() ? static_cast<long long>(v.as_float()) : v.integer();
      if (type == 'c') {
        std::string out;
        append_code_point(out, static_cast<char32_t>(i));
        return out;
      }
      const char t = type == 'i' || type == 'u' ? 'd' : type;
      std::snprintf(buffer, sizeof(buffer), (c_spec + "ll" + t).c_str(), i);
      return buffer;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number()) fail("must be real number, not " + type_name(v));
      std::snprintf(buffer, sizeof(buffer), (c_spec + type).c_str(), v.number());
      return buffer;
    }
    default: fail(std::string("unsupported format character '") + type + "'");
  }
}

}  // namespace

Value percent_format(const std::string& format, const Value& args, Renderer& r) {
  std::vector<Value> positional;
  const Dict* mapping = args.is_dict() ? &args.as_dict() : nullptr;
  if (args.is_list() && args.as_list().kind == ListKind::tuple)
    positional = args.as_list().items;
  else if (!mapping)
    positional.push_back(args);
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) fail("incomplete format");
    const Value* value = nullptr;
    if (format[i] == '(') {
      const std::size_t close = format.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      value = mapping->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (value == nullptr) fail("'" + format.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    std::string spec;
    while (i < format.size() &&
           std::string_view("-+ #0123456789.").find(format[i]) != std::string_view::npos)
      spec.push_back(format[i++]);
    if (i >= format.size()) fail("incomplete format");
    const char type = format[i];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (value == nullptr) {
      if (next >= positional.size()) fail("not enough arguments for format string");
      value = &positional[next++];
    }
    out += format_one(type, spec, *value);
    check_string_size(out.size(), r.limits().max_output_bytes);
  }
  if (!mapping && next < positional.size())
    fail("not all arguments converted during string formatting");
  return Value(std::move(out));
}

namespace {

Value call_str_method(const std::string& s, const std::string& name, Arguments& a, Renderer& r) {
  const std::string_view m = name;
  if (m == "format") return format_string(s, a, r);
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    const Bound b = bind_arguments(a, {"chars"}, m);
    std::optional<std::string> chars;
    if (b[0] && !b[0]->is_none()) chars = string_arg(b[0], m);
    return Value(strip(s, chars,
                       m == "strip"    ? StripSide::both
                       : m == "lstrip" ? StripSide::left
                                       : StripSide::right));
  }
  if (m == "split" || m == "rsplit") {
    const Bound b = bind_arguments(a, {"sep", "maxsplit"}, m);
    std::optional<std::string> sep;
    if (b[0] && !b[0]->is_none()) {
      sep = string_arg(b[0], m);
      if (sep->empty()) fail("empty separator");
    }
    std::vector<Value> out;
    for (std::string& piece : split(s, sep, int_arg(b[1], -1), m == "rsplit"))
      out.emplace_back(std::move(piece));
    return Value::list(std::move(out));
  }
  if (m == "splitlines") {
    const Bound b = bind_arguments(a, {"keepends"}, m);
    std::vector<Value> out;
    for (std::string& line : split_lines(s, b[0] && truthy(*b[0])))
      out.emplace_back(std::move(line));
    return Value::list(std::move(out));
  }
  if (m == "startswith" || m == "endswith") {
    const Bound b = bind_arguments(a, {"prefix", "start", "end"}, m);
    if (!b[0]) fail(std::string(m) + "() takes at least 1 argument (0 given)");
    const auto [begin, end] = span(s, b[1], b[2]);
    const std::string_view part = std::string_view(s).substr(begin, end - begin);
    std::vector<Value> options = b[0]->is_list() && b[0]->as_list().kind == ListKind::tuple
                                     ? b[0]->as_list().items
                                     : std::vector<Value>{*b[0]};
    for (const Value& option : options) {
      if (!option.is_string())
        fail(std::string(m) + " first arg must be str or a tuple of str, not " + type_name(option));
      const std::string& o = option.as_string();
      if (o.size() > part.size()) continue;
      if (m == "startswith" ? part.substr(0, o.size()) == o
                            : part.substr(part.size() - o.size()) == o)
        return Value(true);
    }
    return Value(false);
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    const Bound b = bind_arguments(a, {"sub", "start", "end"}, m);
    const std::string& sub = string_arg(b[0], m);
    const auto [begin, end] = span(s, b[1], b[2]);
    const std::string_view part = std::string_view(s).substr(begin, end - begin);
    if (m == "count") {
      if (sub.empty()) return Value(static_cast<std::int64_t>(code_point_count(part)) + 1);
      std::int64_t n = 0;
      for (std::size_t at = part.find(sub); at != std::string_view::npos;
           at = part.find(sub, at + sub.size()))
        ++n;
      return Value(n);
    }
    const bool right = m[0] == 'r';
    const std::size_t at = right ? part.rfind(sub) : part.find(sub);
    if (at == std::string_view::npos) {
      if (m == "index" || m == "rindex") fail("substring not found");
      return Value(std::int64_t{-1});
    }
    return Value(code_points_before(s, begin + at));
  }
  if (m == "replace") {
    const Bound b = bind_arguments(a, {"old", "new", "count"}, m);
    const std::string& old = string_arg(b[0], m);
    const std::string& with = string_arg(b[1], m);
    std::int64_t count = int_arg(b[2], -1);
    std::string out;
    if (old.empty()) {
      // Python inserts `with` before every code point and at the end.
      const std::u32string cps = to_u32(s);
      for (std::size_t i = 0; i <= cps.size(); ++i) {
        if (count != 0) {
          out += with;
          if (count > 0) --count;
        }
        if (i < cps.size()) append_code_point(out, cps[i]);
        check_string_size(out.size(), r.limits().max_output_bytes);
      }
      return Value(std::move(out));
    }
    std::size_t start = 0;
    for (std::size_t at; count != 0 && (at = s.find(old, start)) != std::string::npos;) {
      out.append(s, start, at - start);
      out += with;
      check_string_size(out.size(), r.limits().max_output_bytes);
      start = at + old.size();
      if (count > 0) --count;
    }
    out.append(s, start);
    check_string_size(out.size(), r.limits().max_output_bytes);
    return Value(std::move(out));
  }
  if (m == "join") {
    const Bound b = bind_arguments(a, {"iterable"}, m);
    if (!b[0]) fail("join() takes exactly one argument (0 given)");
    std::string out;
    std::size_t i = 0;
    for (const Value& item : iterate(*b[0])) {
      if (!item.is_string())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(item) +
             " found");
      if (i++) out += s;
      out += item.as_string();
      check_string_size(out.size(), r.limits().max_output_bytes);
    }
    return Value(std::move(out));
  }
  if (m == "center" || m == "ljust" || m == "rjust")
    return pad(s, bind_arguments(a, {"width", "fillchar"}, m), m, r);
  if (m == "zfill") {
    const Bound b = bind_arguments(a, {"width"}, m);
    const std::int64_t width = int_arg(b[0], 0);
    const auto n = static_cast<std::int64_t>(code_point_count(s));
    if (width <= n) return Value(s);
    check_string_size(static_cast<std::size_t>(width), r.limits().max_output_bytes);
    const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    return Value((sign ? s.substr(0, 1) : "") +
                 std::string(static_cast<std::size_t>(width - n), '0') + s.substr(sign ? 1 : 0));
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const Bound b = bind_arguments(a, {"fix"}, m);
    const std::string& fix = string_arg(b[0], m);
    if (m == "removeprefix" && s.rfind(fix, 0) == 0) return Value(s.substr(fix.size()));
    if (m == "removesuffix" && !fix.empty() && s.size() >= fix.size() &&
        s.compare(s.size() - fix.size(), fix.size(), fix) == 0)
      return Value(s.substr(0, s.size() - fix.size()));
    return Value(s);
  }
  if (m == "partition" || m == "rpartition") {
    const Bound b = bind_arguments(a, {"sep"}, m);
    const std::string& sep = string_arg(b[0], m);
    if (sep.empty()) fail("empty separator");
    const std::size_t at = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return m == "partition" ? Value::list({Value(s), Value(""), Value("")}, ListKind::tuple)
                              : Value::list({Value(""), Value(""), Value(s)}, ListKind::tuple);
    return Value::list({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))},
                       ListKind::tuple);
  }
  bind_arguments(a, {}, m);
  if (m == "lower" || m == "casefold") return Value(to_lower(s));
  if (m == "upper") return Value(to_upper(s));
  if (m == "title") return Value(to_title(s));
  if (m == "capitalize") return Value(to_capitalized(s));
  if (m == "swapcase") return Value(to_swapped_case(s));
  if (m == "isdigit") return Value(all_of_class(s, CharClass::digit));
  if (m == "isdecimal") return Value(all_of_class(s, CharClass::decimal));
  if (m == "isnumeric") return Value(all_of_class(s, CharClass::numeric));
  if (m == "isalpha") return Value(all_of_class(s, CharClass::alpha));
  if (m == "isalnum") return Value(all_of_class(s, CharClass::alnum));
  if (m == "isspace") return Value(all_of_class(s, CharClass::space));
  if (m == "islower") return Value(all_of_class(s, CharClass::lower));
  if (m == "isupper") return Value(all_of_class(s, CharClass::upper));
  if (m == "istitle") return Value(all_of_class(s, CharClass::title));
  if (m == "isascii") return Value(is_ascii(s));
  if (m == "isprintable") {
    for (char32_t cp : to_u32(s))
      if (!is_printable(cp)) return Value(false);
    return Value(true);
  }
  fail("genesis does not implement str." + name + "()");
}

Value call_dict_method(const Value& self, const std::string& name, Arguments& a) {
  const Dict& d = self.as_dict();
  if (name == "get") {
    const Bound b = bind_arguments(a, {"key", "default"}, "get");
    if (!b[0]) fail("get expected at least 1 argument, got 0");
    if (const Value* v = d.find(*b[0])) return *v;
    return b[1] ? *b[1] : Value::none();
  }
  bind_arguments(a, {}, name);
  if (name == "copy") return self;
  std::vector<Value> out;
  for (const auto& [key, value] : d.items()) {
    if (name == "keys")
      out.push_back(key);
    else if (name == "values")
      out.push_back(value);
    else
      out.push_back(Value::list({key, value}, ListKind::tuple));
  }
  if (name == "keys") return Value::list(std::move(out), ListKind::dict_keys);
  if (name == "values") return Value::list(std::move(out), ListKind::dict_values);
  if (name == "items") return Value::list(std::move(out), ListKind::dict_items);
  fail("genesis does not implement dict." + name + "()");
}

Value call_list_method(const Value& self, const std::string& name, Arguments& a) {
  const std::vector<Value>& items = self.as_list().items;
  if (name == "copy") {
    bind_arguments(a, {}, name);
    return self;
  }
  const Bound b = bind_arguments(a, {"value", "start", "stop"}, name);
  if (!b[0]) fail(name + "() takes at least 1 argument (0 given)");
  if (name == "count") {
    return Value(static_cast<std::int64_t>(std::count_if(
        items.begin(), items.end(), [&](const Value& v) { return equal(v, *b[0]); })));
  }
  const auto n = static_cast<std::int64_t>(items.size());
  auto clamp = [&](std::int64_t i) {
    if (i < 0) i = std::max<std::int64_t>(0, i + n);
    return std::min(i, n);
  };
  for (std::int64_t i = clamp(int_arg(b[1], 0)); i < clamp(int_arg(b[2], n)); ++i)
    if (equal(items[static_cast<std::size_t>(i)], *b[0])) return Value(i);
  fail(repr(*b[0]) + " is not in list");
}

class BoundMethod final : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string repr() const override {
    return "<built-in method " + name_ + " of " + type_name(self_) + " object>";
  }
  bool callable() const override { return true; }
  Value call(Renderer& renderer, Arguments& args) const override {
    if (self_.is_string()) return call_str_method(self_.as_string(), name_, args, renderer);
    if (self_.is_dict()) return call_dict_method(self_, name_, args);
    return call_list_method(self_, name_, args);
  }

 private:
  Value self_;
  std::string name_;
};

}  // namespace

std::optional<Value> find_method(const Value& obj, std::string_view name) {
  auto bound = [&] {
    return Value(
        std::static_pointer_cast<Object>(std::make_shared<BoundMethod>(obj, std::string(name))));
  };
  auto refused = [&] {
    return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                                type_name(obj) + "' object is unsafe.",
                            true);
  };
  if (obj.is_string() && among(kStrMethods, name)) return bound();
  if (obj.is_dict()) {
    if (among(kDictMethods, name)) return bound();
    if (among(kDictMutating, name)) return refused();
  }
  if (obj.is_list()) {
    const ListKind kind = obj.as_list().kind;
    if (kind == ListKind::list || kind == ListKind::tuple || kind == ListKind::range) {
      if (name == "count" || name == "index" || (kind == ListKind::list && name == "copy"))
        return bound();
      if (kind == ListKind::list && among(kListMutating, name)) return refused();
    }
  }
  return std::nullopt;
}

}  // namespace genesis::chat::jinja
