// Adam and AdamW with bias correction, torch.optim.Adam / torch.optim.AdamW semantics. The two
// differ only in where weight decay goes: Adam adds weight_decay * param to the gradient (L2, so
// the decay passes through the adaptive scaling); AdamW shrinks the parameter by lr * weight_decay
// before the update (decoupled). Both run the one fused op-table kernel `adamw_step`.
// Not here: amsgrad, maximize, capturable/differentiable modes.
#pragma once

#include "genesis/optim/optimizer.hpp"

namespace genesis::optim {

struct AdamOptions {
  double lr = 1e-3;            // step size, >= 0
  double beta1 = 0.9;          // decay of the first moment (exp_avg), in [0, 1)
  double beta2 = 0.999;        // decay of the second moment (exp_avg_sq), in [0, 1)
  double eps = 1e-8;           // added to the bias-corrected sqrt(exp_avg_sq), >= 0
  double weight_decay = 0.0;   // L2 for Adam, decoupled for AdamW; >= 0
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  const AdamOptions& options() const { return options_; }
  std::vector<std::string> state_names() const override;

 protected:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);

 private:
  AdamOptions options_;
  bool decoupled_;
};

// Unlike torch.optim.AdamW (default weight_decay 0.01) the default is AdamOptions' 0, so that
// one options struct serves both: set weight_decay explicitly.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options);
};

}  // namespace genesis::optim
