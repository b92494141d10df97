// The interpreter's statements, scopes and macros (expressions are jinja_evaluate.cpp's). Errors
// carry the line of the innermost node that saw them (exec_stmt fills it in on the way out). Macros are Objects holding their
// definition and the scope they were defined in; loop is an Object whose counters the for loop
// advances in place, as jinja2's LoopContext.
#include "chat/jinja_runtime.hpp"

#include <algorithm>

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_text.hpp"

namespace genesis::chat::jinja {

namespace {

// The scope a macro reads is held weakly: that scope holds the macro, and shared ownership both
// ways would never be freed. The Renderer keeps every scope that defines a macro until the
// render ends, so the scope outlives any call.
class Macro final : public Object {
 public:
  Macro(std::shared_ptr<const MacroDef> def, std::weak_ptr<Frame> closure)
      : def_(std::move(def)), closure_(std::move(closure)) {}
  std::string repr() const override { return "<Macro '" + def_->name + "'>"; }
  bool callable() const override { return true; }
  Value call(Renderer& renderer, Arguments& args) const override {
    const FramePtr closure = closure_.lock();
    if (!closure) fail("macro '" + def_->name + "' was called after its render ended");
    return renderer.call_macro(*def_, closure, args);
  }
  Value attribute(std::string_view name) const override {
    if (name == "name") return Value(def_->name);
    return Object::attribute(name);
  }

 private:
  std::shared_ptr<const MacroDef> def_;
  std::weak_ptr<Frame> closure_;
};

class Loop final : public Object {
 public:
  explicit Loop(std::shared_ptr<const std::vector<Value>> items) : items_(std::move(items)) {}
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(size()) + ">";
  }
  bool callable() const override { return true; }
  Value call(Renderer&, Arguments&) const override {
    fail("the loop object is only callable in recursive loops, which genesis does not support");
  }
  Value attribute(std::string_view name) const override {
    const std::int64_t n = size();
    if (name == "index0") return Value(index0_);
    if (name == "index") return Value(index0_ + 1);
    if (name == "revindex0") return Value(n - index0_ - 1);
    if (name == "revindex") return Value(n - index0_);
    if (name == "first") return Value(index0_ == 0);
    if (name == "last") return Value(index0_ == n - 1);
    if (name == "length") return Value(n);
    if (name == "depth") return Value(1);
    if (name == "depth0") return Value(0);
    if (name == "previtem")
      return index0_ > 0 ? (*items_)[static_cast<std::size_t>(index0_ - 1)]
                         : Value::undefined("there is no previous item");
    if (name == "nextitem")
      return index0_ + 1 < n ? (*items_)[static_cast<std::size_t>(index0_ + 1)]
                             : Value::undefined("there is no next item");
    if (name == "cycle" || name == "changed")
      return Value(std::static_pointer_cast<Object>(
          std::make_shared<LoopMethod>(std::const_pointer_cast<Loop>(self()), std::string(name))));
    return Object::attribute(name);
  }
  void set_index(std::int64_t i) { index0_ = i; }
  void set_self(std::weak_ptr<Loop> self) { self_ = std::move(self); }

 private:
  class LoopMethod final : public Object {
   public:
    LoopMethod(std::shared_ptr<Loop> loop, std::string name)
        : loop_(std::move(loop)), name_(std::move(name)) {}
    std::string repr() const override { return "<bound method LoopContext." + name_ + ">"; }
    bool callable() const override { return true; }
    Value call(Renderer&, Arguments& args) const override {
      if (!args.keyword.empty()) fail("loop." + name_ + "() takes no keyword arguments");
      if (name_ == "cycle") {
        if (args.positional.empty()) fail("no items for cycling given");
        return args.positional[static_cast<std::size_t>(loop_->index0_) % args.positional.size()];
      }
      Value current = Value::list(args.positional, ListKind::tuple);
      if (loop_->has_last_ && equal(loop_->last_changed_, current)) return Value(false);
      loop_->last_changed_ = std::move(current);
      loop_->has_last_ = true;
      return Value(true);
    }

   private:
    std::shared_ptr<Loop> loop_;
    std::string name_;
  };

  std::shared_ptr<const Loop> self() const { return self_.lock(); }
  std::int64_t size() const { return static_cast<std::int64_t>(items_->size()); }

  std::shared_ptr<const std::vector<Value>> items_;
  std::int64_t index0_ = 0;
  std::weak_ptr<Loop> self_;
  Value last_changed_;
  bool has_last_ = false;
};

// A namespace inside a namespace could make a cycle that shared ownership never frees.
bool holds_namespace(const Value& v) {
  if (v.is_object()) return v.as_object().is_namespace();
  if (v.is_list())
    for (const Value& item : v.as_list().items)
      if (holds_namespace(item)) return true;
  if (v.is_dict())
    for (const auto& [key, value] : v.as_dict().items())
      if (holds_namespace(value)) return true;
  return false;
}

}  // namespace

const Value* Frame::find(const std::string& name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get())
    if (auto it = f->vars.find(name); it != f->vars.end()) return &it->second;
  return nullptr;
}

