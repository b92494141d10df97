// Packing SFT examples into training rows (data.packing): each row of block_size tokens holds
// whole examples one after another, placed by best-fit decreasing, instead of one example and
// padding. Each token carries its position within its example, from which the model restarts its
// position embeddings and keeps attention inside the example. Not here: the attention mask itself
// (ops/ops.hpp, scaled_dot_product_attention's positions) and evaluation rows, which stay one
// example per row so that generation can start from each prompt.
#pragma once

#include <cstdint>
#include <vector>

#include "genesis/data/dataset.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::data {

// Terms: an *item* has a size in [1, capacity]; a *bin* holds items whose sizes add up to at most
// capacity. Items are taken longest first (equal sizes in index order), each into the open bin
// with the least room that still fits it (equal rooms: the bin opened first), or else into a new
// bin. Returns each bin's items in the order placed, bins in the order opened. InvalidArgument
// for a size outside [1, capacity].
std::vector<std::vector<std::int64_t>> best_fit_decreasing(const std::vector<std::int64_t>& sizes,
                                                           std::int64_t capacity);

// The input tokens each of sft_rows' rows holds before its padding: an example of n tokens gives
// n - 1 inputs (its last token is only a target), at most block_size (a truncated example).
std::vector<std::int64_t> sft_row_tokens(const SftTokens& tokens, std::int64_t block_size);

struct PackedRows {
  // inputs, targets and (extra) positions, i64 (rows, block_size). An example's inputs and
  // targets are its own row's first tokens unchanged, so its loss targets are exactly those of
  // the unpacked row: the next token of the same example, never one of the example after it.
  // positions count from 0 at each example's first token; the padding at a row's end counts
  // from 0 too, as one more sequence whose targets are all ignored.
  TensorDataset rows;
  std::vector<std::int64_t> row_tokens;  // each row's inputs that are not padding
  // Each row's examples, as indices of the unpacked rows, in the order they sit in the row.
  std::vector<std::vector<std::int64_t>> examples;
};

// Packs rows of one example each (sft_rows' layout: example i's lengths[i] tokens at the start of
// row i, padding after) into as few rows of the same width as best-fit decreasing finds; `pad`
// fills what is left of each row. InvalidArgument for a length outside [1, block_size].
PackedRows pack_rows(const TensorDataset& unpacked, const std::vector<std::int64_t>& lengths,
                     std::int64_t pad);

// sft_rows, then pack_rows over them: the rows data.packing trains on.
PackedRows pack_sft(const SftTokens& tokens, const std::vector<SftExample>& examples,
                    std::int64_t pad, std::int64_t block_size);

}  // namespace genesis::data
