// Adam/AdamW::step: keeps f32 moments per parameter and hands each (param, grad, exp_avg,
// exp_avg_sq) quadruple to the fused adamw_step kernel of the parameter's device; on a GPU, all
// of them at once (adamw_step_multi). Parameters that are not contiguous f32 (a bf16 model, a
// strided view) are updated through an f32 working copy.
#include "genesis/optim/adam.hpp"

#include <cmath>
#include <map>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"
#include "update_math.hpp"

namespace genesis::optim {

namespace {

void check_options(const AdamOptions& o, const char* who) {
  auto fail = [&](const char* what, double v) {
    return std::string(who) + ": invalid " + what + " " + std::to_string(v);
  };
  GENESIS_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0, InvalidArgument, fail("beta1", o.beta1));
  GENESIS_CHECK(o.beta2 >= 0.0 && o.beta2 < 1.0, InvalidArgument, fail("beta2", o.beta2));
  GENESIS_CHECK(o.eps >= 0.0, InvalidArgument, fail("eps", o.eps));
  GENESIS_CHECK(o.weight_decay >= 0.0, InvalidArgument, fail("weight_decay", o.weight_decay));
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {
  check_options(options, decoupled ? "AdamW" : "Adam");
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::move(params), options, true) {}

std::vector<std::string> Adam::state_names() const { return {"exp_avg", "exp_avg_sq"}; }

void Adam::step() {
  NoGradGuard no_grad;
  OpArgs args;
  args.f = {lr_, options_.beta1, options_.beta2, options_.eps, options_.weight_decay, 0.0};
  args.i[1] = decoupled_ ? 1 : 0;
  std::map<std::int64_t, std::vector<Tensor>> on_gpu;  // quadruples by step: one launch each
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    GENESIS_CHECK(g.shape() == p.shape(), InvalidArgument,
                  std::string(decoupled_ ? "AdamW" : "Adam") + ": parameter " + std::to_string(i) +
                      " has shape " + shape_str(p.shape()) + " but its grad " +
                      shape_str(g.shape()));
    ParamState& s = state_[i];
    if (s.buffers.empty()) {
      s.buffers = {Tensor::zeros(p.shape(), DType::f32, p.device()),
                   Tensor::zeros(p.shape(), DType::f32, p.device())};
    }
    GENESIS_CHECK(s.buffers[0].dtype() == DType::f32 && s.buffers[1].dtype() == DType::f32,
                  InvalidArgument, "Adam: exp_avg and exp_avg_sq must be f32");
    ++s.step;
    if (p.device().is_cuda() && detail::is_dense_f32({p, g, s.buffers[0], s.buffers[1]})) {
      auto& quads = on_gpu[s.step];
      quads.insert(quads.end(), {p, g, s.buffers[0], s.buffers[1]});
      continue;
    }
    Tensor work = detail::dense_f32(p);
    args.i[0] = s.step;
    dispatch(OpId::adamw_step, {work, detail::dense_f32(g), s.buffers[0], s.buffers[1]}, {}, args);
    if (!work.is_same(p)) Tensor(p).copy_(work);
  }
  for (const auto& [step, quads] : on_gpu) {
    args.i[0] = step;
    dispatch(OpId::adamw_step_multi, quads, {}, args);
  }
  ++step_count_;
}

}  // namespace genesis::optim
