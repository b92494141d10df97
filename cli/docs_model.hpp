// What genesis_gen_docs knows about the command line: a plain snapshot of the CLI11 App (global
// options, subcommands, their options with help, value names and choices), taken by walking
// the same App that cli/main.cpp parses with. The renderers (completion_*.cpp, man_page.cpp)
// read only this snapshot, never CLI11, and must produce byte-identical output on every run.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace genesis::docs {

struct DocOption {
  std::vector<std::string> long_names;   // without the leading "--"
  std::vector<std::string> short_names;  // without the leading "-"
  std::string value_name;                // "" for a flag; FILE, DIR, PRESET, LEVEL, ...
  std::vector<std::string> choices;      // from an IsMember check; empty when free-form
  std::string default_value;             // "" when none is shown
  std::string help;
  bool repeatable = false;

  bool takes_value() const { return !value_name.empty(); }
  std::string primary() const;  // "--preset" (or "-x" when there is no long name)
};

// A positional argument (CKPT, RUN_DIR), completed by its value name as an option's value is.
struct DocArgument {
  std::string name;
  std::string value_name;
  std::string help;
  bool required = false;
};

struct DocCommand {
  std::string name;  // "train"; a nested one's own word ("ls" of `genesis ckpt ls`)
  std::string summary;
  std::vector<DocOption> options;       // sorted by primary name
  std::vector<DocArgument> arguments;   // in command-line order
  std::vector<DocCommand> subcommands;  // nested commands, in the order the command added them
};

struct DocApp {
  std::string name;  // "genesis"
  std::string description;
  std::string version;
  std::vector<DocOption> options;     // global options, sorted
  std::vector<DocCommand> commands;   // sorted by name
};

DocApp describe_app(const CLI::App& app, const std::string& version);
// A command's options and the global ones that fall through to it, each name once, sorted.
std::vector<DocOption> options_with_globals(const DocCommand& command, const DocApp& app);

// Value names with a completion meaning: files, directories, presets from the binary itself.
enum class ValueKind { none, file, directory, preset, choice, other };
ValueKind value_kind(const DocOption& option);
ValueKind value_kind(const DocArgument& argument);

std::string render_bash(const DocApp& app);
std::string render_zsh(const DocApp& app);
std::string render_fish(const DocApp& app);
// `command` null: the top-level page genesis.1. `prose` is the markdown of man/prose/<page>.md
// ("" when there is none).
std::string render_man_page(const DocApp& app, const DocCommand* command, const std::string& prose);

// Markdown subset used by man/prose/*.md, as roff: "## SECTION" headings, paragraphs,
// "- " bullets, "term" + ": definition" pairs, indented or ``` code blocks, `code`, *em*, **strong**.
// Returns (upper-case title, roff body) per section, in file order.
std::vector<std::pair<std::string, std::string>> markdown_to_roff(const std::string& markdown);
// Escapes text for roff: backslashes, leading dots/quotes, hyphens in option-like words.
std::string roff_escape(const std::string& text);

}  // namespace genesis::docs
