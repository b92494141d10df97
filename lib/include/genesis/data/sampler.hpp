// Batch sampling over a dataset, epoch after epoch without end. The order of epoch e is a pure
// function of (seed, e), so a run resumes from (epoch, position) alone and a distributed sampler can
// cut the very same permutation into per-rank shards.
#pragma once

#include <cstdint>
#include <vector>

namespace genesis::data {

// The visiting order of epoch `epoch` over n examples: 0..n-1 when !shuffle, else a Fisher-Yates
// shuffle driven by Generator(seed + epoch).
std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                            bool shuffle);

struct BatchSamplerOptions {
  std::int64_t batch_size = 1;  // >= 1
  std::uint64_t seed = 0;       // with the epoch, picks the permutation
  bool shuffle = true;          // false: every epoch visits 0..n-1 in order
  bool drop_last = false;       // true: an epoch's final short batch is skipped
};

class BatchSampler {
 public:
  BatchSampler(std::int64_t dataset_size, BatchSamplerOptions options);
  BatchSampler(std::int64_t dataset_size, std::int64_t batch_size, std::uint64_t seed, bool shuffle,
               bool drop_last);

  // The next batch's example indices; crossing an epoch's end starts the next epoch's order.
  std::vector<std::int64_t> next_batch();

  // Where the next batch starts: epoch, and offset into that epoch's permutation.
  std::int64_t epoch() const { return epoch_; }
  std::int64_t position() const { return position_; }
  // Resumes the stream exactly where (epoch, position) left it; position in [0, dataset_size].
  void set_position(std::int64_t epoch, std::int64_t position);

  std::int64_t batches_per_epoch() const;
  std::int64_t dataset_size() const { return size_; }
  const BatchSamplerOptions& options() const { return options_; }

 private:
  // Moves to the next epoch when what remains of this one cannot form a batch.
  void roll_over_if_done();

  std::int64_t size_;
  BatchSamplerOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t position_ = 0;
  std::vector<std::int64_t> order_;  // epoch_permutation for epoch_
};

}  // namespace genesis::data
