// SGD::step: validates options once, then runs the host update for CPU parameters and the
// device-agnostic ops form elsewhere (update_math.hpp).
#include "genesis/optim/sgd.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "update_math.hpp"

namespace genesis::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  GENESIS_CHECK(options.momentum >= 0.0, InvalidArgument,
                "SGD: invalid momentum " + std::to_string(options.momentum));
  GENESIS_CHECK(options.weight_decay >= 0.0, InvalidArgument,
                "SGD: invalid weight_decay " + std::to_string(options.weight_decay));
  GENESIS_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
                InvalidArgument, "SGD: Nesterov momentum requires a momentum and zero dampening");
}

std::vector<std::string> SGD::state_names() const {
  if (options_.momentum == 0.0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  NoGradGuard no_grad;
  SGDOptions now = options_;
  now.lr = lr_;  // a scheduler may have moved it since construction
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    GENESIS_CHECK(g.shape() == p.shape(), InvalidArgument,
                  "SGD: parameter " + std::to_string(i) + " has shape " + shape_str(p.shape()) +
                      " but its grad " + shape_str(g.shape()));
    ParamState& s = state_[i];
    Tensor buffer = s.buffers.empty() ? Tensor() : s.buffers[0];
    if (p.device().is_cpu()) {
      detail::sgd_update_host(p, g, buffer, now);
    } else {
      detail::sgd_update_ops(p, g, buffer, now);
    }
    if (buffer.defined()) s.buffers = {buffer};
    ++s.step;
  }
  ++step_count_;
}

}  // namespace genesis::optim
