// The names a template can use without defining them: jinja2's filters and tests (those genesis
// implements; the rest are named so that an error can say "unsupported" rather than "unknown"),
// the methods of str, dict and list that the sandbox allows, and the global functions
// transformers' environment has (range, dict, namespace, cycler, joiner, raise_exception,
// strftime_now).
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.hpp"

namespace genesis::chat::jinja {

FilterFn find_filter(std::string_view name);  // nullptr when genesis has none by that name
TestFn find_test(std::string_view name);
// Whether jinja2 itself has a filter or test by this name (implemented here or not).
bool is_jinja2_filter(std::string_view name);
bool is_jinja2_test(std::string_view name);

// obj.name where obj is a str, dict or list: a bound method (or the sandbox's refusal of a
// mutating one), or nullopt when the type has no such method.
std::optional<Value> find_method(const Value& obj, std::string_view name);

// Python's `format % args` (printf-style: %s %r %d %i %f %e %g %x %o %c, flags, width,
// precision, %(key)s with a dict); args is a tuple of values, a dict, or one value.
Value percent_format(const std::string& format, const Value& args, Renderer& renderer);

// The global that `name` refers to when neither the template nor its variables define it.
std::optional<Value> find_global(std::string_view name);

// Python-style binding of call arguments to parameter names: each result is the argument given
// by position or keyword, or nullopt. Fails like Python on too many or unknown arguments.
std::vector<std::optional<Value>> bind_arguments(const Arguments& args,
                                                 std::initializer_list<std::string_view> names,
                                                 std::string_view function);

}  // namespace genesis::chat::jinja
