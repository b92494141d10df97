// The zsh completion function (#compdef genesis): _arguments specs built from the same snapshot
// as the bash script, with help text as descriptions, choices inline, _files for FILE/DIR (and
// path arguments), preset names asked of the binary being completed, and one function per
// nested command (_genesis_ckpt_ls).
#include <cctype>
#include <sstream>

#include "cli/docs_model.hpp"

namespace genesis::docs {
namespace {

// Text inside a single-quoted _arguments spec: quotes closed and reopened, brackets escaped
// because they delimit the description (a colon inside the brackets is plain text).
std::string zsh_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else if (c == '[' || c == ']' || c == '\\') out += std::string("\\") + c;
    else out += c;
  }
  return out;
}

// An entry of a _describe array, "name:description": a colon in the description is escaped.
std::string describe_entry(const std::string& name, const std::string& description) {
  std::string out = zsh_escape(name) + ":";
  for (char c : zsh_escape(description)) out += c == ':' ? std::string("\\:") : std::string(1, c);
  return out;
}

std::string action_of(const DocOption& option) {
  std::string name = option.value_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  switch (value_kind(option)) {
    case ValueKind::none: return "";
    case ValueKind::choice: {
      std::string words;
      for (const auto& c : option.choices) words += (words.empty() ? "" : " ") + c;
      return ":" + name + ":(" + words + ")";
    }
    case ValueKind::file: return ":" + name + ":_files";
    case ValueKind::directory: return ":" + name + ":_files -/";
    case ValueKind::preset: return ":" + name + ":_genesis_presets";
    default: return ":" + zsh_escape(name) + ": ";
  }
}

std::string spec_of(const DocOption& option) {
  std::vector<std::string> names;
  for (const auto& n : option.long_names) names.push_back("--" + n);
  for (const auto& n : option.short_names) names.push_back("-" + n);
  const std::string tail = "[" + zsh_escape(option.help) + "]" + action_of(option) + "'";
  if (names.size() == 1) return "'" + std::string(option.repeatable ? "*" : "") + names[0] + tail;
  std::string group, exclusive;
  for (const auto& n : names) {
    group += (group.empty() ? "" : ",") + n;
    exclusive += (exclusive.empty() ? "" : " ") + n;
  }
  return (option.repeatable ? "'*'" : "'(" + exclusive + ")'") + "{" + group + "}'" + tail;
}

// The arguments of an _arguments call, one per line, continued with backslashes.
void write_specs(std::ostream& os, const std::vector<std::string>& specs) {
  for (std::size_t i = 0; i < specs.size(); ++i)
    os << "    " << specs[i] << (i + 1 < specs.size() ? " \\\n" : "\n");
}

// Positional specs for path arguments: "N:name:action" ("N::..." when optional). Others (launch's
// program after --) get none, which leaves zsh's default completion for them.
std::vector<std::string> argument_specs(const DocCommand& command) {
  std::vector<std::string> specs;
  for (std::size_t i = 0; i < command.arguments.size(); ++i) {
    const DocArgument& a = command.arguments[i];
    std::string name = a.name;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string action;
    if (value_kind(a) == ValueKind::directory) action = "_files -/";
    if (value_kind(a) == ValueKind::file) action = "_files";
    if (action.empty()) continue;
    specs.push_back("'" + std::to_string(i + 1) + (a.required ? ":" : "::") + zsh_escape(name) +
                    ":" + action + "'");
  }
  return specs;
}

// _genesis_<path>: the options and arguments of one command; a command with nested commands
// offers them first, then hands the rest of the line to the chosen one's function.
void write_command_function(std::ostream& os, const DocCommand& command, const DocApp& app,
                            const std::string& path) {
  for (const auto& sub : command.subcommands) write_command_function(os, sub, app, path + "_" + sub.name);
  os << "_genesis_" << path << "() {\n";
  std::vector<std::string> specs;
  for (const auto& option : options_with_globals(command, app)) specs.push_back(spec_of(option));
  if (command.subcommands.empty()) {
    for (const auto& spec : argument_specs(command)) specs.push_back(spec);
    os << "  _arguments -s \\\n";
    write_specs(os, specs);
    os << "}\n\n";
    return;
  }
  specs.push_back("'1: :->command'");
  specs.push_back("'*:: :->args'");
  os << "  local curcontext=$curcontext state line\n" << "  _arguments -C -s \\\n";
  write_specs(os, specs);
  os << "  case $state in\n"
     << "    command)\n"
     << "      local -a commands\n"
     << "      commands=(\n";
  for (const auto& sub : command.subcommands) os << "        '" << describe_entry(sub.name, sub.summary) << "'\n";
  os << "      )\n"
     << "      _describe -t commands '" << command.name << " command' commands ;;\n"
     << "    args)\n"
     << "      case $line[1] in\n";
  for (const auto& sub : command.subcommands)
    os << "        " << sub.name << ") _genesis_" << path << "_" << sub.name << " ;;\n";
  os << "      esac ;;\n"
     << "  esac\n"
     << "}\n\n";
}

}  // namespace

std::string render_zsh(const DocApp& app) {
  std::ostringstream os;
  os << "#compdef " << app.name << "\n"
     << "# zsh completion for " << app.name << ", generated by genesis_gen_docs from the command table.\n"
     << "# Do not edit: refresh with `cmake --build <build-dir> --target update-docs`.\n\n"
     << "_genesis_presets() {\n"
     << "  local -a presets\n"
     << "  presets=(${(f)\"$(_call_program presets ${_genesis_program:-genesis} train --list-presets 2>/dev/null)\"})\n"
     << "  _describe -t presets 'preset' presets\n"
     << "}\n\n";
  for (const auto& c : app.commands) write_command_function(os, c, app, c.name);
  os << "_genesis() {\n"
     << "  local _genesis_program=$words[1] state line\n"
     << "  _arguments -C -s \\\n";
  std::vector<std::string> specs;
  for (const auto& option : app.options) specs.push_back(spec_of(option));
  specs.push_back("'1: :->command'");
  specs.push_back("'*:: :->args'");
  write_specs(os, specs);
  os << "  case $state in\n"
     << "    command)\n"
     << "      local -a commands\n"
     << "      commands=(\n";
  for (const auto& c : app.commands) os << "        '" << describe_entry(c.name, c.summary) << "'\n";
  os << "      )\n"
     << "      _describe -t commands 'command' commands ;;\n"
     << "    args)\n"
     << "      case $line[1] in\n";
  for (const auto& c : app.commands) os << "        " << c.name << ") _genesis_" << c.name << " ;;\n";
  os << "      esac ;;\n"
     << "  esac\n"
     << "}\n\n"
     << "_genesis \"$@\"\n";
  return os.str();
}

}  // namespace genesis::docs
