// The recompute runs inside the checkpoint node's backward, as a nested autograd::backward from
// a detached copy of the input; the engine lets that nested pass queue its callbacks (DDP's) into
// the outer pass, so gradient synchronisation still waits for the whole backward. The recompute
// runs under the forward's autocast state (the engine itself runs with autocast off), so it
// rebuilds the same graph in the same dtypes.
#include "genesis/autograd/checkpoint.hpp"

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/engine.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"

namespace genesis::autograd {
namespace {

class GradEnabledGuard {
 public:
  GradEnabledGuard() : previous_(grad_enabled()) { set_grad_enabled(true); }
  ~GradEnabledGuard() { set_grad_enabled(previous_); }
  GradEnabledGuard(const GradEnabledGuard&) = delete;
  GradEnabledGuard& operator=(const GradEnabledGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const std::vector<std::shared_ptr<Generator>>& generators) {
  if (!grad_enabled() || !input.requires_grad()) return fn(input);
  std::vector<std::string> rng;
  for (const auto& g : generators) rng.push_back(g->state());
  const std::optional<DType> autocast = amp::autocast_dtype();
  Tensor output;
  {
    NoGradGuard no_grad;
    output = fn(input);
  }
  const Tensor saved = input.detach();
  record("checkpoint", {input}, {output},
         [fn, saved, generators, rng, autocast](const std::vector<Tensor>& grads,
                                                const NeedsGrad&) {
           // Rewind the random streams to the first forward's draws, and afterwards put them
           // back where the rest of the step left them.
           std::vector<std::string> now;
           for (std::size_t i = 0; i < generators.size(); ++i) {
             now.push_back(generators[i]->state());
             generators[i]->set_state(rng[i]);
           }
           Tensor x = saved.detach();
           x.set_requires_grad(true);
           Tensor y;
           {
             GradEnabledGuard grad_on;
             amp::AutocastGuard forward_autocast(autocast);
             y = fn(x);
           }
           for (std::size_t i = 0; i < generators.size(); ++i) generators[i]->set_state(now[i]);
           if (y.requires_grad()) backward({y}, {grads[0]});
           return std::vector<Tensor>{x.grad()};
         });
  return output;
}

}  // namespace genesis::autograd
