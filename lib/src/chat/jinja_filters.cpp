// jinja2 3.1's built-in filters (filters.py) with their Python signatures, and transformers'
// tojson in place of jinja2's: the table of them all, and those on strings and numbers (those on
// sequences are jinja_sequence_filters.cpp's). safe and escape give plain strings: with
// autoescape off, as transformers runs it, only the Markup escaping of later operands would
// differ, which genesis does not reproduce.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_filter_support.hpp"
#include "chat/jinja_json.hpp"

namespace genesis::chat::jinja {

namespace {

using namespace filters;

Value f_abs(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "abs");
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.integer() == INT64_MIN) fail("integer overflow (genesis's integers are 64-bit)");
    return Value(static_cast<std::int64_t>(std::llabs(v.integer())));
  }
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"name"}, "attr");
  if (!b[0] || !b[0]->is_string()) fail("attr(): attribute name must be a string");
  if (v.is_undefined()) v.fail_undefined();
  const std::string& name = b[0]->as_string();
  if (!name.empty() && name[0] == '_')
    return Value::undefined("access to attribute '" + name + "' is unsafe.", true);
  if (auto method = find_method(v, name)) return *method;
  if (v.is_object()) return v.as_object().attribute(name);
  return Value::undefined("'" + object_description(v) + "' has no attribute '" + name + "'");
}

Value f_capitalize(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "capitalize");
  return Value(to_capitalized(text_of(v)));
}

Value f_center(Renderer& r, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"width"}, "center");
  const std::string s = text_of(v);
  const std::int64_t width = int_arg(b[0], 80, "center(): width");
  const std::int64_t n = static_cast<std::int64_t>(code_point_count(s));
  if (width <= n) return Value(s);
  check_string_size(s.size() + static_cast<std::size_t>(width - n), r.limits().max_output_bytes);
  const std::int64_t margin = width - n;
  const std::int64_t left = margin / 2 + (margin & width & 1);
  return Value(std::string(static_cast<std::size_t>(left), ' ') + s +
               std::string(static_cast<std::size_t>(margin - left), ' '));
}

Value f_default(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"default_value", "boolean"}, "default");
  const bool boolean = b[1] && truthy(*b[1]);
  if (v.is_undefined() || (boolean && !truthy(v))) return arg_or(b, 0, Value(""));
  return v;
}

Value f_escape(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "escape");
  std::string out;
  for (char c : text_of(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value(std::move(out));
}

Value f_format(Renderer& r, const Value& v, Arguments& a) {
  if (!a.keyword.empty() && !a.positional.empty())
    fail("can't handle positional and keyword arguments at the same time");
  if (!a.keyword.empty()) {
    Dict d;
    for (auto& [key, value] : a.keyword) d.set(Value(key), value);
    return percent_format(text_of(v), Value::dict(std::move(d)), r);
  }
  return percent_format(text_of(v), Value::list(a.positional, ListKind::tuple), r);
}

// Python's float() of a string: surrounding whitespace, a sign, digits with single underscores
// between them, "inf", "nan".
std::optional<double> parse_float(const std::string& text) {
  std::string s = strip(text, std::nullopt, StripSide::both);
  std::string clean;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1])))
        return std::nullopt;
      continue;
    }
    clean.push_back(s[i]);
  }
  std::string lower = to_lower(clean);
  const std::string body =
      !lower.empty() && (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double x = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -x : x;
  }
  if (clean.empty() || clean.find_first_not_of("0123456789+-.eE") != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return x;
}

Value f_float(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"default"}, "float");
  if (v.is_float()) return v;
  if (v.is_int() || v.is_bool()) return Value(static_cast<double>(v.integer()));
  if (v.is_string())
    if (auto x = parse_float(v.as_string())) return Value(*x);
  return arg_or(b, 0, Value(0.0));
}

