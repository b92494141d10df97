// Whether operations record a backward graph. Per thread, like torch.no_grad(): the backward
// engine and optimizers switch it off for the work they do on tensors.
#pragma once

namespace genesis::autograd {

bool grad_enabled();
void set_grad_enabled(bool enabled);

class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace genesis::autograd

namespace genesis {
using autograd::NoGradGuard;
}
