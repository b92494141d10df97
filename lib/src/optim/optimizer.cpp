// Optimizer's shared parts: parameter validation, zero_grad, lr, and the named export/import of
// per-parameter state that checkpoints use.
#include "genesis/optim/optimizer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include "genesis/core/error.hpp"

namespace genesis::optim {

namespace {

void check_lr(double lr) {
  GENESIS_CHECK(std::isfinite(lr) && lr >= 0.0, InvalidArgument,
                "invalid learning rate " + std::to_string(lr) + " (must be finite and >= 0)");
}

// Splits "12.exp_avg" into (12, "exp_avg").
std::pair<std::int64_t, std::string> split_state_name(const std::string& name) {
  const auto dot = name.find('.');
  std::int64_t index = -1;
  const char* end = name.data() + (dot == std::string::npos ? name.size() : dot);
  auto [ptr, ec] = std::from_chars(name.data(), end, index);
  GENESIS_CHECK(dot != std::string::npos && ec == std::errc() && ptr == end && index >= 0,
                InvalidArgument,
                "optimizer state name '" + name + "' is not '<param index>.<name>'");
  return {index, name.substr(dot + 1)};
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : params_(std::move(params)), state_(params_.size()), lr_(lr) {
  check_lr(lr);
  std::unordered_set<const TensorImpl*> seen;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const std::string which = "optimizer parameter " + std::to_string(i);
    GENESIS_CHECK(p.defined(), InvalidArgument, which + " is undefined");
    GENESIS_CHECK(p.is_leaf() && p.requires_grad(), InvalidArgument,
                  which + " must be a leaf tensor that requires grad");
    GENESIS_CHECK(seen.insert(p.impl()).second, InvalidArgument,
                  which + " appears twice in the parameter list");
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

void Optimizer::set_lr(double lr) {
  check_lr(lr);
  lr_ = lr;
}

void Optimizer::set_step_count(std::int64_t steps) {
  GENESIS_CHECK(steps >= 0, InvalidArgument, "negative optimizer step count");
  step_count_ = steps;
}

NamedTensors Optimizer::state_tensors() {
  const std::vector<std::string> names = state_names();
  NamedTensors out;
  for (std::size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    if (s.step == 0) continue;
    const std::string prefix = std::to_string(i) + ".";
    out.emplace_back(prefix + "step", Tensor::scalar(static_cast<double>(s.step), DType::i64));
    for (std::size_t k = 0; k < s.buffers.size(); ++k)
      out.emplace_back(prefix + names[k], s.buffers[k]);
  }
  return out;
}

void Optimizer::load_state_tensors(const NamedTensors& state) {
  const std::vector<std::string> names = state_names();
  std::vector<ParamState> loaded(params_.size());
  std::vector<std::vector<bool>> present(params_.size(), std::vector<bool>(names.size(), false));
  for (const auto& [name, t] : state) {
    auto [index, field] = split_state_name(name);
    GENESIS_CHECK(index < static_cast<std::int64_t>(params_.size()), InvalidArgument,
                  "optimizer state '" + name + "' names parameter " + std::to_string(index) +
                      " of " + std::to_string(params_.size()));
    ParamState& s = loaded[index];
    if (field == "step") {
      GENESIS_CHECK(t.numel() == 1 && t.item<std::int64_t>() > 0, InvalidArgument,
                    "optimizer state '" + name + "' must be one positive count");
      s.step = t.item<std::int64_t>();
      continue;
    }
    auto it = std::find(names.begin(), names.end(), field);
    GENESIS_CHECK(it != names.end(), InvalidArgument,
                  "unknown optimizer state '" + name + "' for this optimizer");
    const Tensor& p = params_[index];
    GENESIS_CHECK(t.shape() == p.shape(), InvalidArgument,
                  "optimizer state '" + name + "' has shape " + shape_str(t.shape()) +
                      ", its parameter " + shape_str(p.shape()));
    const std::size_t k = static_cast<std::size_t>(it - names.begin());
    if (s.buffers.empty()) s.buffers.resize(names.size());
    // A copy, so that the caller's tensors (a checkpoint being read) never alias live state.
    Tensor src = t.detach();
    s.buffers[k] = src.device() == p.device() ? src.clone() : src.to(p.device()).contiguous();
    present[index][k] = true;
  }
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const bool any = std::count(present[i].begin(), present[i].end(), true) > 0;
    const bool all = std::count(present[i].begin(), present[i].end(), true) ==
                     static_cast<std::ptrdiff_t>(names.size());
    GENESIS_CHECK(loaded[i].step > 0 ? all : !any, InvalidArgument,
                  "optimizer state for parameter " + std::to_string(i) +
                      " is incomplete (needs 'step' and every buffer together)");
  }
  state_ = std::move(loaded);
}

}  // namespace genesis::optim
