// The trainer's side of checkpoints: which checkpoint a run resumes from (the `latest` of its run
// directory under "auto", falling back to an older one when it is damaged), loading it into the
// strategy and this rank's RankState, and saving one. The format itself is ckpt/'s.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/node_local.hpp"
#include "genesis/core/config.hpp"
#include "genesis/nn/module.hpp"
#include "genesis/parallel/strategy.hpp"
#include "genesis/train/train_state.hpp"
#include "init_weights.hpp"
#include "job.hpp"

namespace genesis::train {

// Collective. The checkpoint to resume from, or nullopt to start fresh: training.
// resume_from_checkpoint "" (fresh), "auto" (the latest complete and undamaged checkpoint of the
// run, if any) or a path (which must verify). After a `genesis launch --max-restarts` restart the
// run's own newest loadable checkpoint wins over both, so a restart continues where the failed
// attempt got to; the explicit path is used only when the run saved nothing yet. A run whose
// checkpoints are all damaged is refused (IoError naming each and why) rather than restarted
// from step 0, unless a new command line (not a restart) says --overwrite, which deletes them.
// Rank 0 verifies every checksum and decides; every rank gets the answer or the same error.
std::optional<std::filesystem::path> choose_resume_checkpoint(const TrainingConfig& training,
                                                              const std::filesystem::path& run_dir,
                                                              const Job& job);

// How a resume carries the run onto this job's world size. A checkpoint saved by another number
// of ranks is resharded (as `genesis ckpt reshard`) into a temporary copy under the run's
// checkpoints directory, named like an interrupted save (.tmp-step-<N>.world-<M>) so that a crash
// leaves nothing the next save does not remove; the original is only read.
struct ResumePlan {
  std::filesystem::path load_dir;  // the chosen checkpoint, or its resharded copy
  bool resharded = false;          // load_dir is a copy: remove_resharded_copy deletes it
  // For this run: the checkpoint's global batch, kept when the world size changed now or at an
  // earlier resume (otherwise the config's value; an unchanged run may change its batch).
  std::int64_t gradient_accumulation_steps = 0;
  nlohmann::json world_size_changes = nlohmann::json::array();  // [{step, from, to}], oldest first
  std::string notice;  // "world 4 -> 2: gradient_accumulation_steps 1 -> 2 keeps ..." or ""
};

// Collective; rank 0 decides and reshards, every rank gets the plan or the same error. A global
// batch this world cannot keep with the configured per_device_train_batch_size is a ConfigError
// naming the settings (or world sizes) that would keep it.
ResumePlan plan_resume(const std::filesystem::path& dir, const TrainingConfig& training,
                       const std::filesystem::path& run_dir, const Job& job);

// Collective: once every rank has loaded the plan's copy, rank 0 removes it.
void remove_resharded_copy(const ResumePlan& plan, const Job& job);

struct Resumed {
  std::int64_t step = 0;  // the last completed step; training continues at step + 1
  RankState state;        // this rank's (its sampler position is per-world, see load)
  std::optional<double> loss;  // the last logged loss when it was saved; none before the first log
};

// Loads `dir` into the strategy, the optimizer's step count and the model's random generators,
// and returns this rank's state. The world size must match (ConfigError pointing to `genesis
// ckpt reshard` otherwise; the trainer loads plan_resume's load_dir, which does); config
// differences that change the result are logged as warnings, naming the checkpoint `shown_as`
// (the one the user gave, which `dir` is, or is a resharded copy of).
Resumed load_checkpoint(const std::filesystem::path& dir, const Config& config,
                        parallel::Strategy& strategy, nn::Module& model, const Job& job,
                        const std::string& shown_as);

// Where a run starts: from the checkpoint choose_resume_checkpoint picks, planned by
// plan_resume, loaded into the strategy and the model's generators, and its resharded copy
// removed; else from `init` (model.init_from) when given, else as built. ConfigError when the
// checkpoint stopped mid-epoch at a place this world cannot split. With `nodes` (node-local
// checkpoints), "auto" and a restart resume from the newest step every node committed, assembled
// whole on each node from the shards the nodes hold (node_local.hpp).
struct RunStart {
  // What the run saves with its checkpoints: `config` with the accumulation it trains with, so
  // a resume onto another world size keeps the global batch.
  Config config;
  ResumePlan elastic;                                 // default when fresh
  std::optional<std::filesystem::path> resumed_from;  // the chosen checkpoint
  std::optional<Resumed> resumed;
};
RunStart start_run(const Config& config, const std::filesystem::path& run_dir,
                   parallel::Strategy& strategy, nn::Module& model, const Job& job,
                   InitWeights* init, const ckpt::Nodes* nodes = nullptr);

// Collective: loads `init` into `strategy` (whose module is `model`); tensors it lacks (a fresh
// value head) keep the model's own initialisation.
void load_init_weights(InitWeights& init, parallel::Strategy& strategy, nn::Module& model);

// What a save of `step` under <run_dir>/checkpoints holds: the manifest's options (pruning to
// save_total_limit), this rank's pieces of the training state and its RankState with the random
// streams' positions. world_size_changes (ResumePlan's) is kept in the manifest's info when not
// empty, so a later resume on the same smaller world still keeps the original global batch.
// With `nodes`, each node keeps its own ranks' shards (node_local.hpp). The pieces view live
// state: write them before training goes on, or copy them (ckpt::AsyncSave).
struct SaveRequest {
  ckpt::SaveOptions options;
  std::vector<ckpt::StatePiece> pieces;
  nlohmann::json rank_state;
};
SaveRequest save_request(const Config& config, const std::filesystem::path& run_dir,
                         std::int64_t step, parallel::Strategy& strategy, nn::Module& model,
                         RankState state, std::optional<double> loss,
                         const nlohmann::json& world_size_changes, const ckpt::Nodes* nodes);

}  // namespace genesis::train
