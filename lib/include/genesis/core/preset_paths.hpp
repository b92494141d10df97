// Files that ship beside the presets (sample data, a preset's model directory), named in a
// config relative to the working directory or else to the presets' directory, so a preset's
// `data.source = "jsonl:chat-sample.jsonl"` or `model.config = "chat-llama"` works anywhere.
#pragma once

#include <filesystem>

namespace genesis {

// `path` itself when it is absolute or exists, else the first preset directory's `path` that
// exists, else `path` (for the caller's error to name).
std::filesystem::path find_beside_presets(const std::filesystem::path& path);

}  // namespace genesis