// Python's int(text, base) for base 10 (and 0, 2, 8, 16): whitespace, a sign, digits with
// single underscores between them.
std::optional<std::int64_t> parse_int(const std::string& text, std::int64_t base) {
  std::string s = strip(text, std::nullopt, StripSide::both);
  bool negative = false;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  std::string lower = to_lower(s.substr(i));
  if ((base == 0 || base == 16) && lower.rfind("0x", 0) == 0) {
    base = 16;
    lower = lower.substr(2);
    if (!lower.empty() && lower[0] == '_') lower = lower.substr(1);
  } else if ((base == 0 || base == 8) && lower.rfind("0o", 0) == 0) {
    base = 8;
    lower = lower.substr(2);
    if (!lower.empty() && lower[0] == '_') lower = lower.substr(1);
  } else if ((base == 0 || base == 2) && lower.rfind("0b", 0) == 0) {
    base = 2;
    lower = lower.substr(2);
    if (!lower.empty() && lower[0] == '_') lower = lower.substr(1);
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36) return std::nullopt;  // Python's ValueError, which int() catches
  if (lower.empty() || lower.front() == '_' || lower.back() == '_' ||
      lower.find("__") != std::string::npos)
    return std::nullopt;
  std::int64_t value = 0;
  for (char c : lower) {
    if (c == '_') continue;
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (digit >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value))
      fail("the integer " + text + " does not fit in 64 bits");
  }
  return negative ? -value : value;
}

Value f_int(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"default", "base"}, "int");
  const std::int64_t base = int_arg(b[1], 10, "int(): base");
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(v.integer());
  if (v.is_string())
    if (auto i = parse_int(v.as_string(), base)) return Value(*i);
  std::optional<double> f;
  if (v.is_float())
    f = v.as_float();
  else if (v.is_string())
    f = parse_float(v.as_string());
  if (f && !std::isnan(*f)) {
    if (std::isinf(*f)) fail("cannot convert float infinity to integer");
    if (std::fabs(*f) >= 9.2e18) fail("the integer does not fit in 64 bits");
    return Value(static_cast<std::int64_t>(std::trunc(*f)));
  }
  return arg_or(b, 0, Value(std::int64_t{0}));
}

Value f_indent(Renderer& r, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"width", "first", "blank"}, "indent");
  std::string indentation = "    ";
  if (b[0]) {
    if (b[0]->is_string())
      indentation = b[0]->as_string();
    else
      indentation = std::string(
          static_cast<std::size_t>(std::max<std::int64_t>(0, int_arg(b[0], 4, "indent(): width"))),
          ' ');
  }
  const std::string s = text_of(v) + "\n";
  std::vector<std::string> lines = split_lines(s, false);
  std::string out;
  if (b[2] && truthy(*b[2])) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indentation;
      out += lines[i];
      check_string_size(out.size(), r.limits().max_output_bytes);
    }
  } else if (!lines.empty()) {
    out = lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indentation;
      out += lines[i];
      check_string_size(out.size(), r.limits().max_output_bytes);
    }
  }
  if (b[1] && truthy(*b[1])) out = indentation + out;
  return Value(std::move(out));
}

Value f_lower(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "lower");
  return Value(to_lower(text_of(v)));
}

Value f_upper(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "upper");
  return Value(to_upper(text_of(v)));
}

Value f_title(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "title");
  // jinja2's do_title capitalizes words split at spaces, brackets and hyphens, not str.title().
  const std::u32string cps = to_u32(text_of(v));
  std::string out;
  bool word_start = true;
  for (char32_t cp : cps) {
    const std::string one = to_utf8(std::u32string(1, cp));
    const bool separator =
        is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    if (separator) {
      out += one;
      word_start = true;
    } else if (word_start) {
      out += to_upper(one);
      word_start = false;
    } else {
      out += to_lower(one);
    }
  }
  return Value(std::move(out));
}

Value f_replace(Renderer& r, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"old", "new", "count"}, "replace");
  if (!b[0] || !b[1]) fail("replace() missing required arguments");
  Arguments method{{Value(text_of(*b[0])), Value(text_of(*b[1]))}, {}};
  if (b[2] && !b[2]->is_none()) method.positional.push_back(*b[2]);
  return r.call(*find_method(Value(text_of(v)), "replace"), method);
}

