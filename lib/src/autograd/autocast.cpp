// Thread-local autocast state: a communication or data thread never inherits the trainer's
// setting, and ranks run as threads in tests each keep their own.
#include "genesis/autograd/autocast.hpp"

#include <string>

#include "genesis/core/error.hpp"

namespace genesis::amp {

namespace {
thread_local std::optional<DType> t_autocast_dtype;
}

std::optional<DType> autocast_dtype() { return t_autocast_dtype; }

void set_autocast_dtype(std::optional<DType> dtype) {
  if (!dtype || *dtype == DType::f32) {
    t_autocast_dtype.reset();
    return;
  }
  GENESIS_CHECK(*dtype == DType::bf16 || *dtype == DType::f16, InvalidArgument,
                "autocast: dtype must be bf16, f16 or f32 (off), got " +
                    std::string(dtype_name(*dtype)));
  t_autocast_dtype = dtype;
}

}  // namespace genesis::amp
