// Optimizer: the interface every update rule (SGD, Adam, AdamW) shares, plus the per-parameter
// state bookkeeping they all need: one state slot per parameter, created on its first update, and
// exported as named tensors ("3.exp_avg", "3.step") so checkpoints and ZeRO sharding can save and
// restore it without knowing the rule. Parameter groups and closures are left out on purpose.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  // params: leaf tensors that require grad; step() reads their .grad. An empty list is allowed
  // because a ZeRO rank may own no parameter of a small model.
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update to every parameter whose .grad is defined; the others are skipped and
  // keep their state untouched (PyTorch's behaviour for parameters unused in a step).
  virtual void step() = 0;
  // Sets every .grad to undefined (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  // Number of step() calls so far (a checkpoint restores it with set_step_count).
  std::int64_t step_count() const { return step_count_; }
  void set_step_count(std::int64_t steps);

  // The live state tensors, named "<param index>.<name>", for parameters updated at least once:
  // "<i>.step" (i64 scalar: updates applied to parameter i) and one entry per state_names().
  virtual NamedTensors state_tensors();
  // Replaces all state with copies of `state` (the format state_tensors() produces). Throws
  // InvalidArgument on an unknown name, a parameter index out of range, a shape that does not
  // match its parameter, or a parameter whose state is incomplete.
  virtual void load_state_tensors(const NamedTensors& state);
  // Names of the per-parameter buffers this rule keeps ("exp_avg", ...), in ParamState::buffers
  // order: what a checkpoint must hold for each parameter the optimizer has stepped.
  virtual std::vector<std::string> state_names() const = 0;

 protected:
  struct ParamState {
    std::int64_t step = 0;        // updates applied; 0 means no state yet
    std::vector<Tensor> buffers;  // one per state_names(), shaped like the parameter
  };

  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
  double lr_;
  std::int64_t step_count_ = 0;
};

}  // namespace genesis::optim
