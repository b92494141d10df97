// Walks the CLI11 App into the DocApp snapshot. CLI11 keeps an option's value name and its
// IsMember choices in one string ("LEVEL:{trace,debug,...}"); this is the one place that knows.
#include "cli/docs_model.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

namespace genesis::docs {
namespace {

std::vector<std::string> split_choices(const std::string& braced) {
  std::vector<std::string> choices;
  if (braced.size() < 2 || braced.front() != '{' || braced.back() != '}') return choices;
  std::string inner = braced.substr(1, braced.size() - 2);
  std::size_t start = 0;
  while (start <= inner.size()) {
    std::size_t comma = inner.find(',', start);
    if (comma == std::string::npos) comma = inner.size();
    if (comma > start) choices.push_back(inner.substr(start, comma - start));
    start = comma + 1;
  }
  return choices;
}

DocOption describe_option(const CLI::Option& option) {
  DocOption doc;
  doc.long_names = option.get_lnames();
  doc.short_names = option.get_snames();
  doc.help = option.get_description();
  if (option.get_type_size() != 0) {
    const std::string type = option.get_type_name();
    const auto colon = type.find(':');
    doc.value_name = type.substr(0, colon);
    if (colon != std::string::npos) doc.choices = split_choices(type.substr(colon + 1));
    doc.default_value = option.get_default_str();
    doc.repeatable = option.get_expected_max() > 1;
  }
  return doc;
}

std::vector<DocOption> describe_options(const CLI::App& app) {
  std::vector<DocOption> options;
  for (const CLI::Option* option : app.get_options())
    if (option->nonpositional()) options.push_back(describe_option(*option));
  std::sort(options.begin(), options.end(),
            [](const DocOption& a, const DocOption& b) { return a.primary() < b.primary(); });
  return options;
}

std::vector<DocArgument> describe_arguments(const CLI::App& app) {
  std::vector<DocArgument> arguments;
  for (const CLI::Option* option : app.get_options())
    if (!option->nonpositional())
      arguments.push_back({option->get_name(), option->get_type_name(), option->get_description(),
                           option->get_required()});
  return arguments;
}

DocCommand describe_command(const CLI::App& app) {
  DocCommand doc{app.get_name(), app.get_description(), describe_options(app),
                 describe_arguments(app), {}};
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    doc.subcommands.push_back(describe_command(*sub));
  return doc;
}

ValueKind kind_of_value_name(const std::string& value_name) {
  if (value_name == "FILE") return ValueKind::file;
  if (value_name == "DIR") return ValueKind::directory;
  if (value_name == "PRESET") return ValueKind::preset;
  return ValueKind::other;
}

}  // namespace

std::string DocOption::primary() const {
  return long_names.empty() ? "-" + short_names.front() : "--" + long_names.front();
}

DocApp describe_app(const CLI::App& app, const std::string& version) {
  DocApp doc;
  doc.name = app.get_name();
  doc.description = app.get_description();
  doc.version = version;
  doc.options = describe_options(app);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    doc.commands.push_back(describe_command(*sub));
  std::sort(doc.commands.begin(), doc.commands.end(),
            [](const DocCommand& a, const DocCommand& b) { return a.name < b.name; });
  return doc;
}

std::vector<DocOption> options_with_globals(const DocCommand& command, const DocApp& app) {
  std::vector<DocOption> options = command.options;
  for (const auto& global : app.options) {
    bool shadowed = false;
    for (const auto& own : command.options) shadowed = shadowed || own.primary() == global.primary();
    if (!shadowed) options.push_back(global);
  }
  std::sort(options.begin(), options.end(),
            [](const DocOption& a, const DocOption& b) { return a.primary() < b.primary(); });
  return options;
}

ValueKind value_kind(const DocOption& option) {
  if (!option.takes_value()) return ValueKind::none;
  if (!option.choices.empty()) return ValueKind::choice;
  return kind_of_value_name(option.value_name);
}

ValueKind value_kind(const DocArgument& argument) { return kind_of_value_name(argument.value_name); }

}  // namespace genesis::docs
