// The figures a training step computes on its device (each micro-batch's loss, a classifier's
// hits), held there until the loop needs their values: at a logging step, a checkpoint or a
// redraw of the progress bar. Reading each at once would make the host wait for the GPU twice a
// micro-batch and leave the GPU idle while the host queues what follows; held, they cross in one
// transfer. They are added in the order they came, in double, so every sum is the one reading
// each at once would have made.
#pragma once

#include <string>
#include <vector>

#include "genesis/tensor/tensor.hpp"
#include "genesis/train/train_state.hpp"

namespace genesis::train {

// Several 0-d figures of one dtype, in one copy to the host (one wait for the device, not one
// each).
std::vector<float> to_host(const std::vector<Tensor>& scalars);

class PendingFigures {
 public:
  // Once read: state.window_loss += value * weight. `value` is 0-d; its graph is not kept.
  void add_loss(const Tensor& value, double weight);
  // Once read: state.window_sums[name] += value.
  void add_sum(const std::string& name, const Tensor& value);
  // Adds every held figure into `state`, in order, and lets go of them.
  void fold_into(RankState& state);
  bool empty() const { return held_.empty(); }
  // Holding enough that the loop should fold them (a long logging window of many micro-batches).
  bool full() const { return held_.size() >= 1024; }

 private:
  struct Held {
    Tensor value;  // f32, 0-d
    double weight;
    std::string sum;  // empty: the loss
  };
  std::vector<Held> held_;
};

}  // namespace genesis::train
