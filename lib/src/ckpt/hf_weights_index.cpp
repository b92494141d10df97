// model.safetensors.index.json: its weight_map read with duplicate keys refused and every shard
// name confined to the model directory. Names are checked as written, not resolved: a Hub cache
// snapshot's shards are symlinks into ../../blobs, which is where they are meant to point.
#include "hf_weights_index.hpp"

#include <cstdio>
#include <set>

#include "checked_json.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt::detail {
namespace {

bool confined_name(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return false;
  for (const auto& part : std::filesystem::path(name))
    if (part == "..") return false;
  return true;
}

}  // namespace

std::string hf_shard_name(std::size_t k, std::size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k, n);
  return name;
}

bool is_hf_shard_name(const std::string& name) {
  // model-DDDDD-of-DDDDD.safetensors
  const std::string shape = "model-#####-of-#####.safetensors";
  if (name.size() != shape.size()) return false;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == '#' ? !(name[i] >= '0' && name[i] <= '9') : name[i] != shape[i]) return false;
  return true;
}

HfIndex parse_hf_index(std::string_view text, const std::filesystem::path& path) {
  const std::string where = "weights index '" + path.string() + "': ";
  CheckedJson parsed = parse_checked_json(text, 16);
  GENESIS_CHECK(parsed.error.empty(), IoError, where + "not valid JSON: " + parsed.error);
  const nlohmann::json& json = parsed.value;
  GENESIS_CHECK(json.is_object(), IoError, where + "not a JSON object");
  const auto map = json.find("weight_map");
  GENESIS_CHECK(map != json.end() && map->is_object(), IoError,
                where + "no \"weight_map\" object (tensor name -> shard file)");
  GENESIS_CHECK(!map->empty(), IoError, where + "\"weight_map\" lists no tensors");
  HfIndex index;
  std::set<std::string> shards;
  for (const auto& [name, file] : map->items()) {
    GENESIS_CHECK(file.is_string(), IoError,
                  where + "tensor '" + excerpt(name) + "': the shard file is not a string");
    const std::string shard = file.get<std::string>();
    GENESIS_CHECK(confined_name(shard), IoError,
                  where + "tensor '" + excerpt(name) + "': shard file '" + excerpt(shard) +
                      "' is not a relative path inside the model directory");
    index.weight_map.emplace(name, shard);
    shards.insert(shard);
  }
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

}  // namespace genesis::ckpt::detail
