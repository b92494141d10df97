// The global functions of transformers' template environment: jinja2's range (capped at 100000
// items as its sandbox caps it), dict, namespace, cycler and joiner, and transformers'
// raise_exception and strftime_now. lipsum exists but fails when called. Also the argument
// binding every builtin uses.
#include <ctime>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_runtime.hpp"

namespace genesis::chat::jinja {

namespace {

constexpr std::int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

class Namespace final : public Object {
 public:
  std::string repr() const override {
    return "<Namespace " + jinja::repr(Value::dict(attrs_)) + ">";
  }
  Value attribute(std::string_view name) const override {
    if (const Value* v = attrs_.find(name)) return *v;
    return Value::undefined("'" + repr() + "' has no attribute '" + std::string(name) + "'");
  }
  bool is_namespace() const override { return true; }
  bool set_attribute(const std::string& name, Value value) override {
    attrs_.set(Value(name), std::move(value));
    return true;
  }
  Dict attrs_;
};

// cycler(a, b, ...): .next() gives the items in turn, .current the next one, .reset() restarts.
struct CyclerState {
  std::vector<Value> items;
  std::size_t position = 0;
};

class CyclerMethod final : public Object {
 public:
  CyclerMethod(std::shared_ptr<CyclerState> state, bool reset)
      : state_(std::move(state)), reset_(reset) {}
  std::string repr() const override {
    return reset_ ? "<bound method Cycler.reset>" : "<bound method Cycler.next>";
  }
  bool callable() const override { return true; }
  Value call(Renderer&, Arguments& args) const override {
    bind_arguments(args, {}, reset_ ? "reset" : "next");
    if (reset_) {
      state_->position = 0;
      return Value::none();
    }
    Value current = state_->items[state_->position];
    state_->position = (state_->position + 1) % state_->items.size();
    return current;
  }

 private:
  std::shared_ptr<CyclerState> state_;
  bool reset_;
};

class Cycler final : public Object {
 public:
  explicit Cycler(std::vector<Value> items) : state_(std::make_shared<CyclerState>()) {
    state_->items = std::move(items);
  }
  std::string repr() const override { return "<jinja2.utils.Cycler object>"; }
  Value attribute(std::string_view name) const override {
    if (name == "current") return state_->items[state_->position];
    if (name == "next" || name == "reset")
      return Value(std::static_pointer_cast<Object>(
          std::make_shared<CyclerMethod>(state_, name == "reset")));
    return Object::attribute(name);
  }

 private:
  std::shared_ptr<CyclerState> state_;
};

class Joiner final : public Object {
 public:
  explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
  std::string repr() const override { return "<jinja2.utils.Joiner object>"; }
  bool callable() const override { return true; }
  Value call(Renderer&, Arguments& args) const override {
    bind_arguments(args, {}, "joiner");
    if (!used_) {
      used_ = true;
      return Value("");
    }
    return Value(sep_);
  }

 private:
  std::string sep_;
  mutable bool used_ = false;  // a joiner is made and used within one render
};

using Builtin = Value (*)(Renderer&, Arguments&);

class Global final : public Object {
 public:
  Global(std::string_view name, Builtin fn) : name_(name), fn_(fn) {}
  std::string repr() const override { return "<function " + std::string(name_) + ">"; }
  bool callable() const override { return true; }
  Value call(Renderer& renderer, Arguments& args) const override { return fn_(renderer, args); }

