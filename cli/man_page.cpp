// Man pages in roff: genesis(1) and genesis-<command>(1), with a command's nested commands
// (ckpt ls) on its page. NAME, SYNOPSIS, DESCRIPTION, COMMANDS and OPTIONS come from the command
// table; the hand-written sections of man/prose/<page>.md (EXAMPLES, EXIT STATUS, ENVIRONMENT,
// ...) follow OPTIONS in their file order, and a prose DESCRIPTION extends the generated one.
// No dates, so the output only changes with its inputs.
#include <sstream>

#include "cli/docs_model.hpp"

namespace genesis::docs {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void write_option(std::ostream& os, const DocOption& option) {
  std::string names;
  for (const auto& n : option.short_names) names += (names.empty() ? "" : ", ") + ("\\fB\\-" + roff_escape(n) + "\\fR");
  for (const auto& n : option.long_names) names += (names.empty() ? "" : ", ") + ("\\fB\\-\\-" + roff_escape(n) + "\\fR");
  if (option.takes_value()) names += " \\fI" + roff_escape(option.value_name) + "\\fR";
  std::string help = roff_escape(option.help);
  if (!option.choices.empty()) {
    std::string list;
    for (const auto& c : option.choices) list += (list.empty() ? "" : ", ") + roff_escape(c);
    help += "; one of: " + list;
  }
  if (!option.default_value.empty()) help += " (default: " + roff_escape(option.default_value) + ")";
  os << ".TP\n" << names << "\n" << help << "\n";
}

void write_argument(std::ostream& os, const DocArgument& argument) {
  os << ".TP\n\\fI" << roff_escape(argument.name) << "\\fR\n" << roff_escape(argument.help) << "\n";
}

// "[OPTIONS] CKPT" after the command's name: required arguments plain, optional ones bracketed.
std::string synopsis_tail(const DocCommand& command) {
  std::string out = "[\\fIOPTIONS\\fR]";
  for (const auto& a : command.arguments) {
    const std::string name = "\\fI" + roff_escape(a.name) + "\\fR";
    out += " " + (a.required ? name : "[" + name + "]");
  }
  return out;
}

void write_synopsis(std::ostream& os, const DocApp& app, const DocCommand* command) {
  os << ".SH SYNOPSIS\n";
  if (command && !command->subcommands.empty()) {
    for (std::size_t i = 0; i < command->subcommands.size(); ++i) {
      const DocCommand& sub = command->subcommands[i];
      os << (i ? ".br\n" : "") << ".B " << app.name << " " << roff_escape(command->name) << " "
         << roff_escape(sub.name) << "\n" << synopsis_tail(sub) << "\n";
    }
  } else if (command)
    os << ".B " << app.name << " " << roff_escape(command->name) << "\n" << synopsis_tail(*command) << "\n";
  else
    os << ".B " << app.name << "\n[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fICOMMAND OPTIONS\\fR]\n";
}

// COMMANDS: on genesis(1) every command's page, on a page with nested commands those.
void write_commands(std::ostream& os, const DocApp& app, const DocCommand* command) {
  if (!command) {
    os << ".SH COMMANDS\n";
    for (const auto& c : app.commands)
      os << ".TP\n.BR " << roff_escape(app.name + "-" + c.name) << " (1)\n" << roff_escape(c.summary) << "\n";
  }

  if (command && !command->subcommands.empty()) {
    os << ".SH COMMANDS\n";
    for (const auto& sub : command->subcommands)
      os << ".TP\n.B " << roff_escape(sub.name) << "\n" << roff_escape(sub.summary) << "\n";
  }
}

// OPTIONS: the command's arguments and options, each nested command's, then the global ones.
void write_options(std::ostream& os, const DocApp& app, const DocCommand* command) {
  os << ".SH OPTIONS\n";
  if (command)
    for (const auto& argument : command->arguments) write_argument(os, argument);
  for (const auto& option : command ? command->options : app.options) write_option(os, option);
  if (command) {
    for (const auto& sub : command->subcommands) {
      os << ".SS " << roff_escape(app.name + " " + command->name + " " + sub.name) << "\n";
      for (const auto& argument : sub.arguments) write_argument(os, argument);
      for (const auto& option : sub.options)
        if (option.primary() != "--help") write_option(os, option);
    }
    os << ".SS Global options\n"
       << "These may also be given before the command name; see \\fB" << app.name << "\\fR(1).\n";
    for (const auto& option : app.options)
      if (option.primary() != "--help") write_option(os, option);
  }
}

// The prose sections but DESCRIPTION, in file order, then SEE ALSO: the other pages, then the
// prose's own SEE ALSO text.
void write_prose_and_see_also(std::ostream& os, const DocApp& app, const DocCommand* command,
                              const std::vector<std::pair<std::string, std::string>>& sections) {
  std::string see_also_prose;
  for (const auto& [title, body] : sections) {
    if (title == "DESCRIPTION") continue;
    if (title == "SEE ALSO") {
      see_also_prose = body;
      continue;
    }
    os << ".SH " << roff_escape(title) << "\n" << body;
  }

  os << ".SH SEE ALSO\n";
  std::string refs;
  if (command) refs = "\\fB" + app.name + "\\fR(1)";
  for (const auto& c : app.commands)
    if (!command || c.name != command->name)
      refs += (refs.empty() ? "" : ", ") + ("\\fB" + roff_escape(app.name + "-" + c.name) + "\\fR(1)");
  os << refs << "\n" << see_also_prose;
}

}  // namespace

std::string render_man_page(const DocApp& app, const DocCommand* command, const std::string& prose) {
  const std::string page = command ? app.name + "-" + command->name : app.name;
  auto sections = markdown_to_roff(prose);
  std::string prose_description;
  for (const auto& [title, body] : sections)
    if (title == "DESCRIPTION") prose_description = body;

  std::ostringstream os;
  os << ".\\\" Generated by genesis_gen_docs from the command table and man/prose/" << page
     << ".md.\n.\\\" Do not edit: refresh with `cmake --build <build-dir> --target update-docs`.\n"
     << ".TH " << roff_escape(upper(page)) << " 1 \"\" \"" << roff_escape(app.name + " " + app.version)
     << "\" \"User Commands\"\n"
     << ".nh\n.ad l\n";  // no hyphenation, ragged right: option and key names stay whole

  os << ".SH NAME\n" << roff_escape(page) << " \\- "
     << roff_escape(command ? command->summary : app.description) << "\n";
  write_synopsis(os, app, command);
  os << ".SH DESCRIPTION\n" << roff_escape(command ? command->summary + "." : app.description + ".")
     << "\n" << prose_description;
  write_commands(os, app, command);
  write_options(os, app, command);
  write_prose_and_see_also(os, app, command, sections);
  return os.str();
}

}  // namespace genesis::docs