std::string Renderer::render(const Body& body, FramePtr globals) {
  exec(body, globals);
  return std::move(root_);
}

void Renderer::charge(std::int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    fail("the template took more than " + std::to_string(limits_.max_steps) +
         " steps (loop iterations and macro calls; ChatTemplateLimits::max_steps)");
}

void Renderer::write(std::string_view text) {
  check_string_size(out_->size() + text.size(), limits_.max_output_bytes);
  out_->append(text);
}

std::string Renderer::capture(const Body& body, const FramePtr& frame) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Renderer::Flow Renderer::exec(const Body& body, const FramePtr& frame) {
  for (const Stmt& s : body) {
    const Flow flow = exec_stmt(s, frame);
    if (flow != Flow::normal) return flow;
  }
  return Flow::normal;
}

namespace {
FramePtr inner_frame(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}
}  // namespace

Renderer::Flow Renderer::exec_stmt(const Stmt& s, const FramePtr& frame) {
  try {
    switch (s.kind) {
      case StmtKind::text: write(s.text); return Flow::normal;
      case StmtKind::output: {
        const Value v = eval(*s.exprs[0], *frame);
        if (v.is_string())
          write(v.as_string());
        else if (!v.is_undefined())
          write(to_str(v));
        return Flow::normal;
      }
      case StmtKind::if_:
        for (std::size_t i = 0; i < s.exprs.size(); ++i)
          if (truthy(eval(*s.exprs[i], *frame))) return exec(s.bodies[i], frame);
        if (s.bodies.size() > s.exprs.size()) return exec(s.bodies.back(), frame);
        return Flow::normal;
      case StmtKind::for_: return exec_for(s, frame);
      case StmtKind::set:
        assign(s.targets[0], eval(*s.exprs[0], *frame), *frame);
        return Flow::normal;
      case StmtKind::set_block: {
        Value text(capture(s.bodies[0], inner_frame(frame)));
        if (s.exprs[0]) {
          placeholders_.push_back(std::move(text));
          text = eval(*s.exprs[0], *frame);
          placeholders_.pop_back();
        }
        assign(s.targets[0], std::move(text), *frame);
        return Flow::normal;
      }
      case StmtKind::macro:
        kept_frames_.push_back(frame);
        frame->vars[s.macro->name] =
            Value(std::static_pointer_cast<Object>(std::make_shared<Macro>(s.macro, frame)));
        return Flow::normal;
      case StmtKind::call_block: {
        kept_frames_.push_back(frame);
        const Value caller(
            std::static_pointer_cast<Object>(std::make_shared<Macro>(s.macro, frame)));
        const Value result = eval_call(*s.exprs[0], *frame, &caller);
        write(to_str(result));
        return Flow::normal;
      }
      case StmtKind::filter_block: {
        placeholders_.emplace_back(capture(s.bodies[0], inner_frame(frame)));
        const Value result = eval(*s.exprs[0], *frame);
        placeholders_.pop_back();
        write(to_str(result));
        return Flow::normal;
      }
      case StmtKind::with: {
        FramePtr scope = inner_frame(frame);
        std::vector<Value> values;
        for (const ExprPtr& e : s.exprs) values.push_back(eval(*e, *frame));
        for (std::size_t i = 0; i < values.size(); ++i)
          assign(s.targets[i], std::move(values[i]), *scope);
        return exec(s.bodies[0], scope);
      }
      case StmtKind::break_: return Flow::break_;
      case StmtKind::continue_: return Flow::continue_;
      case StmtKind::generation: {
        const std::string text = capture(s.bodies[0], inner_frame(frame));
        spans_.emplace_back(root_.size(), root_.size() + text.size());
        write(text);
        return Flow::normal;
      }
    }
  } catch (JinjaError& e) {
    if (e.line == 0) e.line = s.line;
    throw;
  }
  return Flow::normal;
}

