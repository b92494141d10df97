// What the filters share: Python-style argument reading, jinja2's attribute getter (map,
// sort and friends take "a.b.0") and its case folding, and the filters over sequences that
// jinja_sequence_filters.cpp defines for jinja_filters.cpp's table.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_runtime.hpp"
#include "chat/jinja_text.hpp"

namespace genesis::chat::jinja::filters {

using Bound = std::vector<std::optional<Value>>;

inline Value arg_or(const Bound& b, std::size_t i, Value fallback) {
  return b[i] ? *b[i] : std::move(fallback);
}

// jinja2's soft_str: str() of anything (an undefined value is "").
inline std::string text_of(const Value& v) { return to_str(v); }

inline std::optional<std::string> optional_text(const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) fail("expected a string argument, got '" + type_name(*v) + "'");
  return v->as_string();
}

inline std::int64_t int_arg(const std::optional<Value>& v, std::int64_t fallback,
                            std::string_view what) {
  if (!v) return fallback;
  if (v->is_int() || v->is_bool()) return v->integer();
  fail(std::string(what) + " must be an integer, not '" + type_name(*v) + "'");
}

// jinja2's make_attrgetter: "a.b.0" read item by item (numbers as indices), with a default for
// what comes out undefined.
inline Value read_attribute(const Value& item, const std::string& attribute,
                            const std::optional<Value>& fallback) {
  Value v = item;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = attribute.find('.', start);
    const std::string part =
        attribute.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits ? Value(static_cast<std::int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (fallback && v.is_undefined()) return *fallback;
  return v;
}

// The sort key of case-insensitive filters: strings lowercased.
inline Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(to_lower(v.as_string()));
  return v;
}

// Filters over sequences (jinja_sequence_filters.cpp).
Value f_batch(Renderer& r, const Value& v, Arguments& a);
Value f_dictsort(Renderer& r, const Value& v, Arguments& a);
Value f_first(Renderer& r, const Value& v, Arguments& a);
Value f_last(Renderer& r, const Value& v, Arguments& a);
Value f_items(Renderer& r, const Value& v, Arguments& a);
Value f_join(Renderer& r, const Value& v, Arguments& a);
Value f_length(Renderer& r, const Value& v, Arguments& a);
Value f_list(Renderer& r, const Value& v, Arguments& a);
Value f_map(Renderer& r, const Value& v, Arguments& a);
Value f_select(Renderer& r, const Value& v, Arguments& a);
Value f_reject(Renderer& r, const Value& v, Arguments& a);
Value f_selectattr(Renderer& r, const Value& v, Arguments& a);
Value f_rejectattr(Renderer& r, const Value& v, Arguments& a);
Value f_max(Renderer& r, const Value& v, Arguments& a);
Value f_min(Renderer& r, const Value& v, Arguments& a);
Value f_reverse(Renderer& r, const Value& v, Arguments& a);
Value f_slice(Renderer& r, const Value& v, Arguments& a);
Value f_sort(Renderer& r, const Value& v, Arguments& a);
Value f_sum(Renderer& r, const Value& v, Arguments& a);
Value f_unique(Renderer& r, const Value& v, Arguments& a);

}  // namespace genesis::chat::jinja::filters
