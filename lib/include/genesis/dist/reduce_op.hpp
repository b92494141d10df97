// ReduceOp: how a reducing collective combines the ranks' values (torch.distributed.ReduceOp).
// AVG is SUM divided by the group size, defined for floating tensors only.
#pragma once

#include <string_view>

namespace genesis::dist {

enum class ReduceOp { SUM, AVG, MAX, MIN, PROD };

constexpr std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::PROD: return "PROD";
  }
  return "?";
}

}  // namespace genesis::dist
