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
  json window = {{"loss", s.window_loss}, {"steps", s.window_steps}};
  for (const auto& [name, sum] : s.window_sums) {
    GENESIS_CHECK(name != "loss" && name != "steps", InvalidArgument,
                  "a window sum may not be named \"" + name + "\": the loop's own key");
    window[name] = sum;
  }
  json out = {{"sampler", {{"epoch", s.epoch}, {"consumed", s.consumed}}},
              {"rng", s.rng},
              {"window", window},
              {"examples", s.examples},
              {"train_s", s.train_s},
              {"eval", s.eval}};
  // Only runs that have them carry these, so other checkpoints stay as they were.
  if (!s.loss_scale.is_null()) out["loss_scale"] = s.loss_scale;
  if (!s.objective.is_null()) out["objective"] = s.objective;
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
  s.window_steps = get<std::int64_t>(window, "steps");
  for (const auto& [name, sum] : window.items())
    if (name != "loss" && name != "steps") s.window_sums[name] = get<double>(window, name.c_str());
  s.examples = get<std::int64_t>(j, "examples");
  s.train_s = get<double>(j, "train_s");
  s.eval = get<json>(j, "eval");
  for (const auto& [name, value] : s.eval.items())
    GENESIS_CHECK(value.is_number(), InvalidArgument,
                  "checkpoint rank state: \"eval\" figure \"" + name + "\" is not a number");
  if (j.contains("loss_scale")) s.loss_scale = j.at("loss_scale");
  if (j.contains("objective")) s.objective = j.at("objective");
  return s;
}

// The trainer logs sum(window_loss over ranks) / world / steps and ratios of window sums added
// over ranks: giving every new rank the old mean loss and rank 0 all the sums keeps each figure.
std::vector<nlohmann::json> reshard_rank_states(const std::vector<nlohmann::json>& old, int new_world) {
  GENESIS_CHECK(!old.empty() && new_world >= 1, InvalidArgument,
                "resharding needs at least one old and one new rank");
  std::vector<RankState> states;
  for (const json& j : old) states.push_back(rank_state_from_json(j));
  double loss = 0;
  std::map<std::string, double> sums;
  std::int64_t examples = 0;
  for (const RankState& s : states) {
    loss += s.window_loss;
    for (const auto& [name, sum] : s.window_sums) sums[name] += sum;
    examples += s.examples;
  }
  std::vector<json> out;
  for (int r = 0; r < new_world; ++r) {
    RankState s = states[static_cast<std::size_t>(r) % states.size()];
    s.window_loss = loss / static_cast<double>(states.size());
    s.window_sums = sums;
    if (r > 0)
      for (auto& [name, sum] : s.window_sums) sum = 0.0;
    s.examples = examples / new_world;
    out.push_back(to_json(s));
  }
  return out;
}

}  // namespace genesis::train
