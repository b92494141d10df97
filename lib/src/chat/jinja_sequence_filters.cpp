// jinja2's filters over sequences and mappings (filters.py): joining, sorting (stable, case-
// insensitive unless asked, by attribute paths), selecting by test, mapping by filter or
// attribute, aggregating. Those jinja2 returns as generators (map, select, ...) give lists: the
// same items, printed as a list rather than as "<generator object>".
#include <algorithm>

#include "chat/jinja_filter_support.hpp"

namespace genesis::chat::jinja::filters {

namespace {

void stable_sort_values(std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    // Python's sort(reverse=True) keeps equal items in their order, as a reversed comparison does.
    return reverse ? compare(keys[b], keys[a], "<") < 0 : compare(keys[a], keys[b], "<") < 0;
  });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (std::size_t i : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
}

// --- the filters --------------------------------------------------------------------------

// map (mode 0), select, reject, selectattr, rejectattr (modes 1-4), as jinja2's prepare_map and
// prepare_select_or_reject read their arguments.
Value map_or_select(Renderer& r, const Value& v, Arguments& a, int mode) {
  std::vector<Value> out;
  const std::vector<Value> items = iterate(v);
  if (mode == 0) {
    std::optional<std::string> attribute;
    std::optional<Value> fallback;
    for (auto it = a.keyword.begin(); it != a.keyword.end();) {
      if (it->first == "attribute")
        attribute = text_of(it->second);
      else if (it->first == "default")
        fallback = it->second;
      else {
        ++it;
        continue;
      }
      it = a.keyword.erase(it);
    }
    if (attribute) {
      if (!a.keyword.empty() || !a.positional.empty())
        fail("Unexpected keyword argument '" +
             (a.keyword.empty() ? std::string("?") : a.keyword.front().first) + "'");
      for (const Value& item : items) out.push_back(read_attribute(item, *attribute, fallback));
      return Value::list(std::move(out));
    }
    if (a.positional.empty()) fail("map requires a filter argument");
    const std::string name = text_of(a.positional.front());
    Arguments rest{std::vector<Value>(a.positional.begin() + 1, a.positional.end()), a.keyword};
    for (const Value& item : items) {
      Arguments args = rest;
      out.push_back(r.run_filter(name, item, args));
    }
    return Value::list(std::move(out));
  }
  const bool by_attribute = mode >= 3;
  std::size_t next = 0;
  std::optional<std::string> attribute;
  if (by_attribute) {
    if (a.positional.empty()) fail("Missing parameter for attribute name");
    attribute = text_of(a.positional[next++]);
  }
  std::optional<std::string> test;
  if (next < a.positional.size()) test = text_of(a.positional[next++]);
  Arguments rest{std::vector<Value>(a.positional.begin() + static_cast<std::ptrdiff_t>(next),
                                    a.positional.end()),
                 a.keyword};
  const bool keep_true = mode == 1 || mode == 3;
  for (const Value& item : items) {
    const Value subject = attribute ? read_attribute(item, *attribute, std::nullopt) : item;
    bool result;
    if (test) {
      Arguments args = rest;
      result = r.run_test(*test, subject, args);
    } else {
      result = truthy(subject);
    }
    if (result == keep_true) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value min_or_max(const Value& v, Arguments& a, bool max) {
  const Bound b = bind_arguments(a, {"case_sensitive", "attribute"}, max ? "max" : "min");
  const bool case_sensitive = b[0] && truthy(*b[0]);
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  auto key = [&](std::size_t i) {
    const Value k = b[1] && !b[1]->is_none()
                        ? read_attribute(items[i], text_of(*b[1]), std::nullopt)
                        : items[i];
    return fold_case(k, case_sensitive);
  };
  Value best_key = key(0);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key(i);
    const int c = compare(k, best_key, max ? ">" : "<");
    if (max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

}  // namespace

Value f_batch(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"linecount", "fill_with"}, "batch");
  const std::int64_t count = int_arg(b[0], 0, "batch(): linecount");
  if (count <= 0) fail("batch(): linecount must be positive");
  std::vector<Value> out, row;
  for (Value& item : iterate(v)) {
    if (static_cast<std::int64_t>(row.size()) == count) {
      out.push_back(Value::list(std::move(row)));
      row.clear();
    }
    row.push_back(std::move(item));
  }
  if (!row.empty()) {
    if (b[1] && !b[1]->is_none())
      while (static_cast<std::int64_t>(row.size()) < count) row.push_back(*b[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(out));
}

Value f_dictsort(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"case_sensitive", "by", "reverse"}, "dictsort");
  if (!v.is_dict()) fail("dictsort(): expected a mapping, got '" + type_name(v) + "'");
  const bool case_sensitive = b[0] && truthy(*b[0]);
  const std::string by = b[1] ? text_of(*b[1]) : "key";
  if (by != "key" && by != "value") fail("You can only sort by either 'key' or 'value'");
  std::vector<Value> items, keys;
  for (const auto& [key, value] : v.as_dict().items()) {
    items.push_back(Value::list({key, value}, ListKind::tuple));
    keys.push_back(fold_case(by == "key" ? key : value, case_sensitive));
  }
  stable_sort_values(items, keys, b[2] && truthy(*b[2]));
  return Value::list(std::move(items));
}

Value f_first(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "first");
  if (v.is_string() && !v.as_string().empty()) return get_item(v, Value(std::int64_t{0}));
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "last");
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_items(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "items");
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [key, value] : v.as_dict().items())
    out.push_back(Value::list({key, value}, ListKind::tuple));
  return Value::list(std::move(out));
}

