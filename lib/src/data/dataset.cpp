// Row gathering for TensorDataset: one memcpy per row and tensor, whatever the dtype.
#include "genesis/data/dataset.hpp"

#include <cstring>
#include <string>

#include "genesis/core/error.hpp"

namespace genesis::data {

namespace {

Tensor gather_rows(const Tensor& source, const std::vector<std::int64_t>& rows, const char* what) {
  GENESIS_CHECK(source.defined() && source.dim() >= 1, InvalidArgument,
                std::string("take_rows: dataset ") + what + " must be a tensor with a row dim");
  GENESIS_CHECK(source.device().is_cpu(), InvalidArgument,
                std::string("take_rows: dataset ") + what + " must live on the host, not " +
                    source.device().str());
  const Tensor src = source.detach().contiguous();
  const std::int64_t n = src.size(0);
  Shape shape = src.shape();
  shape[0] = static_cast<std::int64_t>(rows.size());
  Tensor out = Tensor::empty(shape, src.dtype());
  const std::size_t row_bytes =
      static_cast<std::size_t>(n == 0 ? 0 : src.numel() / n) * dtype_size(src.dtype());
  const char* from = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::int64_t r = rows[k];
    GENESIS_CHECK(r >= 0 && r < n, InvalidArgument,
                  "take_rows: row " + std::to_string(r) + " out of range for " +
                      std::to_string(n) + " examples");
    std::memcpy(to + k * row_bytes, from + r * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace

TensorDataset take_rows(const TensorDataset& dataset, const std::vector<std::int64_t>& rows) {
  GENESIS_CHECK(dataset.inputs.defined() && dataset.targets.defined() &&
                    dataset.inputs.dim() >= 1 && dataset.targets.dim() >= 1 &&
                    dataset.inputs.size(0) == dataset.targets.size(0),
                InvalidArgument, "take_rows: inputs and targets must have the same number of rows");
  GENESIS_CHECK(!dataset.extra.defined() ||
                    (dataset.extra.dim() >= 1 && dataset.extra.size(0) == dataset.inputs.size(0)),
                InvalidArgument, "take_rows: extra must have a row per input row");
  return {gather_rows(dataset.inputs, rows, "inputs"), gather_rows(dataset.targets, rows, "targets"),
          dataset.extra.defined() ? gather_rows(dataset.extra, rows, "extra") : Tensor()};
}

}  // namespace genesis::data
