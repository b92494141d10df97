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

struct DistributedSamplerOptions {
  std::uint64_t seed = 0;  // every rank must use the same seed: the ranks cut one permutation
  bool shuffle = true;
  bool drop_last = false;  // true: drop the tail that does not divide evenly; false: pad it by
                           // repeating the permutation's first indices (torch's DistributedSampler)
};

// torch.utils.data.DistributedSampler: epoch e's permutation, made divisible by num_replicas,
// and rank r's shard is every num_replicas-th index starting at r. Shards are disjoint (apart
// from padding), and per-rank batches of B cut from the shards form, step by step, the same
// global batches as one rank cutting batches of num_replicas * B from the permutation.
class DistributedSampler {
 public:
  DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank,
                     DistributedSamplerOptions options = {});
  void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
  std::int64_t epoch() const { return epoch_; }
  std::vector<std::int64_t> indices() const;         // this rank's shard of the current epoch
  std::int64_t num_samples() const { return num_samples_; }  // shard size, the same on every rank

 private:
  std::int64_t size_;
  int num_replicas_;
  int rank_;
  DistributedSamplerOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t num_samples_ = 0;
};

struct BatchSamplerOptions {
  std::int64_t batch_size = 1;  // >= 1
  std::uint64_t seed = 0;       // with the epoch, picks the permutation
  bool shuffle = true;          // false: every epoch visits 0..n-1 in order
  bool drop_last = false;       // true: an epoch's final short batch is skipped
  int num_replicas = 1;         // > 1: batches come from this rank's DistributedSampler shard
  int rank = 0;
};

class BatchSampler {
 public:
  BatchSampler(std::int64_t dataset_size, BatchSamplerOptions options);
  BatchSampler(std::int64_t dataset_size, std::int64_t batch_size, std::uint64_t seed, bool shuffle,
               bool drop_last);

  // The next batch's example indices; crossing an epoch's end starts the next epoch's order.
  std::vector<std::int64_t> next_batch();

  // Where the next batch starts: epoch, and offset into that epoch's permutation (this rank's
  // shard of it when num_replicas > 1).
  std::int64_t epoch() const { return epoch_; }
  std::int64_t position() const { return position_; }
  // Resumes the stream exactly where (epoch, position) left it; position in [0, dataset_size].
  void set_position(std::int64_t epoch, std::int64_t position);

  std::int64_t batches_per_epoch() const;
  std::int64_t dataset_size() const { return dataset_size_; }
  const BatchSamplerOptions& options() const { return options_; }

 private:
  // Moves to the next epoch when what remains of this one cannot form a batch.
  void roll_over_if_done();
  std::vector<std::int64_t> order_of(std::int64_t epoch) const;

  std::int64_t dataset_size_;
  std::int64_t size_;  // examples per epoch on this rank
  BatchSamplerOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t position_ = 0;
  std::vector<std::int64_t> order_;  // epoch_permutation for epoch_
};

}  // namespace genesis::data
