// manifest.json in and out. Reading checks every structural promise the loader relies on (shards
// cover each tensor exactly once, file names stay inside the checkpoint directory), so a damaged
// or hand-edited manifest is one clear error instead of an out-of-bounds read later.
#include "genesis/ckpt/manifest.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include "durable_file.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt {
namespace {

using nlohmann::json;

constexpr const char* kFormatName = "genesis-checkpoint";

// Looks up a required key of the expected JSON type, or throws naming the manifest and the key.
const json& field(const json& object, const char* key, json::value_t type, const std::string& where) {
  GENESIS_CHECK(object.is_object() && object.contains(key), IoError,
                where + ": missing \"" + key + "\"");
  const json& value = object.at(key);
  const bool ok = value.type() == type ||
                  (type == json::value_t::number_integer && value.is_number_unsigned());
  GENESIS_CHECK(ok, IoError, where + ": \"" + key + "\" has the wrong type");
  return value;
}

std::int64_t integer(const json& object, const char* key, const std::string& where) {
  return field(object, key, json::value_t::number_integer, where).get<std::int64_t>();
}

std::string text(const json& object, const char* key, const std::string& where) {
  return field(object, key, json::value_t::string, where).get<std::string>();
}

bool plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

}  // namespace

std::int64_t Manifest::total_bytes() const {
  std::int64_t total = 0;
  for (const FileEntry& f : files) total += f.bytes;
  return total;
}

nlohmann::json manifest_to_json(const Manifest& m) {
  json files = json::array();
  for (const FileEntry& f : m.files) files.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}});
  json tensors = json::object();
  for (const auto& [name, t] : m.tensors) {
    json shards = json::array();
    for (const ShardRef& s : t.shards)
      shards.push_back({{"file", s.file}, {"key", s.key}, {"offset", s.offset}, {"numel", s.numel},
                        {"xxh64", s.xxh64}});
    tensors[name] = {{"shape", t.shape}, {"dtype", t.dtype}, {"shards", shards}};
  }
  return {{"format", kFormatName}, {"version", kFormatVersion}, {"step", m.step},
          {"world_size", m.world_size}, {"strategy", m.strategy}, {"created", m.created},
          {"info", m.info}, {"config", m.config_toml}, {"files", files},
          {"ranks", m.ranks}, {"tensors", tensors}};
}

Manifest manifest_from_json(const nlohmann::json& j, const std::string& source) {
  GENESIS_CHECK(j.is_object(), IoError, source + ": not a JSON object");
  GENESIS_CHECK(j.value("format", "") == kFormatName, IoError,
                source + ": not a genesis checkpoint manifest (no \"format\": \"" + kFormatName + "\")");
  const std::int64_t version = integer(j, "version", source);
  GENESIS_CHECK(version == kFormatVersion, IoError,
                source + ": checkpoint format version " + std::to_string(version) +
                    ", this genesis reads version " + std::to_string(kFormatVersion));
  Manifest m;
  m.step = integer(j, "step", source);
  m.world_size = static_cast<int>(integer(j, "world_size", source));
  GENESIS_CHECK(m.step >= 0 && m.world_size >= 1, IoError, source + ": bad step or world_size");
  m.strategy = text(j, "strategy", source);
  m.created = text(j, "created", source);
  m.config_toml = text(j, "config", source);
  m.info = field(j, "info", json::value_t::object, source);
  for (const json& r : field(j, "ranks", json::value_t::array, source)) m.ranks.push_back(r);
  GENESIS_CHECK(static_cast<int>(m.ranks.size()) == m.world_size, IoError,
                source + ": " + std::to_string(m.ranks.size()) + " rank states for world_size " +
                    std::to_string(m.world_size));

  std::set<std::string> file_names;
  for (const json& f : field(j, "files", json::value_t::array, source)) {
    FileEntry e{text(f, "name", source), static_cast<int>(integer(f, "rank", source)),
                integer(f, "bytes", source)};
    GENESIS_CHECK(plain_file_name(e.name), IoError, source + ": bad file name \"" + e.name + "\"");
    GENESIS_CHECK(file_names.insert(e.name).second, IoError, source + ": file \"" + e.name + "\" listed twice");
    m.files.push_back(e);
  }
  for (const auto& [name, t] : field(j, "tensors", json::value_t::object, source).items()) {
    const std::string where = source + ": tensor \"" + name + "\"";
    TensorEntry e;
    for (const json& d : field(t, "shape", json::value_t::array, where)) {
      GENESIS_CHECK(d.is_number_integer() && d.get<std::int64_t>() >= 0, IoError, where + ": bad shape");
      e.shape.push_back(d.get<std::int64_t>());
    }
    e.dtype = text(t, "dtype", where);
    std::int64_t covered = 0;
    for (const json& s : field(t, "shards", json::value_t::array, where)) {
      ShardRef r{text(s, "file", where), text(s, "key", where), integer(s, "offset", where),
                 integer(s, "numel", where), text(s, "xxh64", where)};
      GENESIS_CHECK(file_names.count(r.file) == 1, IoError,
                    where + ": shard in unlisted file \"" + r.file + "\"");
      GENESIS_CHECK(r.offset == covered && r.numel >= 0, IoError,
                    where + ": shards do not cover the tensor exactly once");
      covered += r.numel;
      e.shards.push_back(std::move(r));
    }
    GENESIS_CHECK(covered == shape_numel(e.shape), IoError,
                  where + ": shards hold " + std::to_string(covered) + " of " +
                      std::to_string(shape_numel(e.shape)) + " elements");
    m.tensors.emplace(name, std::move(e));
  }
  return m;
}

Manifest read_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kManifestName;
  std::ifstream in(path);
  GENESIS_CHECK(in.good(), IoError,
                "'" + dir.string() + "' is not a checkpoint: no readable " + kManifestName);
  std::stringstream buffer;
  buffer << in.rdbuf();
  json j = json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  GENESIS_CHECK(!j.is_discarded(), IoError,
                "'" + path.string() + "' is not valid JSON (truncated or damaged checkpoint manifest)");
  return manifest_from_json(j, "'" + path.string() + "'");
}

void write_manifest(const std::filesystem::path& dir, const Manifest& manifest) {
  detail::write_file_synced(dir / kManifestName, manifest_to_json(manifest).dump(1) + "\n");
}

}  // namespace genesis::ckpt
