#include <filesystem>
#include <fstream>
int main(int argc, char** argv) {
  std::filesystem::path out = argv[2];
  std::filesystem::create_directories(out / "completions");
  std::filesystem::create_directories(out / "man");
  for (auto f : {"completions/genesis.bash", "completions/_genesis", "completions/genesis.fish"}) std::ofstream(out / f) << "";
  return 0;
}