 private:
  std::string_view name_;
  Builtin fn_;
};

std::int64_t int_argument(const Value& v) {
  if (!v.is_int() && !v.is_bool())
    fail("'" + type_name(v) + "' object cannot be interpreted as an integer");
  return v.integer();
}

Value g_range(Renderer& r, Arguments& a) {
  if (!a.keyword.empty()) fail("range() takes no keyword arguments");
  const auto& p = a.positional;
  if (p.empty() || p.size() > 3)
    fail("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  std::int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = int_argument(p[0]);
  } else {
    start = int_argument(p[0]);
    stop = int_argument(p[1]);
    if (p.size() == 3) step = int_argument(p[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 magnitude = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + magnitude - 1) / magnitude;
  if (count > kMaxRange)
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  r.charge(static_cast<std::int64_t>(count));
  std::vector<Value> items;
  items.reserve(static_cast<std::size_t>(count));
  for (__int128 i = 0; i < count; ++i)
    items.emplace_back(static_cast<std::int64_t>(start + i * step));
  std::string shown = "range(" + std::to_string(start) + ", " + std::to_string(stop);
  if (step != 1) shown += ", " + std::to_string(step);
  return Value::list(std::move(items), ListKind::range, shown + ")");
}

// dict(mapping or pairs, **kwargs) and namespace(...) take the same arguments.
Dict dict_of(const Arguments& a, std::string_view function) {
  if (a.positional.size() > 1)
    fail(std::string(function) + " expected at most 1 argument, got " +
         std::to_string(a.positional.size()));
  Dict d;
  if (!a.positional.empty()) {
    const Value& source = a.positional[0];
    if (source.is_dict()) {
      for (const auto& [key, value] : source.as_dict().items()) d.set(key, value);
    } else {
      for (const Value& pair : iterate(source)) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2)
          fail("dictionary update sequence element has length " + std::to_string(kv.size()) +
               "; 2 is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [key, value] : a.keyword) d.set(Value(key), value);
  return d;
}

Value g_dict(Renderer&, Arguments& a) { return Value::dict(dict_of(a, "dict")); }

Value g_namespace(Renderer&, Arguments& a) {
  auto ns = std::make_shared<Namespace>();
  ns->attrs_ = dict_of(a, "namespace");
  return Value(std::static_pointer_cast<Object>(ns));
}

Value g_cycler(Renderer&, Arguments& a) {
  if (!a.keyword.empty()) fail("cycler() takes no keyword arguments");
  if (a.positional.empty()) fail("at least one item has to be provided");
  return Value(std::static_pointer_cast<Object>(std::make_shared<Cycler>(a.positional)));
}

Value g_joiner(Renderer&, Arguments& a) {
  const auto b = bind_arguments(a, {"sep"}, "joiner");
  return Value(std::static_pointer_cast<Object>(
      std::make_shared<Joiner>(b[0] ? to_str(*b[0]) : std::string(", "))));
}

Value g_lipsum(Renderer&, Arguments&) { fail("genesis does not implement lipsum()"); }

Value g_raise_exception(Renderer&, Arguments& a) {
  const auto b = bind_arguments(a, {"message"}, "raise_exception");
  if (!b[0]) fail("raise_exception() missing 1 required positional argument: 'message'");
  throw JinjaError{to_str(*b[0]), 0, true};
}

// datetime.now().strftime(format): C's strftime on local time, with what Python's datetime
// handles itself: %f (microseconds, 000000 on a clock of whole seconds) and a naive datetime's
// empty %z and %Z.
Value g_strftime_now(Renderer& r, Arguments& a) {
  const auto b = bind_arguments(a, {"format"}, "strftime_now");
  if (!b[0] || !b[0]->is_string()) fail("strftime_now() argument must be str");
  const std::string& format = b[0]->as_string();
  std::string adjusted;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      ++i;
      if (c == 'f')
        adjusted += "000000";
      else if (c == 'z' || c == 'Z') {
      } else
        adjusted += std::string("%") + c;
      continue;
    }
    adjusted.push_back(format[i]);
  }
  const std::time_t now = static_cast<std::time_t>(r.now());
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(adjusted.size() * 4 + 64, '\0');
  if (adjusted.empty()) return Value("");
  const std::size_t n = std::strftime(out.data(), out.size(), adjusted.c_str(), &local);
  if (n == 0) fail("strftime_now(): the formatted time is empty or too long");
  out.resize(n);
  return Value(std::move(out));
}

struct GlobalEntry {
  std::string_view name;
  Builtin fn;
};

constexpr GlobalEntry kGlobals[] = {
    {"range", g_range},
    {"dict", g_dict},
    {"namespace", g_namespace},
    {"cycler", g_cycler},
    {"joiner", g_joiner},
    {"lipsum", g_lipsum},
    {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now},
};

}  // namespace

std::optional<Value> find_global(std::string_view name) {
  // Made once and never changed: every render on every thread may share them.
  static const std::vector<std::pair<std::string_view, Value>> globals = [] {
    std::vector<std::pair<std::string_view, Value>> out;
    for (const GlobalEntry& e : kGlobals)
      out.emplace_back(
          e.name, Value(std::static_pointer_cast<Object>(std::make_shared<Global>(e.name, e.fn))));
    return out;
  }();
  for (const auto& [key, value] : globals)
    if (key == name) return value;
  return std::nullopt;
}

std::vector<std::optional<Value>> bind_arguments(const Arguments& args,
                                                 std::initializer_list<std::string_view> names,
                                                 std::string_view function) {
  std::vector<std::optional<Value>> bound(names.size());
  if (args.positional.size() > names.size())
    fail(std::string(function) + "() takes at most " + std::to_string(names.size()) +
         " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    std::size_t i = 0;
    for (std::string_view name : names) {
      if (name == key) break;
      ++i;
    }
    if (i == names.size())
      fail(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    if (bound[i]) fail(std::string(function) + "() got multiple values for argument '" + key + "'");
    bound[i] = value;
  }
  return bound;
}

}  // namespace genesis::chat::jinja
