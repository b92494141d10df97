// The replicated start every data-parallel strategy needs: the same parameters on every rank
// (checked, so a mismatch is an error naming the parameter rather than a hang) and rank 0's
// values copied to all.
#include "replicate.hpp"

#include <cstring>

#include "genesis/core/error.hpp"

namespace genesis::parallel::detail {
namespace {

constexpr std::int64_t kMaxDims = 7;  // shape rows: ndim, then up to 7 sizes

std::string shape_text(const std::int64_t* row) {
  std::string s = "(";
  for (std::int64_t d = 0; d < row[0]; ++d) s += (d ? ", " : "") + std::to_string(row[1 + d]);
  return s + ")";
}

}  // namespace

// Every rank must hold the same parameters in the same order, or the buckets would not line up
// and the first all-reduce would hang or mix unrelated tensors. Each rank compares its shapes
// with rank 0's, then all ranks agree on the first mismatch (MIN over ranks) and fail together.
void check_same_parameters(const nn::NamedTensors& params, dist::ProcessGroup& group) {
  const auto n = static_cast<std::int64_t>(params.size());
  const Device device = group.device();  // an NCCL group reduces device tensors
  Tensor count_max = Tensor::full({1}, static_cast<double>(n), DType::i64, device);
  Tensor count_min = count_max.clone();
  group.all_reduce(count_max, {.op = dist::ReduceOp::MAX})->wait();
  group.all_reduce(count_min, {.op = dist::ReduceOp::MIN})->wait();
  const auto most = count_max.item<std::int64_t>(), least = count_min.item<std::int64_t>();
  GENESIS_CHECK(most == least, InvalidArgument,
                "DDP: ranks disagree on the number of parameters (this rank " + std::to_string(n) +
                    ", others between " + std::to_string(least) + " and " + std::to_string(most) +
                    "): every rank must build the same model");
  if (n == 0) return;  // all agree there is nothing to compare (a model whose units are all cut)

  Tensor mine = Tensor::zeros({n, 1 + kMaxDims}, DType::i64);
  auto* rows = mine.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const Shape& shape = params[static_cast<std::size_t>(i)].second.shape();
    GENESIS_CHECK(static_cast<std::int64_t>(shape.size()) <= kMaxDims, NotSupported,
                  "DDP: parameters with more than 7 dimensions");
    rows[i * (1 + kMaxDims)] = static_cast<std::int64_t>(shape.size());
    for (std::size_t d = 0; d < shape.size(); ++d) rows[i * (1 + kMaxDims) + 1 + d] = shape[d];
  }
  Tensor root = mine.to(device).clone();
  group.broadcast(root, {.root = 0})->wait();
  root = root.to(Device::cpu());
  const auto* root_rows = root.data<std::int64_t>();
  std::int64_t first_bad = -1;
  for (std::int64_t i = 0; i < n * (1 + kMaxDims) && first_bad < 0; ++i)
    if (rows[i] != root_rows[i]) first_bad = i / (1 + kMaxDims);
  Tensor verdict =
      Tensor::full({1}, static_cast<double>(first_bad < 0 ? n : first_bad), DType::i64, device);
  group.all_reduce(verdict, {.op = dist::ReduceOp::MIN})->wait();
  const auto bad = verdict.item<std::int64_t>();
  if (bad == n) return;
  const auto& name = params[static_cast<std::size_t>(bad)].first;
  const std::int64_t* r0 = root_rows + bad * (1 + kMaxDims);
  const std::int64_t* me = rows + bad * (1 + kMaxDims);
  throw InvalidArgument("DDP: parameter '" + name + "' has shape " + shape_text(me) + " on rank " +
                        std::to_string(group.rank()) + " but " + shape_text(r0) +
                        " on rank 0 (or another rank differs there): every rank must build the "
                        "same model");
}

void broadcast_from_rank0(const nn::NamedTensors& tensors, dist::ProcessGroup& group) {
  // All in flight at once; each op holds its own handle to the tensor's storage.
  std::vector<std::shared_ptr<dist::Work>> works;
  for (const auto& [name, t] : tensors) {
    Tensor target = t.detach();
    GENESIS_CHECK(target.is_contiguous(), NotSupported,
                  "parameter or buffer '" + name + "' is not contiguous");
    works.push_back(group.broadcast(target, {.root = 0}));
  }
  for (auto& w : works) w->wait();
}


double sum_over_ranks(double value, dist::ProcessGroup& group) {
  if (group.size() == 1) return value;
  const Device device = group.device();
  Tensor mine = Tensor::empty({1}, DType::i64);
  std::memcpy(mine.raw_data(), &value, sizeof value);
  mine = mine.to(device);
  Tensor all = Tensor::empty({group.size()}, DType::i64, device);
  group.all_gather_tensor(all, mine)->wait();
  all = all.to(Device::cpu());
  double total = 0;
  for (int r = 0; r < group.size(); ++r) {
    double v = 0;
    std::memcpy(&v, all.data<std::int64_t>() + r, sizeof v);
    total += v;
  }
  return total;
}

}  // namespace genesis::parallel::detail
