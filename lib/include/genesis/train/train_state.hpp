// What the trainer keeps per rank beyond the strategy's tensors, so a resumed run continues
// exactly where it stopped: the data sampler's place, the RNG streams, and the running sums of
// the current logging window (a checkpoint need not fall on a logging step). Stored as one JSON
// object per rank in the checkpoint manifest.
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
  double window_loss = 0, window_correct = 0, window_predictions = 0;
  std::int64_t window_steps = 0;
  std::int64_t examples = 0;  // training examples this rank has processed
  double train_s = 0;         // training seconds so far (throughput)
  double eval_loss = 0, eval_accuracy = 0;  // the last evaluation
  // SFT: the last exact-match figure and over how many prompts (0: not an SFT run).
  double eval_exact_match = 0;
  std::int64_t eval_prompts = 0;
  nlohmann::json loss_scale;  // fp16: amp::GradScaler::state(); null otherwise
};

nlohmann::json to_json(const RankState& state);
// InvalidArgument naming the missing or mistyped key.
RankState rank_state_from_json(const nlohmann::json& json);

// The rank states of a run moved from old.size() ranks to new_world ranks with the same global
// batch (genesis ckpt reshard): sampler place and RNG streams carry over (rank r takes old rank
// r % old's), and the logging window's sums are redistributed so the reduced figures the next
// log prints are unchanged.
std::vector<nlohmann::json> reshard_rank_states(const std::vector<nlohmann::json>& old, int new_world);

}  // namespace genesis::train
