// Best-fit decreasing over example lengths, and packed rows made by copying each example's
// columns out of its unpacked row: the packed targets are the unpacked ones by construction, so
// whatever sft_rows decides about the loss (which tokens are scored) packing keeps.
#include "genesis/data/packing.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "genesis/core/error.hpp"

namespace genesis::data {

std::vector<std::vector<std::int64_t>> best_fit_decreasing(const std::vector<std::int64_t>& sizes,
                                                           std::int64_t capacity) {
  for (std::size_t i = 0; i < sizes.size(); ++i)
    GENESIS_CHECK(sizes[i] >= 1 && sizes[i] <= capacity, InvalidArgument,
                  "best_fit_decreasing: item " + std::to_string(i) + " has size " +
                      std::to_string(sizes[i]) + ", outside [1, " + std::to_string(capacity) +
                      "]");
  std::vector<std::int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::vector<std::int64_t>> bins;
  // (room, bin) of every bin with room left: the first entry at or above a size is the best fit,
  // the earliest bin among equal rooms.
  std::set<std::pair<std::int64_t, std::int64_t>> open;
  for (const std::int64_t item : order) {
    const std::int64_t size = sizes[item];
    auto fit = open.lower_bound({size, -1});
    std::int64_t bin = 0, room = 0;
    if (fit == open.end()) {
      bin = static_cast<std::int64_t>(bins.size());
      bins.emplace_back();
      room = capacity;
    } else {
      std::tie(room, bin) = *fit;
      open.erase(fit);
    }
    bins[bin].push_back(item);
    if (room - size > 0) open.emplace(room - size, bin);
  }
  return bins;
}

std::vector<std::int64_t> sft_row_tokens(const SftTokens& tokens, std::int64_t block_size) {
  std::vector<std::int64_t> lengths;
  lengths.reserve(tokens.starts.size());
  for (std::size_t i = 0; i + 1 < tokens.starts.size(); ++i)
    lengths.push_back(std::min(tokens.starts[i + 1] - tokens.starts[i] - 1, block_size));
  return lengths;
}

PackedRows pack_rows(const TensorDataset& unpacked, const std::vector<std::int64_t>& lengths,
                     std::int64_t pad) {
  const Tensor in = unpacked.inputs.contiguous(), tg = unpacked.targets.contiguous();
  GENESIS_CHECK(in.dim() == 2 && in.dtype() == DType::i64 && tg.shape() == in.shape() &&
                    tg.dtype() == DType::i64 &&
                    static_cast<std::int64_t>(lengths.size()) == in.size(0),
                InvalidArgument,
                "pack_rows: inputs and targets must be i64 (N, block_size) with a length per row; "
                "got " + shape_str(in.shape()) + " and " + shape_str(tg.shape()) + " with " +
                    std::to_string(lengths.size()) + " lengths");
  const std::int64_t T = in.size(1);
  PackedRows out;
  out.examples = best_fit_decreasing(lengths, T);
  const auto n = static_cast<std::int64_t>(out.examples.size());
  out.rows.inputs = Tensor::full({n, T}, static_cast<double>(pad), DType::i64);
  out.rows.targets = Tensor::full({n, T}, static_cast<double>(kIgnoreIndex), DType::i64);
  out.rows.extra = Tensor::zeros({n, T}, DType::i64);
  const std::int64_t* src_in = in.data<std::int64_t>();
  const std::int64_t* src_tg = tg.data<std::int64_t>();
  std::int64_t* dst_in = out.rows.inputs.data<std::int64_t>();
  std::int64_t* dst_tg = out.rows.targets.data<std::int64_t>();
  std::int64_t* positions = out.rows.extra.data<std::int64_t>();
  out.row_tokens.reserve(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) {
    std::int64_t at = r * T;
    for (const std::int64_t e : out.examples[static_cast<std::size_t>(r)]) {
      const std::int64_t len = lengths[static_cast<std::size_t>(e)];
      std::copy_n(src_in + e * T, len, dst_in + at);
      std::copy_n(src_tg + e * T, len, dst_tg + at);
      std::iota(positions + at, positions + at + len, std::int64_t{0});
      at += len;
    }
    out.row_tokens.push_back(at - r * T);
    std::iota(positions + at, positions + (r + 1) * T, std::int64_t{0});  // the padding's
  }
  return out;
}

PackedRows pack_sft(const SftTokens& tokens, const std::vector<SftExample>& examples,
                    std::int64_t pad, std::int64_t block_size) {
  const SftEncoding unpacked = sft_rows(tokens, examples, pad, block_size);
  return pack_rows(unpacked.rows, sft_row_tokens(tokens, block_size), pad);
}

}  // namespace genesis::data
