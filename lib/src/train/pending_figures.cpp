#include "pending_figures.hpp"

#include "genesis/ops/ops.hpp"

namespace genesis::train {

std::vector<float> to_host(const std::vector<Tensor>& scalars) {
  std::vector<Tensor> flat;
  flat.reserve(scalars.size());
  for (const Tensor& t : scalars) flat.push_back(t.reshape({1}));
  return cat(flat, 0).to_vector();
}

void PendingFigures::add_loss(const Tensor& value, double weight) {
  held_.push_back({value.detach().to(DType::f32), weight, {}});
}

void PendingFigures::add_sum(const std::string& name, const Tensor& value) {
  held_.push_back({value.detach().to(DType::f32), 1.0, name});
}

void PendingFigures::fold_into(RankState& state) {
  if (held_.empty()) return;
  std::vector<Tensor> parts;
  parts.reserve(held_.size());
  for (const Held& h : held_) parts.push_back(h.value);
  const std::vector<float> values = to_host(parts);  // the one wait for the device
  for (std::size_t i = 0; i < held_.size(); ++i) {
    const double value = values[i];
    if (held_[i].sum.empty())
      state.window_loss += value * held_[i].weight;
    else
      state.window_sums[held_[i].sum] += value;
  }
  held_.clear();
}

}  // namespace genesis::train
