// Writing a checkpoint directory from one process (no process group): the pieces of every rank
// at once, committed like save_checkpoint (temporary sibling, fsync, rename). `genesis ckpt
// reshard` is built on it: the same logical tensors laid out for a different world size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/manifest.hpp"
#include "genesis/ckpt/state_piece.hpp"

namespace genesis::ckpt {

// Writes `out` (which must not exist: InvalidArgument) with rank r's pieces in
// rank-<r>.safetensors. `header` gives step, strategy, created, config, info and ranks
// (world_size = rank_pieces.size() = header.ranks.size()); its files and tensors are filled in
// here. Built in <parent>/.tmp-<name>/ and renamed only when complete; returns the manifest.
Manifest write_checkpoint_directory(const std::filesystem::path& out, Manifest header,
                                    const std::vector<std::vector<ckpt::StatePiece>>& rank_pieces);

struct ReshardOptions {
  std::filesystem::path out;
  int world_size = 1;
  std::string strategy;  // "": the checkpoint's own
  // Maps the saved per-rank trainer states to world_size ranks (train::reshard_rank_states:
  // the trainer's state is the train layer's business, and ckpt/ sits below it).
  std::function<std::vector<nlohmann::json>(const std::vector<nlohmann::json>&, int)> reshard_ranks;
};

struct ReshardResult {
  Manifest manifest;
  std::int64_t global_batch = 0;  // 0 when the checkpoint saved no config to check it against
  std::int64_t per_device_train_batch_size = 0, gradient_accumulation_steps = 0;  // for the new world
};

// The same logical tensors, whole, spread over world_size rank files so each holds about the
// same bytes. The global batch (per_device_train_batch_size x old world x
// gradient_accumulation_steps of the saved config) must divide by world_size (InvalidArgument
// naming both); the saved config is rewritten to keep it, with per-device batch no larger than
// before and the gradient accumulation making up the rest.
ReshardResult reshard_checkpoint(const Checkpoint& checkpoint, const ReshardOptions& options);

}  // namespace genesis::ckpt
