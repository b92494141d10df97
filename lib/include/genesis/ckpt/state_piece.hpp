// The checkpoint's vocabulary: a strategy's training state in logical terms, so a checkpoint is
// independent of how the ranks split it. Every logical tensor has a name and a full shape; a rank
// saves pieces of it (element ranges of its row-major flattening) and loads by asking for the
// ranges it needs. A run saved by ZeRO-2 on 2 ranks therefore loads into DDP on 3, or into one
// process, with no conversion step.
//
// Names:
//   "model.<parameter or buffer>"           the module's own name (named_parameters/_buffers)
//   "optimizer.<parameter>.<state>"         one per optimizer state buffer (exp_avg, exp_avg_sq,
//                                           momentum_buffer), shaped like the parameter
//   "optimizer.<parameter>.step"            i64 scalar: updates applied to that parameter
// A parameter that has never been updated has no optimizer entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::ckpt {

// Elements [offset, offset + data.numel()) of logical tensor `name`, whose full shape is `shape`.
// data is a CPU or device tensor of the state's dtype: 1-D for a part, or the full shape for a
// whole tensor; it may view live storage (a saver copies it before training continues).
struct StatePiece {
  std::string name;
  Shape shape;
  std::int64_t offset = 0;
  Tensor data;
};

// Where load_state reads from: a checkpoint on disk, or an in-memory map in tests.
class StateSource {
 public:
  virtual ~StateSource() = default;
  virtual bool contains(const std::string& name) const = 0;
  virtual Shape shape(const std::string& name) const = 0;  // InvalidArgument if absent
  // Elements [offset, offset + numel) of `name`'s flattening as a new contiguous 1-D CPU tensor
  // of the stored dtype; an absent name or a range out of bounds throws.
  virtual Tensor read(const std::string& name, std::int64_t offset, std::int64_t numel) const = 0;
  // The whole tensor in its full shape.
  Tensor read_full(const std::string& name) const {
    const Shape s = shape(name);
    return read(name, 0, shape_numel(s)).reshape(s);
  }
};

}  // namespace genesis::ckpt
