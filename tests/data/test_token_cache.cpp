// The token cache as a run relies on it: an entry is built once and read after, by every caller
// with the same key; a damaged entry is rebuilt, not trusted; and `genesis train` on a jsonl file
// says on its second start that it read the cache instead of tokenizing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "genesis/data/token_cache.hpp"
#include "genesis/tensor/tensor.hpp"
#include "support/cli_run.hpp"

using namespace genesis;
namespace fs = std::filesystem;

namespace {

data::CachedRows rows_of(std::int64_t first) {
  data::CachedRows rows;
  rows.tensors.emplace_back("train.inputs",
                            Tensor::from_vector(std::vector<std::int64_t>{first, 2, 3, 4}, {2, 2}));
  rows.facts["truncated"] = "1";
  return rows;
}

}  // namespace

TEST_CASE("a token cache entry is built once, read after, and rebuilt when damaged") {
  testing::TempDir dir;
  const data::TokenCache cache(dir.path());
  int builds = 0;
  auto build = [&] {
    ++builds;
    return rows_of(7);
  };
  data::CacheOutcome outcome{};
  CHECK(cache.get_or_build("key a", build, outcome).facts.at("truncated") == "1");
  CHECK(outcome == data::CacheOutcome::kBuilt);
  const data::CachedRows again = cache.get_or_build("key a", build, outcome);
  CHECK(outcome == data::CacheOutcome::kHit);
  CHECK(builds == 1);
  REQUIRE(again.tensors.size() == 1);
  const std::int64_t* ids = again.tensors[0].second.data<std::int64_t>();
  CHECK(std::vector<std::int64_t>(ids, ids + 4) == std::vector<std::int64_t>{7, 2, 3, 4});
  CHECK(again.facts.at("truncated") == "1");

  cache.get_or_build("key b", build, outcome);  // another key: another entry
  CHECK(builds == 2);
  CHECK(cache.entry_path("key a") != cache.entry_path("key b"));

  // A flipped byte in the last token: the checksum sees it and the entry is built again.
  const fs::path entry = cache.entry_path("key a");
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x55');
  }
  cache.get_or_build("key a", build, outcome);
  CHECK(outcome == data::CacheOutcome::kRebuilt);
  CHECK(builds == 3);
  // A truncated file too.
  fs::resize_file(entry, 10);
  cache.get_or_build("key a", build, outcome);
  CHECK(outcome == data::CacheOutcome::kRebuilt);
  cache.get_or_build("key a", build, outcome);
  CHECK(outcome == data::CacheOutcome::kHit);
  CHECK(data::file_fingerprint(entry).size() == 16);
}

TEST_CASE("a second run on the same jsonl data reads the token cache") {
  testing::TempDir dir;
  auto train = [&](const std::string& name) {
    return testing::run_genesis(
        {"train", "--preset", "sft", "-o", (dir.path() / "runs").string(), "--name", name,
         "--set", "data.source=jsonl:sft-sample.jsonl", "--set",
         "data.cache_dir=" + (dir.path() / "cache").string(), "--set", "training.max_steps=1",
         "--set", "training.eval_batches=1", "--set", "model.block_size=64"});
  };
  const testing::CliResult first = train("a");
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out + first.err, Catch::Contains("token cache miss: "));
  const testing::CliResult second = train("b");
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.out + second.err, Catch::Contains("token cache hit: "));
}
