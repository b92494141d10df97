// Typed access to one schema key: assigning a TOML value (type check, choices, the key's rule)
// and reading the current value back as TOML. Messages name the key and where the value came
// from, and quote the value as the user wrote it.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <span>
#include <sstream>

#include "config_value.hpp"
#include "genesis/core/error.hpp"

namespace genesis::config_detail {
namespace {

template <typename... Ts>
struct Overloaded : Ts... { using Ts::operator()...; };

[[noreturn]] void fail(const ConfigKey& key, const Location& loc, const std::string& message) {
  throw ConfigError(key_at(loc, key.name) + message);
}

[[noreturn]] void fail_type(const ConfigKey& key, const Location& loc, const char* expected,
                            const toml::node& node) {
  fail(key, loc, std::string(": expected ") + expected + ", got " + describe_node(node));
}

std::string join(std::span<const std::string_view> items) {
  std::string out;
  for (auto item : items) out += (out.empty() ? "" : ", ") + std::string(item);
  return out;
}

void check_choice(const ConfigKey& key, const Location& loc, const std::string& v,
                  const toml::node& node, std::span<const std::string_view> choices) {
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return;
  const std::vector<std::string> names(choices.begin(), choices.end());
  fail(key, loc, " must be one of " + join(choices) + "; got " + describe_node(node) +
                     did_you_mean(v, names));
}

// in_list: the rule applies to each entry of a list (model.hidden_sizes) and says so.
void check_integer(const ConfigKey& key, const Location& loc, std::int64_t v,
                   const toml::node& node, bool in_list) {
  const char* prefix = in_list ? " entries must be " : " must be a ";
  const char* plural = in_list ? "s" : "";
  if (key.rule == Rule::positive && v <= 0)
    fail(key, loc, std::string(prefix) + "positive integer" + plural + ", got " +
                       describe_node(node));
  if (key.rule == Rule::non_negative && v < 0)
    fail(key, loc, std::string(prefix) + "non-negative integer" + plural + ", got " +
                       describe_node(node));
}

void check_number(const ConfigKey& key, const Location& loc, double v, const toml::node& node) {
  std::string got = ", got " + describe_node(node);
  if (!std::isfinite(v)) fail(key, loc, " must be a finite number" + got);
  switch (key.rule) {
    case Rule::positive:
      if (v <= 0) fail(key, loc, " must be a positive number" + got);
      break;
    case Rule::non_negative:
      if (v < 0) fail(key, loc, " must be a non-negative number" + got);
      break;
    case Rule::probability:
      if (v < 0 || v >= 1) fail(key, loc, " must be in [0, 1)" + got);
      break;
    case Rule::open_unit:
      if (v <= 0 || v >= 1) fail(key, loc, " must be in (0, 1)" + got);
      break;
    default: break;
  }
}

void check_string(const ConfigKey& key, const Location& loc, const std::string& v,
                  const toml::node& node) {
  if (!key.choices.empty()) check_choice(key, loc, v, node, key.choices);
  switch (key.rule) {
    case Rule::run_name:
      if (v.empty() || v == "." || v == ".." || v.find('/') != std::string::npos)
        fail(key, loc, " must be a single directory name, got " + describe_node(node));
      break;
    case Rule::non_empty:
      if (v.empty()) fail(key, loc, " must not be empty");
      break;
    default: break;
  }
}

}  // namespace

std::string describe_location(const Location& loc) {
  if (loc.from_set) return "--set";
  if (loc.file.empty()) return "defaults";
  if (loc.line == 0) return loc.file;  // a source without lines: "zero1.json: optimizer.params.lr"
  return loc.file + ":" + std::to_string(loc.line);
}

std::string key_at(const Location& loc, std::string_view key) {
  if (loc.from_set) return "--set " + std::string(key);
  return describe_location(loc) + ": " + std::string(key);
}

std::string describe_node(const toml::node& node) {
  // TOML syntax, written here rather than by toml++'s printer: it quotes strings with single
  // quotes and prints doubles with 17 digits (0.10000000000000001).
  switch (node.type()) {
    case toml::node_type::string: {
      std::string out = "\"";
      for (char c : node.as_string()->get()) {
        switch (c) {
          case '"': out += "\\\""; break;
          case '\\': out += "\\\\"; break;
          case '\n': out += "\\n"; break;
          case '\t': out += "\\t"; break;
          default:
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
              char buf[8];
              std::snprintf(buf, sizeof buf, "\\u%04x", c);
              out += buf;
            } else {
              out += c;
            }
        }
      }
      return out + "\"";
    }
    case toml::node_type::floating_point: {
      double v = node.as_floating_point()->get();
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      char buf[32];
      auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;  // shortest round-trip form
      std::string out(buf, end);
      if (out.find_first_of(".e") == std::string::npos) out += ".0";
      return out;
    }
    case toml::node_type::array: {
      std::string out = "[";
      for (const auto& element : *node.as_array())
        out += (out.size() > 1 ? ", " : "") + describe_node(element);
      return out + "]";
    }
    case toml::node_type::table: return "a table";
    default: {
      std::ostringstream os;
      node.visit([&](const auto& v) { os << v; });
      return os.str();
    }
  }
}

