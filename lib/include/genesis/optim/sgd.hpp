// SGD with momentum, dampening, L2 weight decay and Nesterov momentum: torch.optim.SGD's update
// rule exactly (the momentum buffer starts as a copy of the first gradient, not as zeros).
// Not here: maximize, foreach/fused variants, parameter groups.
#pragma once

#include "genesis/optim/optimizer.hpp"

namespace genesis::optim {

struct SGDOptions {
  double lr = 1e-3;            // step size, >= 0
  double momentum = 0.0;       // 0 disables the momentum buffer
  double dampening = 0.0;      // scales the gradient's share of the buffer by (1 - dampening)
  double weight_decay = 0.0;   // L2: weight_decay * param is added to the gradient
  bool nesterov = false;       // needs momentum > 0 and dampening == 0
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  const SGDOptions& options() const { return options_; }
  std::vector<std::string> state_names() const override;

 private:
  SGDOptions options_;
};

}  // namespace genesis::optim
