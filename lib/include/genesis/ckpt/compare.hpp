// `genesis ckpt diff`: two checkpoints compared tensor by tensor in logical terms, so the same
// weights saved by ZeRO-2 on 2 ranks and by DDP on 3 compare equal. Values are compared, not
// bytes: the report gives each differing tensor's largest absolute difference.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "genesis/ckpt/checkpoint.hpp"

namespace genesis::ckpt {

enum class DiffKind { same, values, dtype, shape, only_a, only_b };

struct TensorDiff {
  std::string name;
  DiffKind kind = DiffKind::same;
  Shape shape_a, shape_b;
  std::string dtype_a, dtype_b;
  double max_abs = 0;          // over all elements; NaN where one side has NaN and the other not
  std::int64_t differing = 0;  // elements that are not equal
};

// Every logical tensor named "model.*" on either side (and every other one, optimizer state
// included, when `all`), in name order. Reads verify checksums, so damage is an IoError.
std::vector<TensorDiff> diff_checkpoints(const Checkpoint& a, const Checkpoint& b, bool all);

bool all_same(const std::vector<TensorDiff>& diffs);

// One line per tensor that differs, then a summary line naming both sides.
void write_diff(std::ostream& out, const std::vector<TensorDiff>& diffs, const std::string& a,
                const std::string& b, bool all);

}  // namespace genesis::ckpt
