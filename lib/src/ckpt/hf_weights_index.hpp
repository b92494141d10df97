// The names of a Hugging Face weights directory (model.safetensors, model-0000K-of-0000N.safetensors,
// model.safetensors.index.json) and the index's parser. The parser is a pure function of the
// file's text so the fuzzer reaches it; opening the shards it names is HfWeights' job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace genesis::ckpt::detail {

inline constexpr const char* kHfSingleFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";
// An index is a few MB even for the largest models; the bound keeps a hostile one from
// exhausting memory.
inline constexpr std::uintmax_t kMaxHfIndexBytes = 64u << 20;

// model-0000K-of-0000N.safetensors, K counted from 1, as transformers names shards.
std::string hf_shard_name(std::size_t k, std::size_t n);
// Whether `name` has that form (for clearing a previous export's shards).
bool is_hf_shard_name(const std::string& name);

struct HfIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file, relative to the dir
  std::vector<std::string> shards;                // the distinct shard files, sorted
};

// Parses model.safetensors.index.json's text: {"metadata": {...}, "weight_map": {name: file}}.
// IoError naming `path` when it is not that, when a key repeats, or when a shard file is not a
// plain relative path inside the directory (absolute, empty, a ".." component, control bytes).
HfIndex parse_hf_index(std::string_view text, const std::filesystem::path& path);

}  // namespace genesis::ckpt::detail
