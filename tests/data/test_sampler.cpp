// BatchSampler: each epoch visits every index once, the stream is a pure function of the seed,
// set_position resumes it exactly, and drop_last trims the short final batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "genesis/core/error.hpp"
#include "genesis/data/sampler.hpp"

using namespace genesis;
using namespace genesis::data;

TEST_CASE("epoch_permutation is a seeded permutation that changes per epoch", "[data]") {
  std::vector<std::int64_t> p0 = epoch_permutation(100, 7, 0, true);
  std::vector<std::int64_t> sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> iota(100);
  std::iota(iota.begin(), iota.end(), 0);
  REQUIRE(sorted == iota);
  REQUIRE(p0 != iota);
  REQUIRE(p0 == epoch_permutation(100, 7, 0, true));
  REQUIRE(p0 != epoch_permutation(100, 7, 1, true));
  REQUIRE(p0 != epoch_permutation(100, 8, 0, true));
  REQUIRE(epoch_permutation(100, 8, 3, false) == iota);
  REQUIRE(epoch_permutation(0, 1, 0, true).empty());
}

TEST_CASE("BatchSampler covers every index once per epoch and walks epochs forever", "[data]") {
  BatchSampler s(10, 4, 1, true, false);
  REQUIRE(s.batches_per_epoch() == 3);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    REQUIRE(s.epoch() == epoch);
    std::vector<std::int64_t> seen;
    for (std::int64_t sizes : {4, 4, 2}) {
      std::vector<std::int64_t> b = s.next_batch();
      REQUIRE(static_cast<std::int64_t>(b.size()) == sizes);
      seen.insert(seen.end(), b.begin(), b.end());
    }
    REQUIRE(seen == epoch_permutation(10, 1, epoch, true));
  }
}

TEST_CASE("BatchSampler with drop_last skips the short final batch", "[data]") {
  BatchSampler s(10, 4, 1, false, true);
  REQUIRE(s.batches_per_epoch() == 2);
  REQUIRE(s.next_batch() == std::vector<std::int64_t>{0, 1, 2, 3});
  REQUIRE(s.next_batch() == std::vector<std::int64_t>{4, 5, 6, 7});
  REQUIRE(s.epoch() == 1);  // 8 and 9 are never visited
  REQUIRE(s.next_batch() == std::vector<std::int64_t>{0, 1, 2, 3});
  REQUIRE_THROWS_AS(BatchSampler(3, 4, 0, true, true), InvalidArgument);
  REQUIRE_THROWS_AS(BatchSampler(3, 0, 0, true, false), InvalidArgument);
  REQUIRE_THROWS_AS(BatchSampler(0, 1, 0, true, false), InvalidArgument);
  BatchSampler small(3, 4, 0, true, false);
  REQUIRE(small.next_batch().size() == 3);
}

TEST_CASE("BatchSampler is reproducible and resumes from (epoch, position)", "[data]") {
  BatchSampler a(23, 5, 99, true, false), b(23, 5, 99, true, false);
  std::vector<std::vector<std::int64_t>> stream;
  for (int i = 0; i < 20; ++i) {
    stream.push_back(a.next_batch());
    REQUIRE(b.next_batch() == stream.back());
  }
  // Stop after 7 batches, save the position, resume in a fresh sampler.
  BatchSampler first(23, 5, 99, true, false);
  for (int i = 0; i < 7; ++i) first.next_batch();
  const std::int64_t epoch = first.epoch(), position = first.position();
  REQUIRE(epoch == 1);
  REQUIRE(position == 10);
  BatchSampler resumed(23, 5, 99, true, false);
  resumed.set_position(epoch, position);
  for (int i = 7; i < 20; ++i) REQUIRE(resumed.next_batch() == stream[i]);
  REQUIRE_THROWS_AS(resumed.set_position(0, 24), InvalidArgument);
  resumed.set_position(2, 23);  // the end of an epoch is the start of the next
  REQUIRE(resumed.epoch() == 3);
  REQUIRE(resumed.position() == 0);
}

TEST_CASE("DistributedSampler: disjoint shards that cover the epoch, padded or dropped",
          "[sampler][distributed]") {
  using genesis::data::DistributedSampler;
  for (bool drop_last : {false, true}) {
    std::vector<std::int64_t> all;
    for (int r = 0; r < 3; ++r) {
      DistributedSampler s(10, 3, r, {.seed = 5, .shuffle = true, .drop_last = drop_last});
      auto shard = s.indices();
      CHECK(static_cast<std::int64_t>(shard.size()) == s.num_samples());
      CHECK(s.num_samples() == (drop_last ? 3 : 4));
      all.insert(all.end(), shard.begin(), shard.end());
    }
    std::sort(all.begin(), all.end());
    const auto distinct = std::unique(all.begin(), all.end()) - all.begin();
    // 10 examples over 3 ranks: padding repeats 2 (all 10 seen), dropping leaves 9 distinct.
    CHECK(distinct == (drop_last ? 9 : 10));
    CHECK(all.size() == (drop_last ? 9u : 12u));
  }
}

TEST_CASE("DistributedSampler: set_epoch reshuffles identically on every rank",
          "[sampler][distributed]") {
  using genesis::data::DistributedSampler;
  DistributedSampler a(100, 2, 0, {.seed = 1}), b(100, 2, 1, {.seed = 1});
  auto a0 = a.indices(), b0 = b.indices();
  a.set_epoch(1);
  b.set_epoch(1);
  CHECK(a.indices() != a0);
  auto perm = genesis::data::epoch_permutation(100, 1, 1, true);
  for (std::size_t i = 0; i < 50; ++i) {
    CHECK(a.indices()[i] == perm[2 * i]);
    CHECK(b.indices()[i] == perm[2 * i + 1]);
  }
  CHECK_THROWS_WITH(DistributedSampler(10, 2, 2), Catch::Contains("rank 2 is not in [0, 2)"));
}

TEST_CASE("BatchSampler over shards: N ranks with batch B form the 1-rank batches of N*B",
          "[sampler][distributed]") {
  using genesis::data::BatchSampler;
  const int world = 3;
  const std::int64_t batch = 4, n = 50;
  BatchSampler single(n, {.batch_size = world * batch, .seed = 9, .shuffle = true, .drop_last = true});
  std::vector<BatchSampler> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back(n, genesis::data::BatchSamplerOptions{.batch_size = batch, .seed = 9,
                                                            .shuffle = true, .drop_last = true,
                                                            .num_replicas = world, .rank = r});
  CHECK(ranks[0].batches_per_epoch() == single.batches_per_epoch());
  for (int step = 0; step < 10; ++step) {  // crosses two epoch boundaries
    auto expected = single.next_batch();
    std::vector<std::int64_t> got;
    for (auto& s : ranks) {
      auto b = s.next_batch();
      got.insert(got.end(), b.begin(), b.end());
    }
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    CHECK(got == expected);
  }
}