Value f_join(Renderer& r, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"d", "attribute"}, "join");
  const std::string sep = b[0] ? text_of(*b[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += text_of(b[1] && !b[1]->is_none() ? read_attribute(item, text_of(*b[1]), std::nullopt)
                                            : item);
    check_string_size(out.size(), r.limits().max_output_bytes);
  }
  return Value(std::move(out));
}

Value f_length(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "length");
  return Value(length(v));
}

Value f_list(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "list");
  return Value::list(iterate(v));
}

Value f_map(Renderer& r, const Value& v, Arguments& a) { return map_or_select(r, v, a, 0); }

Value f_select(Renderer& r, const Value& v, Arguments& a) { return map_or_select(r, v, a, 1); }

Value f_reject(Renderer& r, const Value& v, Arguments& a) { return map_or_select(r, v, a, 2); }

Value f_selectattr(Renderer& r, const Value& v, Arguments& a) { return map_or_select(r, v, a, 3); }

Value f_rejectattr(Renderer& r, const Value& v, Arguments& a) { return map_or_select(r, v, a, 4); }

Value f_max(Renderer&, const Value& v, Arguments& a) { return min_or_max(v, a, true); }

Value f_min(Renderer&, const Value& v, Arguments& a) { return min_or_max(v, a, false); }

Value f_reverse(Renderer&, const Value& v, Arguments& a) {
  bind_arguments(a, {}, "reverse");
  if (v.is_string()) {
    std::u32string cps = to_u32(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value(to_utf8(cps));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_slice(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"slices", "fill_with"}, "slice");
  const std::int64_t slices = int_arg(b[0], 0, "slice(): slices");
  if (slices <= 0) fail("slice(): slices must be positive");
  const std::vector<Value> items = iterate(v);
  const std::int64_t n = static_cast<std::int64_t>(items.size());
  const std::int64_t per = n / slices, extra = n % slices;
  std::int64_t offset = 0;
  std::vector<Value> out;
  for (std::int64_t i = 0; i < slices; ++i) {
    const std::int64_t start = offset + i * per;
    if (i < extra) ++offset;
    const std::int64_t end = offset + (i + 1) * per;
    std::vector<Value> piece(items.begin() + start, items.begin() + end);
    if (b[1] && !b[1]->is_none() && i >= extra) piece.push_back(*b[1]);
    out.push_back(Value::list(std::move(piece)));
  }
  return Value::list(std::move(out));
}

Value f_sort(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"reverse", "case_sensitive", "attribute"}, "sort");
  std::vector<Value> items = iterate(v);
  const bool case_sensitive = b[1] && truthy(*b[1]);
  std::vector<std::string> attributes;
  if (b[2] && !b[2]->is_none()) {
    const std::string spec = text_of(*b[2]);
    for (const std::string& part : split(spec, std::string(","), -1, false))
      attributes.push_back(strip(part, std::nullopt, StripSide::both));
  }
  std::vector<Value> keys;
  for (const Value& item : items) {
    if (attributes.empty()) {
      keys.push_back(fold_case(item, case_sensitive));
    } else if (attributes.size() == 1) {
      keys.push_back(fold_case(read_attribute(item, attributes[0], std::nullopt), case_sensitive));
    } else {
      std::vector<Value> parts;
      for (const std::string& attribute : attributes)
        parts.push_back(fold_case(read_attribute(item, attribute, std::nullopt), case_sensitive));
      keys.push_back(Value::list(std::move(parts)));
    }
  }
  stable_sort_values(items, keys, b[0] && truthy(*b[0]));
  return Value::list(std::move(items));
}

Value f_sum(Renderer& r, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"attribute", "start"}, "sum");
  Value total = arg_or(b, 1, Value(std::int64_t{0}));
  for (const Value& item : iterate(v)) {
    const Value x =
        b[0] && !b[0]->is_none() ? read_attribute(item, text_of(*b[0]), std::nullopt) : item;
    if (total.is_string()) fail("sum() can't sum strings [use ''.join(seq) instead]");
    total = binary_op("+", total, x, r);
  }
  return total;
}

Value f_unique(Renderer&, const Value& v, Arguments& a) {
  const Bound b = bind_arguments(a, {"case_sensitive", "attribute"}, "unique");
  const bool case_sensitive = b[0] && truthy(*b[0]);
  std::vector<Value> out, seen;
  for (const Value& item : iterate(v)) {
    Value key = fold_case(
        b[1] && !b[1]->is_none() ? read_attribute(item, text_of(*b[1]), std::nullopt) : item,
        case_sensitive);
    if (key.is_dict() || (key.is_list() && key.as_list().kind != ListKind::tuple))
      fail("unhashable type: '" + type_name(key) + "'");
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); }))
      continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

}  // namespace genesis::chat::jinja::filters
