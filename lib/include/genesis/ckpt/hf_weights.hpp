// A Hugging Face model directory's weights, read and written as transformers' save_pretrained
// lays them out: model.safetensors, or shards model-0000K-of-0000N.safetensors listed by
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map": {name: file}}).
// Reading is memory-mapped and by slice, so a rank reads only the elements it keeps (ZeRO-3's
// shard) and the whole model never exists in one process; every header is checked as the
// safetensors library checks it before any byte of data is used.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::ckpt {

class HfWeights {
 public:
  // Opens DIR's model.safetensors (preferred, as transformers does, when both are there) or its
  // index and every shard the index names (headers only). IoError naming the file on anything
  // malformed: no weights file, a shard missing or not a regular file, a shard name that leaves
  // the directory ("../", absolute), a name in two shards or twice in the index, an index entry
  // its shard lacks, a header the safetensors checks refuse. Shards may be symlinks (the Hub cache).
  explicit HfWeights(const std::filesystem::path& dir);
  ~HfWeights();
  HfWeights(HfWeights&&) noexcept;
  HfWeights& operator=(HfWeights&&) noexcept;

  // Every tensor of every shard, sorted. The accessors below throw IoError for a name not here.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  Shape shape(const std::string& name) const;
  // The stored dtype; NotSupported for a safetensors dtype genesis does not hold (U8, F64, F8_*),
  // which read() refuses the same way.
  DType dtype(const std::string& name) const;
  std::filesystem::path file_of(const std::string& name) const;
  // Elements [offset, offset + numel) of the flattened tensor, converted to `dtype`: a new 1-d
  // host tensor (InvalidArgument when the range is not inside the tensor). Only those bytes are
  // read from the mapping. Safe to call from several threads at once.
  Tensor read(const std::string& name, DType dtype, std::int64_t offset, std::int64_t numel) const;
  // The whole tensor, shaped, converted to `dtype`.
  Tensor read(const std::string& name, DType dtype) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One tensor of a planned export: its name, the dtype written and its shape.
struct HfTensorPlan {
  std::string name;
  DType dtype;
  Shape shape;
};

// Writes a weights directory tensor by tensor in the plan's order, so an exporter can stream a
// sharded model (ZeRO-3 gathers one tensor at a time): shards of at most max_shard_bytes (a
// tensor larger than that gets a shard of its own, as transformers does), one file named
// model.safetensors when everything fits in one, else model-0000K-of-0000N.safetensors and the
// index. Each file is written under a temporary name, fsynced, then renamed; finish() writes the
// index last. metadata {"format": "pt"} in every header (transformers requires it).
class HfWeightsWriter {
 public:
  HfWeightsWriter(std::filesystem::path dir, std::vector<HfTensorPlan> plan,
                  std::uint64_t max_shard_bytes);
  ~HfWeightsWriter();
  // The next tensor of the plan (its name, and its shape, must be the plan's next); converted to
  // the planned dtype.
  void write(const std::string& name, const Tensor& tensor);
  // After the last write: closes the last shard and writes the index when sharded, then removes
  // what a loader would read instead (a model.safetensors beside a new index, an index beside a
  // new single file, shards named model-*-of-*.safetensors that this export did not write). The
  // files written, shards in order then the index. Destroyed without finish(): the files of the
  // unfinished shards are removed. InvalidArgument when the calls do not follow the plan.
  std::vector<std::filesystem::path> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "5GB", "500MB", "2GiB", "1000" (bytes) as transformers' max_shard_size reads them (a final
// lowercase "b", as in "5Gb", means bits). InvalidArgument on anything else, 0, or overflow.
std::uint64_t parse_shard_size(const std::string& text);

// PATH_OR_ID as from_pretrained resolves it without a network: the path when it exists;
// otherwise a Hub id ("Qwen/Qwen3-0.6B", "gpt2") looked up in the local Hugging Face cache as
// huggingface_hub finds it (HF_HUB_CACHE or its old name HUGGINGFACE_HUB_CACHE, else HF_HOME/hub,
// else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub):
// models--Qwen--Qwen3-0.6B/refs/main names the snapshot, or, without refs/main, the one snapshot
// there. ConfigError when neither exists, saying what was looked for and how to fetch it
// (`huggingface-cli download ID`); `key` names the setting ("model.init_from").
std::filesystem::path resolve_pretrained(const std::string& path_or_id, const std::string& key);

}  // namespace genesis::ckpt