Value f_round(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"precision", "method"}, "round");
  const std::int64_t precision = int_arg(b[0], 0, "round(): precision");
  const std::string method = b[1] ? text_of(*b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    fail("method must be 'common', 'ceil' or 'floor'");
  if (!v.is_number()) fail("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float()) return Value(v.integer());  // round(int, n) keeps an int for n >= 0
    const double x = v.as_float();
    if (!std::isfinite(x) || precision > 300) return Value(x);
    // Correctly rounded decimal text, as Python's round() computes it, read back.
    char buffer[512];
    if (precision >= 0) {
      std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(precision), x);
      return Value(std::strtod(buffer, nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value(std::nearbyint(x / scale) * scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.number() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "safe");
  return Value(text_of(v));
}

Value f_string(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "string");
  return Value(text_of(v));
}

Value f_tojson(Renderer& r, const Value& v, Arguments& a) {
  const Bound b =
      bind_arguments(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
  JsonDumpOptions options;
  options.ensure_ascii = b[0] && truthy(*b[0]);
  if (b[1] && !b[1]->is_none()) {
    if (b[1]->is_string())
      options.indent = b[1]->as_string();
    else
      options.indent = std::string(
          static_cast<std::size_t>(std::max<std::int64_t>(0, int_arg(b[1], 0, "tojson(): indent"))),
          ' ');
    options.item_separator = ",";
  }
  if (b[2] && !b[2]->is_none()) {
    const std::vector<Value> parts = iterate(*b[2]);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
      fail("tojson(): separators must be a pair of strings");
    options.item_separator = parts[0].as_string();
    options.key_separator = parts[1].as_string();
  }
  options.sort_keys = b[3] && truthy(*b[3]);
  return Value(dump_json(v, options, r.limits().max_output_bytes));
}

Value f_trim(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"chars"}, "trim");
  return Value(strip(text_of(v), optional_text(b[0]), StripSide::both));
}

Value f_wordcount(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "wordcount");
  std::int64_t words = 0;
  bool in_word = false;
  for (char32_t cp : to_u32(text_of(v))) {
    const std::string one = to_utf8(std::u32string(1, cp));
    const bool word = cp == '_' || all_of_class(one, CharClass::alnum);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value(words);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},
    {"batch", f_batch},       {"capitalize", f_capitalize},
    {"center", f_center},     {"count", f_length},
    {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape},     {"first", f_first},
    {"float", f_float},       {"forceescape", f_escape},
    {"format", f_format},     {"indent", f_indent},
    {"int", f_int},           {"items", f_items},
    {"join", f_join},         {"last", f_last},
    {"length", f_length},     {"list", f_list},
    {"lower", f_lower},       {"map", f_map},
    {"max", f_max},           {"min", f_min},
    {"reject", f_reject},     {"rejectattr", f_rejectattr},
    {"replace", f_replace},   {"reverse", f_reverse},
    {"round", f_round},       {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr},
    {"slice", f_slice},       {"sort", f_sort},
    {"string", f_string},     {"sum", f_sum},
    {"title", f_title},       {"tojson", f_tojson},
    {"trim", f_trim},         {"unique", f_unique},
    {"upper", f_upper},       {"wordcount", f_wordcount},
};

// jinja2 3.1's filters that genesis leaves out: a template using one fails to load, by name.
constexpr std::string_view kUnsupportedFilters[] = {
    "filesizeformat", "groupby",   "pprint", "random",   "striptags",
    "truncate",       "urlencode", "urlize", "wordwrap", "xmlattr"};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const FilterEntry& e : kFilters)
    if (e.name == name) return e.fn;
  return nullptr;
}

bool is_jinja2_filter(std::string_view name) {
  return find_filter(name) != nullptr ||
         std::find(std::begin(kUnsupportedFilters), std::end(kUnsupportedFilters), name) !=
             std::end(kUnsupportedFilters);
}

}  // namespace genesis::chat::jinja