Renderer::Flow Renderer::exec_for(const Stmt& s, const FramePtr& frame) {
  const Target& target = s.targets[0];
  std::vector<Value> items = iterate(eval(*s.exprs[0], *frame));
  if (s.exprs[1]) {
    std::vector<Value> kept;
    for (Value& item : items) {
      charge(1);
      Frame probe;
      probe.parent = frame;
      assign(target, item, probe);
      if (truthy(eval(*s.exprs[1], probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  auto loop = std::make_shared<Loop>(shared_items);
  loop->set_self(loop);
  const Value loop_value(std::static_pointer_cast<Object>(loop));
  // jinja2 runs the else body unless some iteration reached the end of the body: an empty loop,
  // or one whose every iteration ended in continue, or whose first ended in break.
  bool completed = false;
  for (std::size_t i = 0; i < shared_items->size(); ++i) {
    charge(1);
    loop->set_index(static_cast<std::int64_t>(i));
    FramePtr scope = inner_frame(frame);
    assign(target, (*shared_items)[i], *scope);
    scope->vars["loop"] = loop_value;
    const Flow flow = exec(s.bodies[0], scope);
    if (flow == Flow::break_) break;
    if (flow == Flow::normal) completed = true;
  }
  if (!completed && !s.bodies[1].empty()) return exec(s.bodies[1], inner_frame(frame));
  return Flow::normal;
}

void Renderer::assign(const Target& target, Value value, Frame& frame) {
  switch (target.kind) {
    case Target::Kind::name: frame.vars[target.name] = std::move(value); return;
    case Target::Kind::tuple: {
      std::vector<Value> items = iterate(value);
      const std::size_t n = target.items.size();
      if (items.size() > n) fail("too many values to unpack (expected " + std::to_string(n) + ")");
      if (items.size() < n)
        fail("not enough values to unpack (expected " + std::to_string(n) + ", got " +
             std::to_string(items.size()) + ")");
      for (std::size_t i = 0; i < n; ++i) assign(target.items[i], std::move(items[i]), frame);
      return;
    }
    case Target::Kind::attribute: {
      const Value* ns = frame.find(target.name);
      if (ns == nullptr || !ns->is_object() || !ns->as_object().is_namespace())
        fail("cannot assign attribute on non-namespace object '" + target.name + "'");
      if (holds_namespace(value)) fail("genesis does not store a namespace inside a namespace");
      ns->as_object().set_attribute(target.attribute, std::move(value));
      return;
    }
  }
}

Value Renderer::lookup(const std::string& name, const Frame& frame) const {
  if (const Value* v = frame.find(name)) return *v;
  if (auto global = find_global(name)) return *global;
  return Value::undefined("'" + name + "' is undefined");
}

Value Renderer::call_macro(const MacroDef& macro, const FramePtr& closure, Arguments& args) {
  charge(1);
  if (call_depth_ >= limits_.max_call_depth)
    fail("macro calls nested deeper than " + std::to_string(limits_.max_call_depth) +
         " (ChatTemplateLimits::max_call_depth)");
  FramePtr scope = inner_frame(closure);
  const std::size_t count = macro.params.size();
  std::vector<bool> given(count, false);
  for (std::size_t i = 0; i < count && i < args.positional.size(); ++i) {
    scope->vars[macro.params[i]] = args.positional[i];
    given[i] = true;
  }
  auto& kwargs = args.keyword;
  auto take = [&](const std::string& name) -> std::optional<Value> {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == name) {
        Value v = std::move(it->second);
        kwargs.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  // jinja2's Macro.__call__: keywords fill the parameters positional arguments left open; a
  // parameter named caller takes the call block's caller.
  bool found_caller = false;
  if (args.positional.size() < count) {
    for (std::size_t i = args.positional.size(); i < count; ++i) {
      if (auto v = take(macro.params[i])) {
        scope->vars[macro.params[i]] = std::move(*v);
        given[i] = true;
      }
      if (macro.params[i] == "caller") found_caller = true;
    }
  } else {
    found_caller =
        std::find(macro.params.begin(), macro.params.end(), "caller") != macro.params.end();
  }
  if (macro.uses_caller && !found_caller) {
    auto caller = take("caller");
    scope->vars["caller"] = caller ? std::move(*caller) : Value::undefined("No caller defined");
  }
  if (macro.uses_kwargs) {
    Dict extra;
    for (auto& [key, value] : kwargs) extra.set(Value(key), std::move(value));
    scope->vars["kwargs"] = Value::dict(std::move(extra));
  } else if (!kwargs.empty()) {
    if (kwargs.front().first == "caller")
      fail("macro '" + macro.name +
           "' was invoked with two values for the special caller argument");
    fail("macro '" + macro.name + "' takes no keyword argument '" + kwargs.front().first + "'");
  }
  if (macro.uses_varargs) {
    std::vector<Value> rest;
    for (std::size_t i = count; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->vars["varargs"] = Value::list(std::move(rest), ListKind::tuple);
  } else if (args.positional.size() > count) {
    fail("macro '" + macro.name + "' takes not more than " + std::to_string(count) +
         " argument(s)");
  }
  // Defaults are evaluated in the macro's scope, so they can read the parameters before them.
  const std::size_t first_default = count - macro.defaults.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (given[i]) continue;
    scope->vars[macro.params[i]] =
        i >= first_default
            ? eval(*macro.defaults[i - first_default], *scope)
            : Value::undefined("parameter '" + macro.params[i] + "' was not provided");
  }
  ++call_depth_;
  std::string text;
  try {
    text = capture(macro.body, scope);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value(std::move(text));
}

Value Renderer::call(const Value& callee, Arguments& args) {
  if (callee.is_undefined()) callee.fail_undefined();
  if (!callee.is_object() || !callee.as_object().callable())
    fail("'" + type_name(callee) + "' object is not callable");
  return callee.as_object().call(*this, args);
}

bool Renderer::run_test(std::string_view name, const Value& value, Arguments& args) {
  const TestFn test = find_test(name);
  if (test == nullptr) fail("no test named '" + std::string(name) + "'");
  return test(*this, value, args);
}

Value Renderer::run_filter(std::string_view name, const Value& value, Arguments& args) {
  const FilterFn filter = find_filter(name);
  if (filter == nullptr) fail("no filter named '" + std::string(name) + "'");
  return filter(*this, value, args);
}

}  // namespace genesis::chat::jinja
