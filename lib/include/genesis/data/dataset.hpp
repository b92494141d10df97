// In-memory datasets: an inputs tensor and a targets tensor whose first dim indexes examples, and
// row gathering to form a batch. Datasets live on the host; a batch moves to its device after it
// is gathered. Loading from files is left to the tokenizer/jsonl readers.
#pragma once

#include <cstdint>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::data {

struct TensorDataset {
  Tensor inputs;   // (N, ...) any dtype
  Tensor targets;  // (N, ...) any dtype
  // (N, ...) values computed for each row and carried with it (DPO's precomputed reference
  // log-probabilities); undefined: none.
  Tensor extra{};
  std::int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

// A new dataset holding rows `rows` of `dataset` in that order, as fresh contiguous host tensors.
// Rows may repeat; each must be in [0, dataset.size()), else InvalidArgument.
TensorDataset take_rows(const TensorDataset& dataset, const std::vector<std::int64_t>& rows);

}  // namespace genesis::data
