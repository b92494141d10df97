// The run's checkpoint saves, as the training loop asks for them: every save_steps, after the
// last step and on a scheduler's signal. With training.save_async a save on the way costs the
// step only the copy of the state into host memory (ckpt::AsyncSave); it commits at a later step
// boundary once every rank has written it, or when the next save, the last one, or a signal
// needs it done. What the loop waited for saves is checkpoint_blocked_s.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/async_save.hpp"
#include "genesis/ckpt/node_local.hpp"
#include "genesis/core/config.hpp"
#include "genesis/nn/module.hpp"
#include "genesis/parallel/strategy.hpp"
#include "genesis/train/train_state.hpp"
#include "job.hpp"

namespace genesis::train {

struct SaveContext {
  const Config& config;  // the run's, after what a resume changed
  std::filesystem::path run_dir;
  parallel::Strategy& strategy;
  nn::Module& model;
  const Job& job;
  const ckpt::Nodes* nodes;  // node-local checkpoints; null: one shared run directory
  nlohmann::json world_size_changes;
};

// Whether the run saves on the way in the background (and so may copy its state into host
// memory, when a step outruns the disk).
bool saves_in_background(const TrainingConfig& training);
// The most those copies hold per rank: each rank's share of the trained parameters (f32) and their
// optimizer state, as the plan counts them.
double snapshot_bytes_per_rank(std::int64_t trained_parameters, double optimizer_bytes_per_parameter,
                               int world);

// What the training loop asks of checkpoints (a test records the saves instead of writing them).
class Checkpoints {
 public:
  virtual ~Checkpoints() = default;
  // Collective: checkpoints `step` with this rank's state and the last logged loss. `at_once`
  // (the last step, a signal) or training.save_async off: committed before it returns.
  virtual void save(std::int64_t step, const RankState& state, std::optional<double> loss,
                    bool at_once) = 0;
  // Local, before the optimizer changes the state: what a save in the background has not written
  // yet is copied first (ckpt::AsyncSave::before_update).
  virtual void before_update() {}
  // Collective, at each step boundary (nothing to do, and no collective, when no save is in
  // flight): commits the save in flight once every rank has written it.
  virtual void poll() {}
  // Collective: waits for the save in flight and commits it.
  virtual void finish() {}
  virtual bool in_flight() const { return false; }
  // Seconds the loop spent in save, before_update and poll: what saving cost training.
  virtual double blocked_s() const { return 0; }
  virtual std::int64_t saves() const { return 0; }
};

class CheckpointSaves : public Checkpoints {
 public:
  explicit CheckpointSaves(SaveContext context);

  void save(std::int64_t step, const RankState& state, std::optional<double> loss,
            bool at_once) override;
  void before_update() override;
  void poll() override;
  void finish() override;

  bool in_flight() const override { return async_.in_flight(); }
  double blocked_s() const override { return blocked_s_; }
  std::int64_t saves() const override { return saves_; }

 private:
  void committed(const std::filesystem::path& dir);
  // Runs `work` on the training thread, counting its time as time the save in flight blocked.
  void waiting(const std::function<void()>& work);

  SaveContext c_;
  ckpt::AsyncSave async_;
  std::chrono::steady_clock::time_point started_;  // of the save in flight
  double blocked_s_ = 0;
  double waited_in_flight_s_ = 0;  // of the save in flight: what its snapshot blocked
  std::int64_t saves_ = 0;
};

}  // namespace genesis::train
