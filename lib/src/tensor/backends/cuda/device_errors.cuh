// The kernel side of device_errors.hpp: report_index_error() from any thread of any kernel.
#pragma once

#include <climits>

#include "device_errors.hpp"

namespace genesis::cuda {

// Records (op, value, position, bound) unless an earlier report holds the slot. The fields are
// written before the flag is published, so the host never reads a half-written report.
__device__ inline void report_index_error(IndexErrorSlot* slot, OpId op, std::int64_t value,
                                          std::int64_t position, std::int64_t bound,
                                          std::int64_t ignore = LLONG_MIN) {
  // 1 claims the slot; 2 marks it complete.
  if (atomicCAS(&slot->reported, 0, 1) != 0) return;
  slot->op = static_cast<int>(op);
  slot->value = value;
  slot->position = position;
  slot->bound = bound;
  slot->ignore = ignore;
  __threadfence_system();
  atomicExch(&slot->reported, 2);
}

}  // namespace genesis::cuda
