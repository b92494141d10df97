// Synchronous and asynchronous saves behind one call, and what each cost the loop.
#include "checkpoint_saves.hpp"

#include <spdlog/spdlog.h>

#include "checkpointing.hpp"

namespace genesis::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

bool saves_in_background(const TrainingConfig& t) {
  return t.save_async && t.save_steps > 0 && t.save_steps < t.max_steps;
}

double snapshot_bytes_per_rank(std::int64_t trained_parameters, double optimizer_bytes_per_parameter,
                               int world) {
  return static_cast<double>(trained_parameters) * (4.0 + optimizer_bytes_per_parameter) / world;
}

CheckpointSaves::CheckpointSaves(SaveContext context)
    : c_(std::move(context)), async_(*c_.job.group()) {}

void CheckpointSaves::save(std::int64_t step, const RankState& state, std::optional<double> loss,
                           bool at_once) {
  finish();  // at most one save in flight
  const Clock::time_point begin = Clock::now();
  ++saves_;
  SaveRequest request = save_request(c_.config, c_.run_dir, step, c_.strategy, c_.model, state,
                                     loss, c_.world_size_changes, c_.nodes);
  if (at_once || !c_.config.training.save_async) {
    const std::filesystem::path dir =
        ckpt::save_checkpoint(request.options, request.pieces, request.rank_state, *c_.job.group());
    const double took = seconds_since(begin);
    blocked_s_ += took;
    if (c_.job.is_main()) spdlog::info("saved checkpoint {} in {:.2f} s", dir.string(), took);
    return;
  }
  async_.start(request.options, request.pieces, request.rank_state);
  started_ = begin;
  waited_in_flight_s_ = seconds_since(begin);
  blocked_s_ += waited_in_flight_s_;
}

void CheckpointSaves::before_update() {
  if (async_.in_flight()) waiting([this] { async_.before_update(); });
}

void CheckpointSaves::poll() {
  if (!async_.in_flight()) return;
  std::optional<std::filesystem::path> dir;
  waiting([&] { dir = async_.poll(); });
  if (dir) committed(*dir);
}

void CheckpointSaves::finish() {
  if (!async_.in_flight()) return;
  std::optional<std::filesystem::path> dir;
  waiting([&] { dir = async_.finish(); });
  if (dir) committed(*dir);
}

void CheckpointSaves::waiting(const std::function<void()>& work) {
  const Clock::time_point begin = Clock::now();
  work();
  const double took = seconds_since(begin);
  blocked_s_ += took;
  waited_in_flight_s_ += took;
}

void CheckpointSaves::committed(const std::filesystem::path& dir) {
  if (!c_.job.is_main()) return;
  const double mb = static_cast<double>(async_.written_bytes()) / 1e6;
  const double write_s = async_.write_seconds();
  spdlog::info("saved checkpoint {} in {:.2f} s, training blocked {:.2f} s of it (rank 0 wrote "
               "{:.0f} MB in {:.2f} s, {:.0f} MB/s, {:.0f} MB of it copied first)",
               dir.string(), seconds_since(started_), waited_in_flight_s_, mb, write_s,
               write_s > 0 ? mb / write_s : 0.0,
               static_cast<double>(async_.copied_bytes()) / 1e6);
}

}  // namespace genesis::train
