// genesis_gen_docs --out DIR --prose PROSE_DIR: writes DIR/completions/{genesis.bash,_genesis,
// genesis.fish} and DIR/man/genesis.1, DIR/man/genesis-<command>.1 from the same CLI11 App the
// genesis binary parses with. The build runs it into build/generated/docs; the update-docs
// target runs it into the source tree, whose copies a test compares with the build's.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/docs_model.hpp"
#include "commands/cli_app.hpp"
#include "genesis/core/build_info.hpp"

namespace fs = std::filesystem;
using namespace genesis;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Rewrites a file only when its content changes, so an unchanged page keeps its timestamp.
void write_text(const fs::path& path, const std::string& text) {
  if (fs::exists(path) && read_text(path) == text) return;
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App args("Generate genesis's shell completions and man pages from its command table",
                "genesis_gen_docs");
  std::string out_dir, prose_dir;
  args.add_option("--out", out_dir, "Directory to write completions/ and man/ into")->required();
  args.add_option("--prose", prose_dir, "Directory of the hand-written man/prose/<page>.md")->required();
  CLI11_PARSE(args, argc, argv);

  try {
    commands::CliApp cli;
    const docs::DocApp app = docs::describe_app(cli.app(), build_info().version);
    const fs::path out(out_dir);
    write_text(out / "completions" / (app.name + ".bash"), docs::render_bash(app));
    write_text(out / "completions" / ("_" + app.name), docs::render_zsh(app));
    write_text(out / "completions" / (app.name + ".fish"), docs::render_fish(app));

    auto prose_of = [&](const std::string& page) {
      fs::path path = fs::path(prose_dir) / (page + ".md");
      return fs::exists(path) ? read_text(path) : std::string();
    };
    std::vector<std::string> pages{app.name + ".1"};
    write_text(out / "man" / pages.back(), docs::render_man_page(app, nullptr, prose_of(app.name)));
    for (const auto& command : app.commands) {
      const std::string page = app.name + "-" + command.name;
      pages.push_back(page + ".1");
      write_text(out / "man" / pages.back(), docs::render_man_page(app, &command, prose_of(page)));
    }
    // A command that left the table must not leave its page behind.
    for (const auto& entry : fs::directory_iterator(out / "man")) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() == ".1" && name.rfind(app.name, 0) == 0 &&
          std::find(pages.begin(), pages.end(), name) == pages.end())
        fs::remove(entry.path());
    }
  } catch (const std::exception& e) {
    std::cerr << "genesis_gen_docs: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
