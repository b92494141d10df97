// JSON in and out for templates. Output follows CPython's json encoder (its pure-Python form in
// json/encoder.py): the same escapes, float repr, key coercion (True -> "true", 1.5 -> "1.5"),
// and layout with indent (a newline and one indent per level, empty containers as [] and {}).
#include "chat/jinja_json.hpp"

#include <algorithm>
#include <cmath>

#include "chat/jinja_text.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::chat::jinja {

Value from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX))
        fail("the integer " + std::to_string(u) + " does not fit in 64 bits");
      return Value(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [key, value] : json.items()) d.set(Value(key), from_json(value));
      return Value::dict(std::move(d));
    }
    default: fail("binary data in JSON input");
  }
}

namespace {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (std::size_t pos = 0; pos < s.size();) {
    const auto lead = static_cast<unsigned char>(s[pos]);
    if (lead >= 0x80) {
      const auto [cp, len] = tokenizer::decode_utf8(s, pos);
      if (!ensure_ascii) {
        out.append(s.substr(pos, len));
      } else {
        char buffer[16];
        if (cp >= 0x10000) {
          const char32_t v = cp - 0x10000;
          std::snprintf(buffer, sizeof(buffer), "\\u%04x\\u%04x",
                        static_cast<unsigned>(0xD800 + (v >> 10)),
                        static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
        } else {
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(cp));
        }
        out += buffer;
      }
      pos += len;
      continue;
    }
    switch (lead) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (lead < 0x20 || (ensure_ascii && lead == 0x7F)) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(lead));
          out += buffer;
        } else {
          out.push_back(static_cast<char>(lead));
        }
    }
    ++pos;
  }
  out.push_back('"');
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return repr_float(f);
}

[[noreturn]] void not_serializable(const Value& v) {
  std::string name = type_name(v);
  if (v.is_object()) {
    const std::string r = v.as_object().repr();
    name = r.rfind("<Macro", 0) == 0       ? "Macro"
           : r.rfind("<Namespace", 0) == 0 ? "Namespace"
                                           : "object";
  }
  fail("Object of type " + name + " is not JSON serializable");
}

class Dumper {
 public:
  Dumper(const JsonDumpOptions& options, std::size_t max_bytes)
      : options_(options), max_bytes_(max_bytes) {}

  void dump(const Value& v, int level) {
    check_string_size(out_.size(), max_bytes_);
    switch (v.kind()) {
      case ValueKind::none: out_ += "null"; return;
      case ValueKind::boolean: out_ += v.as_bool() ? "true" : "false"; return;
      case ValueKind::integer: out_ += std::to_string(v.as_int()); return;
      case ValueKind::floating: out_ += json_float(v.as_float()); return;
      case ValueKind::string:
        append_json_string(out_, v.as_string(), options_.ensure_ascii);
        return;
      case ValueKind::list: {
        const List& list = v.as_list();
        if (list.kind != ListKind::list && list.kind != ListKind::tuple) not_serializable(v);
        if (list.items.empty()) {
          out_ += "[]";
          return;
        }
        out_.push_back('[');
        for (std::size_t i = 0; i < list.items.size(); ++i) {
          separate(i == 0, level + 1);
          dump(list.items[i], level + 1);
        }
        close(level);
        out_.push_back(']');
        return;
      }
      case ValueKind::dict: {
        const Dict& dict = v.as_dict();
        if (dict.size() == 0) {
          out_ += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> items;
        std::vector<const Value*> keys;
        for (const auto& [key, value] : dict.items()) {
          items.emplace_back(key_text(key), &value);
          keys.push_back(&key);
        }
        if (options_.sort_keys) {
          std::vector<std::size_t> order(items.size());
          for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
          std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return compare(*keys[a], *keys[b], "<") < 0;
          });
          std::vector<std::pair<std::string, const Value*>> sorted;
          for (std::size_t i : order) sorted.push_back(items[i]);
          items = std::move(sorted);
        }
        out_.push_back('{');
        for (std::size_t i = 0; i < items.size(); ++i) {
          separate(i == 0, level + 1);
          append_json_string(out_, items[i].first, options_.ensure_ascii);
          out_ += options_.key_separator;
          dump(*items[i].second, level + 1);
        }
        close(level);
        out_.push_back('}');
        return;
      }
      default: not_serializable(v);
    }
  }

  std::string take() {
    check_string_size(out_.size(), max_bytes_);
    return std::move(out_);
  }

 private:
  static std::string key_text(const Value& key) {
    switch (key.kind()) {
      case ValueKind::string: return key.as_string();
      case ValueKind::boolean: return key.as_bool() ? "true" : "false";
      case ValueKind::none: return "null";
      case ValueKind::integer: return std::to_string(key.as_int());
      case ValueKind::floating: return json_float(key.as_float());
      default: fail("keys must be str, int, float, bool or None, not " + type_name(key));
    }
  }
  void separate(bool first, int level) {
    if (!first) out_ += options_.item_separator;
    if (options_.indent) {
      out_.push_back('\n');
      for (int i = 0; i < level; ++i) out_ += *options_.indent;
    }
  }
  void close(int level) {
    if (!options_.indent) return;
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *options_.indent;
  }

  const JsonDumpOptions& options_;
  std::size_t max_bytes_;
  std::string out_;
};

}  // namespace

std::string dump_json(const Value& value, const JsonDumpOptions& options, std::size_t max_bytes) {
  Dumper dumper(options, max_bytes);
  dumper.dump(value, 0);
  return dumper.take();
}

}  // namespace genesis::chat::jinja
