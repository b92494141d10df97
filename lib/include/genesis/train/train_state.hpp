// What the trainer keeps per rank beyond the strategy's tensors, so a resumed run continues
// exactly where it stopped: the data sampler's place, the RNG streams, the running sums of the
// current logging window (a checkpoint need not fall on a logging step), the last evaluation and
// the objective's own state. The training loop keeps its state in one of these and saves and
// restores it whole; it is stored as one JSON object per rank in the checkpoint manifest.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genesis::train {

struct RankState {
  std::int64_t epoch = 0;     // data sampler: current epoch
  std::int64_t consumed = 0;  // examples of that epoch's permutation used by all ranks together
  std::map<std::string, std::string> rng;  // generator name -> Generator::state()
  // The logging window so far: the loss summed over its micro-batches (each weighted as its
  // backward was), its steps, and the objective's sums by name ("correct", "predictions").
  double window_loss = 0;
  std::int64_t window_steps = 0;
  std::map<std::string, double> window_sums;
  std::int64_t examples = 0;  // training examples this rank has processed
  double train_s = 0;         // training seconds so far (throughput)
  // The last evaluation's figures by name ("loss", "accuracy", "exact_match", "prompts"); before
  // the first one, the zero loss and accuracy checkpoints have always held.
  nlohmann::json eval = {{"accuracy", 0.0}, {"loss", 0.0}};
  nlohmann::json loss_scale;  // fp16: amp::GradScaler::state(); null otherwise
  nlohmann::json objective;   // the objective's own state (Objective::state); null: none
};

nlohmann::json to_json(const RankState& state);
// InvalidArgument naming the missing or mistyped key.
RankState rank_state_from_json(const nlohmann::json& json);

// The rank states of a run moved from old.size() ranks to new_world ranks with the same global
// batch (genesis ckpt reshard): sampler place, RNG streams and the objective's state carry over
// (rank r takes old rank r % old's), and the logging window's sums are redistributed so the
// reduced figures the next log prints are unchanged.
std::vector<nlohmann::json> reshard_rank_states(const std::vector<nlohmann::json>& old, int new_world);

}  // namespace genesis::train
