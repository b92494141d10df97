// The trainer's side of checkpoints: which checkpoint a run resumes from (the `latest` of its run
// directory under "auto", falling back to an older one when it is damaged), loading it into the
// strategy and this rank's RankState, and saving one. The format itself is ckpt/'s.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "genesis/core/config.hpp"
#include "genesis/nn/module.hpp"
#include "genesis/parallel/strategy.hpp"
#include "genesis/train/train_state.hpp"
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
std::optional<std::filesystem::path> choose_resume_checkpoint(const Config& config,
                                                              const std::filesystem::path& run_dir,
                                                              const Job& job);

struct Resumed {
  std::int64_t step = 0;  // the last completed step; training continues at step + 1
  RankState state;        // this rank's (its sampler position is per-world, see load)
  std::optional<double> loss;  // the last logged loss when it was saved; none before the first log
};

// Loads `dir` into the strategy, the optimizer's step count and the model's random generators,
// and returns this rank's state. The world size must match (ConfigError pointing to `genesis
// ckpt reshard` otherwise); config differences that change the result are logged as warnings.
Resumed load_checkpoint(const std::filesystem::path& dir, const Config& config,
                        parallel::Strategy& strategy, nn::Module& model, const Job& job);

// Collective: writes step-<step> under <run_dir>/checkpoints and prunes to save_total_limit.
void save_checkpoint(const Config& config, const std::filesystem::path& run_dir, std::int64_t step,
                     parallel::Strategy& strategy, nn::Module& model, RankState state,
                     std::optional<double> loss, const Job& job);

}  // namespace genesis::train
