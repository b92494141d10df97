// RankState <-> JSON, and moving the states of a run to another world size. Doubles go through
// nlohmann's shortest round-trip formatting, so a resumed window sum is the saved one bit for bit.
#include "genesis/train/train_state.hpp"

#include "genesis/core/error.hpp"

namespace genesis::train {
namespace {

using nlohmann::json;

template <typename T>
T get(const json& j, const char* key) {
  GENESIS_CHECK(j.is_object() && j.contains(key), InvalidArgument,
                std::string("checkpoint rank state has no \"") + key + "\"");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw InvalidArgument(std::string("checkpoint rank state: \"") + key + "\" has the wrong type");
  }
}

}  // namespace

nlohmann::json to_json(const RankState& s) {
  json out = {{"sampler", {{"epoch", s.epoch}, {"consumed", s.consumed}}},
              {"rng", s.rng},
              {"window", {{"loss", s.window_loss}, {"correct", s.window_correct},
                          {"predictions", s.window_predictions}, {"steps", s.window_steps}}},
              {"examples", s.examples},
              {"train_s", s.train_s},
              {"eval", {{"loss", s.eval_loss}, {"accuracy", s.eval_accuracy}}}};
  // Only runs that have them carry these, so other checkpoints stay as they were.
  if (s.eval_prompts > 0) {
    out["eval"]["exact_match"] = s.eval_exact_match;
    out["eval"]["prompts"] = s.eval_prompts;
  }
  if (!s.loss_scale.is_null()) out["loss_scale"] = s.loss_scale;
  return out;
}

RankState rank_state_from_json(const nlohmann::json& j) {
  RankState s;
  const json sampler = get<json>(j, "sampler");
  s.epoch = get<std::int64_t>(sampler, "epoch");
  s.consumed = get<std::int64_t>(sampler, "consumed");
  s.rng = get<std::map<std::string, std::string>>(j, "rng");
  const json window = get<json>(j, "window");
  s.window_loss = get<double>(window, "loss");
  s.window_correct = get<double>(window, "correct");
  s.window_predictions = get<double>(window, "predictions");
  s.window_steps = get<std::int64_t>(window, "steps");
  s.examples = get<std::int64_t>(j, "examples");
  s.train_s = get<double>(j, "train_s");
  const json eval = get<json>(j, "eval");
  s.eval_loss = get<double>(eval, "loss");
  s.eval_accuracy = get<double>(eval, "accuracy");
  if (eval.contains("prompts")) {
    s.eval_exact_match = get<double>(eval, "exact_match");
    s.eval_prompts = get<std::int64_t>(eval, "prompts");
  }
  if (j.contains("loss_scale")) s.loss_scale = j.at("loss_scale");
  return s;
}

// The trainer logs sum(window_loss over ranks) / world / steps and sum(correct) / sum(predictions):
// giving every new rank the old mean loss and rank 0 all the counts keeps both figures.
std::vector<nlohmann::json> reshard_rank_states(const std::vector<nlohmann::json>& old, int new_world) {
  GENESIS_CHECK(!old.empty() && new_world >= 1, InvalidArgument,
                "resharding needs at least one old and one new rank");
  std::vector<RankState> states;
  for (const json& j : old) states.push_back(rank_state_from_json(j));
  double loss = 0, correct = 0, predictions = 0;
  std::int64_t examples = 0;
  for (const RankState& s : states) {
    loss += s.window_loss;
    correct += s.window_correct;
    predictions += s.window_predictions;
    examples += s.examples;
  }
  std::vector<json> out;
  for (int r = 0; r < new_world; ++r) {
    RankState s = states[static_cast<std::size_t>(r) % states.size()];
    s.window_loss = loss / static_cast<double>(states.size());
    s.window_correct = r == 0 ? correct : 0.0;
    s.window_predictions = r == 0 ? predictions : 0.0;
    s.examples = examples / new_world;
    out.push_back(to_json(s));
  }
  return out;
}

}  // namespace genesis::train
