// Thread-local grad mode: a communication or data thread never inherits the trainer's setting.
#include "genesis/autograd/grad_mode.hpp"

namespace genesis::autograd {

namespace {
thread_local bool t_grad_enabled = true;
}

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

}  // namespace genesis::autograd
