// Seeded epoch permutations and the batch stream over them.
#include "genesis/data/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "genesis/core/error.hpp"
#include "genesis/tensor/random.hpp"
#include "uniform_index.hpp"

namespace genesis::data {

std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                            bool shuffle) {
  GENESIS_CHECK(n >= 0 && epoch >= 0, InvalidArgument,
                "epoch_permutation: n and epoch must be >= 0");
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!shuffle) return order;
  Generator gen(seed + static_cast<std::uint64_t>(epoch));
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[detail::uniform_index(gen, i + 1)]);
  }
  return order;
}

DistributedSampler::DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank,
                                       DistributedSamplerOptions options)
    : size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  GENESIS_CHECK(num_replicas >= 1 && rank >= 0 && rank < num_replicas, InvalidArgument,
                "DistributedSampler: rank " + std::to_string(rank) + " is not in [0, " +
                    std::to_string(num_replicas) + ")");
  GENESIS_CHECK(size_ >= 1, InvalidArgument, "DistributedSampler: the dataset is empty");
  GENESIS_CHECK(!options_.drop_last || size_ >= num_replicas, InvalidArgument,
                "DistributedSampler: drop_last with " + std::to_string(size_) +
                    " examples and " + std::to_string(num_replicas) +
                    " ranks leaves every rank without data");
  num_samples_ = options_.drop_last ? size_ / num_replicas
                                    : (size_ + num_replicas - 1) / num_replicas;
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  std::vector<std::int64_t> order = epoch_permutation(size_, options_.seed, epoch_, options_.shuffle);
  const std::int64_t total = num_samples_ * num_replicas_;
  for (std::int64_t i = 0; static_cast<std::int64_t>(order.size()) < total; ++i)
    order.push_back(order[static_cast<std::size_t>(i % size_)]);
  std::vector<std::int64_t> shard;
  shard.reserve(static_cast<std::size_t>(num_samples_));
  for (std::int64_t i = rank_; i < total; i += num_replicas_) shard.push_back(order[static_cast<std::size_t>(i)]);
  return shard;
}

BatchSampler::BatchSampler(std::int64_t dataset_size, BatchSamplerOptions options)
    : dataset_size_(dataset_size), size_(dataset_size), options_(options) {
  GENESIS_CHECK(size_ >= 1, InvalidArgument, "BatchSampler: the dataset is empty");
  if (options_.num_replicas > 1)
    size_ = DistributedSampler(dataset_size, options_.num_replicas, options_.rank,
                               {options_.seed, options_.shuffle, options_.drop_last})
                .num_samples();
  GENESIS_CHECK(options_.batch_size >= 1, InvalidArgument,
                "BatchSampler: batch_size must be >= 1, got " + std::to_string(options_.batch_size));
  GENESIS_CHECK(!options_.drop_last || options_.batch_size <= size_, InvalidArgument,
                "BatchSampler: drop_last with batch_size " + std::to_string(options_.batch_size) +
                    " larger than the dataset (" + std::to_string(size_) +
                    " examples per rank) would never yield a batch");
  order_ = order_of(0);
}

std::vector<std::int64_t> BatchSampler::order_of(std::int64_t epoch) const {
  if (options_.num_replicas == 1)
    return epoch_permutation(size_, options_.seed, epoch, options_.shuffle);
  DistributedSampler shard(dataset_size_, options_.num_replicas, options_.rank,
                           {options_.seed, options_.shuffle, options_.drop_last});
  shard.set_epoch(epoch);
  return shard.indices();
}

BatchSampler::BatchSampler(std::int64_t dataset_size, std::int64_t batch_size, std::uint64_t seed,
                           bool shuffle, bool drop_last)
    : BatchSampler(dataset_size, BatchSamplerOptions{batch_size, seed, shuffle, drop_last, 1, 0}) {}

std::int64_t BatchSampler::batches_per_epoch() const {
  const std::int64_t b = options_.batch_size;
  return options_.drop_last ? size_ / b : (size_ + b - 1) / b;
}

std::vector<std::int64_t> BatchSampler::next_batch() {
  const std::int64_t end = std::min(size_, position_ + options_.batch_size);
  std::vector<std::int64_t> batch(order_.begin() + position_, order_.begin() + end);
  position_ = end;
  roll_over_if_done();
  return batch;
}

void BatchSampler::set_position(std::int64_t epoch, std::int64_t position) {
  GENESIS_CHECK(epoch >= 0 && position >= 0 && position <= size_, InvalidArgument,
                "BatchSampler: cannot resume at epoch " + std::to_string(epoch) + ", position " +
                    std::to_string(position) + " of " + std::to_string(size_));
  if (epoch != epoch_) order_ = order_of(epoch);
  epoch_ = epoch;
  position_ = position;
  roll_over_if_done();
}

void BatchSampler::roll_over_if_done() {
  const std::int64_t remaining = size_ - position_;
  if (remaining > 0 && !(options_.drop_last && remaining < options_.batch_size)) return;
  ++epoch_;
  position_ = 0;
  order_ = order_of(epoch_);
}

}  // namespace genesis::data