void set_value(Config& config, const ConfigKey& key, const toml::node& node, const Location& loc) {
  std::visit(
      Overloaded{
          [&](std::string* field) {
            const auto* v = node.as_string();
            if (v == nullptr) fail_type(key, loc, "a string", node);
            check_string(key, loc, v->get(), node);
            *field = v->get();
          },
          [&](std::int64_t* field) {
            const auto* v = node.as_integer();
            if (v == nullptr) fail_type(key, loc, "an integer", node);
            check_integer(key, loc, v->get(), node, false);
            *field = v->get();
          },
          [&](std::uint64_t* field) {
            const auto* v = node.as_integer();
            if (v == nullptr) fail_type(key, loc, "an integer", node);
            if (v->get() < 0)
              fail(key, loc, " must be a non-negative integer, got " + describe_node(node));
            *field = static_cast<std::uint64_t>(v->get());
          },
          [&](double* field) {
            // An integer is a fine number: `learning_rate = 1` means 1.0.
            double value = 0;
            if (const auto* f = node.as_floating_point()) value = f->get();
            else if (const auto* i = node.as_integer()) value = static_cast<double>(i->get());
            else fail_type(key, loc, "a number", node);
            check_number(key, loc, value, node);
            *field = value;
          },
          [&](bool* field) {
            const auto* v = node.as_boolean();
            if (v == nullptr) fail_type(key, loc, "true or false", node);
            *field = v->get();
          },
          [&](std::vector<std::int64_t>* field) {
            const auto* array = node.as_array();
            if (array == nullptr || !std::all_of(array->begin(), array->end(),
                                                 [](const toml::node& e) { return e.is_integer(); }))
              fail_type(key, loc, "a list of integers", node);
            std::vector<std::int64_t> values;
            for (const auto& element : *array) {
              std::int64_t v = element.as_integer()->get();
              check_integer(key, loc, v, element, true);
              values.push_back(v);
            }
            *field = std::move(values);
          },
          [&](std::vector<std::string>* field) {
            // One string is a list of one where the peer takes it so (target_modules = "all-linear").
            const auto* one = node.as_string();
            if (one != nullptr && key.rule == Rule::one_or_list) {
              *field = {one->get()};
              return;
            }
            const auto* array = node.as_array();
            if (array == nullptr || !std::all_of(array->begin(), array->end(),
                                                 [](const toml::node& e) { return e.is_string(); }))
              fail_type(key, loc, "a list of strings", node);
            std::vector<std::string> values;
            for (const auto& element : *array) values.push_back(element.as_string()->get());
            *field = std::move(values);
          },
          [&]<Setting E>(E* field) {
            // A setting spelled "true" (PEFT's init_lora_weights) also takes TOML's true.
            std::string text;
            if (const auto* b = node.as_boolean()) text = b->get() ? "true" : "false";
            else if (const auto* v = node.as_string()) text = v->get();
            else fail_type(key, loc, "a string", node);
            check_choice(key, loc, text, node, setting_names(E{}));
            *field = *parse_setting<E>(text);
          },
      },
      key.field(config));
}

std::unique_ptr<toml::node> value_node(const Config& config, const ConfigKey& key) {
  // The schema's accessors take a mutable Config so one pointer serves reading and writing;
  // nothing is written through it here.
  Field field = key.field(const_cast<Config&>(config));
  return std::visit(
      Overloaded{
          [](std::string* v) -> std::unique_ptr<toml::node> {
            return std::make_unique<toml::value<std::string>>(*v);
          },
          [](std::int64_t* v) -> std::unique_ptr<toml::node> {
            return std::make_unique<toml::value<std::int64_t>>(*v);
          },
          // TOML integers are signed 64-bit: seeds above 2^63 - 1 do not round-trip.
          [](std::uint64_t* v) -> std::unique_ptr<toml::node> {
            return std::make_unique<toml::value<std::int64_t>>(static_cast<std::int64_t>(*v));
          },
          [](double* v) -> std::unique_ptr<toml::node> {
            return std::make_unique<toml::value<double>>(*v);
          },
          [](bool* v) -> std::unique_ptr<toml::node> {
            return std::make_unique<toml::value<bool>>(*v);
          },
          [](std::vector<std::int64_t>* v) -> std::unique_ptr<toml::node> {
            auto array = std::make_unique<toml::array>();
            for (auto x : *v) array->push_back(x);
            return array;
          },
          [](std::vector<std::string>* v) -> std::unique_ptr<toml::node> {
            auto array = std::make_unique<toml::array>();
            for (const auto& x : *v) array->push_back(x);
            return array;
          },
          []<Setting E>(E* v) -> std::unique_ptr<toml::node> {
            if (to_string(*v) == "true") return std::make_unique<toml::value<bool>>(true);
            return std::make_unique<toml::value<std::string>>(std::string(to_string(*v)));
          },
      },
      field);
}

}  // namespace genesis::config_detail
