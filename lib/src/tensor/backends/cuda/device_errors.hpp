// Bad indices found by kernels, reported without stopping the GPU. A host-side check before each
// launch would cost a device-to-host copy and a synchronisation per op; a device assert would
// kill the CUDA context (and the run) for a bad token id. Instead an index kernel that meets an
// out-of-range value skips it and records the first such value in a slot of mapped pinned host
// memory, and the host raises it as InvalidArgument at its next synchronisation with the device
// (Tensor::item, a copy to the host, the end of a step), naming the op, the value, its position
// and the valid range, as the CPU kernels do.
#pragma once

#include <cstdint>

#include "genesis/tensor/op_table.hpp"

namespace genesis::cuda {

// Written by kernels (first reporter wins), read and cleared by the host.
struct IndexErrorSlot {
  int reported;            // 0 until a kernel reports
  int op;                  // OpId of the reporting kernel
  std::int64_t value;      // the offending index or target
  std::int64_t position;   // its flat position in the index tensor
  std::int64_t bound;      // valid values are [0, bound) (or ignore_index)
  std::int64_t ignore;     // cross_entropy's ignore_index, INT64_MIN for none
};

// The device-visible address of this process's slot (one for all devices: mapped pinned memory
// is visible to every GPU). Allocated on first use.
IndexErrorSlot* index_error_slot();

// Throws InvalidArgument describing the reported index and clears the slot; returns quietly when
// nothing was reported. Callers synchronise with the device first: a kernel still queued has not
// reported yet.
void raise_index_errors();

}  // namespace genesis::cuda
