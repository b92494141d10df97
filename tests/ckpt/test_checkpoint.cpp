// The checkpoint writer and reader below the trainer: a 2-rank save (ranks as threads) with
// tensors split across ranks reads back exactly through any element range; `latest`, pruning,
// the leftovers of cut-short saves and deletes, and re-saving a step; a failure on one rank fails
// the save on every rank and leaves `latest` alone; damaged manifests and shards name the file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/string_collectives.hpp"
#include "support/cli_run.hpp"
#include "support/thread_ranks.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using ckpt::StatePiece;

// "w" (3x4 f32 = 0..11) split 5 / 7 over the ranks, "b" whole on rank 1, "n" (i64 scalar) on 0.
std::vector<StatePiece> pieces_of(int rank, std::int64_t step) {
  std::vector<float> w(12);
  for (int i = 0; i < 12; ++i) w[i] = static_cast<float>(i) + 0.5f * static_cast<float>(step);
  std::vector<StatePiece> out;
  if (rank == 0) {
    out.push_back({"model.w", {3, 4}, 0,
                   Tensor::from_vector(std::vector<float>(w.begin(), w.begin() + 5), {5})});
    out.push_back({"optimizer.w.step", {}, 0, Tensor::full({}, static_cast<double>(step), DType::i64)});
  } else {
    out.push_back({"model.w", {3, 4}, 5,
                   Tensor::from_vector(std::vector<float>(w.begin() + 5, w.end()), {7})});
    out.push_back({"model.b", {2}, 0, Tensor::from_vector(std::vector<float>{-1.0f, 2.0f}, {2})});
  }
  return out;
}

void save_2_ranks(const fs::path& root, std::int64_t step, int keep_last = 0) {
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    ckpt::SaveOptions options{.checkpoints_dir = root, .step = step, .strategy = "zero2",
                              .config_toml = "name = \"t\"\n", .info = {{"loss", 0.25}},
                              .keep_last = keep_last};
    ckpt::save_checkpoint(options, pieces_of(rank, step), {{"rank", rank}}, *group);
  });
}

TEST_CASE("a 2-rank checkpoint reads back through any element range", "[ckpt]") {
  testing::TempDir dir;
  save_2_ranks(dir.path(), 3);
  REQUIRE(ckpt::read_latest(dir.path()) == dir.path() / "step-3");
  ckpt::Checkpoint c(dir.path() / "step-3");
  c.verify();
  CHECK(c.manifest().world_size == 2);
  CHECK(c.manifest().strategy == "zero2");
  CHECK(c.manifest().ranks[1]["rank"] == 1);
  CHECK(c.manifest().info["loss"] == 0.25);
  CHECK(c.manifest().tensors.at("model.w").shards.size() == 2);
  CHECK(c.names("model.") == std::vector<std::string>{"model.b", "model.w"});
  CHECK(c.shape("model.w") == Shape{3, 4});
  const std::vector<float> across = c.read("model.w", 3, 5).to_vector();  // spans both files
  CHECK(across == std::vector<float>{4.5f, 5.5f, 6.5f, 7.5f, 8.5f});
  CHECK(c.read_full("model.w").shape() == Shape{3, 4});
  CHECK(c.read_full("optimizer.w.step").item<std::int64_t>() == 3);
  CHECK_THROWS_AS(c.read("model.w", 10, 5), InvalidArgument);
  CHECK_THROWS_AS(c.read("model.nothing", 0, 1), InvalidArgument);
}

TEST_CASE("latest names the newest save, save_total_limit prunes the oldest, a step can be re-saved",
          "[ckpt]") {
  testing::TempDir dir;
  for (std::int64_t step = 1; step <= 4; ++step) save_2_ranks(dir.path(), step, 2);
  CHECK(ckpt::list_checkpoints(dir.path()) ==
        std::vector<fs::path>{dir.path() / "step-3", dir.path() / "step-4"});
  CHECK(ckpt::read_latest(dir.path()) == dir.path() / "step-4");
  save_2_ranks(dir.path(), 4, 2);  // the same step again: replaced in place
  ckpt::Checkpoint(dir.path() / "step-4").verify();
  CHECK(ckpt::resolve_checkpoint(dir.path()) == dir.path() / "step-4");
  CHECK(ckpt::resolve_checkpoint(dir.path() / "latest") == dir.path() / "step-4");
  for (const auto& e : fs::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
}

TEST_CASE("the next save removes the leftovers of interrupted saves and deletes", "[ckpt]") {
  testing::TempDir dir;
  const fs::path& root = dir.path();
  for (std::int64_t step = 1; step <= 2; ++step) save_2_ranks(root, step, 2);
  // What kills leave: a delete by rename cut short (.del-step-0, its manifest already gone), a
  // delete in place by an older genesis (step-7: shards, no manifest), a save before its commit.
  for (const char* name : {".del-step-0", "step-7", ".tmp-step-9"}) {
    fs::create_directory(root / name);
    fs::copy_file(root / "step-1" / "rank-00000.safetensors", root / name / "rank-00000.safetensors");
  }
  fs::copy_file(root / "step-1" / "manifest.json", root / ".tmp-step-9" / "manifest.json");
  CHECK(ckpt::list_leftovers(root) ==
        std::vector<fs::path>{root / ".del-step-0", root / ".tmp-step-9", root / "step-7"});
  CHECK(ckpt::list_checkpoints(root) == std::vector<fs::path>{root / "step-1", root / "step-2"});

  save_2_ranks(root, 3, 2);  // commits step-3, then prunes step-1 and every leftover
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(root)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"latest", "step-2", "step-3"});
  CHECK(ckpt::list_leftovers(root).empty());
}

TEST_CASE("a failure on one rank fails the save on every rank, keeps latest and leaves no partial",
          "[ckpt]") {
  testing::TempDir dir;
  save_2_ranks(dir.path(), 1);
  std::mutex mutex;
  std::vector<std::string> errors;
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    auto pieces = pieces_of(rank, 2);
    if (rank == 1) pieces[0].offset = 9;  // 7 elements from 9 overrun the 12 of model.w
    try {
      ckpt::save_checkpoint({.checkpoints_dir = dir.path(), .step = 2, .strategy = "ddp"}, pieces,
                            {}, *group);
    } catch (const IoError& e) {
      std::lock_guard lock(mutex);
      errors.push_back(e.what());
    }
  });
  REQUIRE(errors.size() == 2);
  CHECK_THAT(errors[0], Catch::Contains("rank 1") && Catch::Contains("outside"));
  CHECK(errors[0] == errors[1]);
  CHECK(ckpt::read_latest(dir.path()) == dir.path() / "step-1");
  CHECK_FALSE(fs::exists(dir.path() / "step-2"));
  // Rank 0's file of the failed save is gone with its directory: on a full disk it would keep
  // the space that ran out.
  CHECK_THAT(errors[0], Catch::Contains("; the unfinished checkpoint was removed"));
  CHECK(ckpt::list_leftovers(dir.path()).empty());
}

TEST_CASE("damaged checkpoints are errors that name the file", "[ckpt]") {
  testing::TempDir dir;
  save_2_ranks(dir.path(), 1);
  const fs::path step = dir.path() / "step-1";
  SECTION("a flipped byte in a shard") {
    const fs::path shard = step / "rank-00001.safetensors";
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    f.seekp(-3, std::ios::end);
    f.write(&byte, 1);
    f.close();
    ckpt::Checkpoint c(step);
    CHECK_THROWS_WITH(c.verify(), Catch::Contains("rank-00001.safetensors") && Catch::Contains("checksum"));
    CHECK_THROWS_AS(ckpt::Checkpoint(step).read_full("model.b"), IoError);
    CHECK(ckpt::Checkpoint(step).read_full("optimizer.w.step").item<std::int64_t>() == 1);  // rank 0's file is fine
  }
  SECTION("a truncated shard") {
    fs::resize_file(step / "rank-00000.safetensors", 40);
    CHECK_THROWS_WITH(ckpt::Checkpoint(step).verify(),
                      Catch::Contains("rank-00000.safetensors") && Catch::Contains("bytes"));
  }
  SECTION("a truncated manifest") {
    fs::resize_file(step / "manifest.json", 100);
    CHECK_THROWS_WITH(ckpt::Checkpoint{step}, Catch::Contains("manifest.json") && Catch::Contains("JSON"));
  }
  SECTION("not a checkpoint at all") {
    CHECK_THROWS_WITH(ckpt::resolve_checkpoint(dir.path() / ".."), Catch::Contains("is not a checkpoint"));
    CHECK_THROWS_WITH(ckpt::Checkpoint{dir.path()}, Catch::Contains("is not a checkpoint"));
  }
}

TEST_CASE("manifests whose shards do not cover a tensor exactly once are rejected", "[ckpt]") {
  testing::TempDir dir;
  save_2_ranks(dir.path(), 1);
  std::ifstream in(dir.path() / "step-1" / "manifest.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["tensors"]["model.w"]["shards"][1]["offset"] = 4;  // overlaps the first shard
  CHECK_THROWS_WITH(ckpt::manifest_from_json(j, "m"), Catch::Contains("model.w") && Catch::Contains("once"));
  j["tensors"]["model.w"]["shards"][1]["offset"] = 5;
  j["files"][0]["name"] = "../escape";
  CHECK_THROWS_WITH(ckpt::manifest_from_json(j, "m"), Catch::Contains("bad file name"));
}

TEST_CASE("strings of different lengths are gathered and broadcast intact", "[ckpt]") {
  std::vector<std::vector<std::string>> gathered(3);
  std::vector<std::string> broadcast(3);
  testing::run_ranks(3, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 3, store);
    const std::string mine = rank == 1 ? "" : std::string(static_cast<std::size_t>(9 + rank), 'a' + rank);
    gathered[rank] = dist::all_gather_strings(*group, mine);
    broadcast[rank] = dist::broadcast_string(*group, rank == 2 ? "from two" : "", 2);
  });
  for (int r = 0; r < 3; ++r) {
    CHECK(gathered[r] == std::vector<std::string>{"aaaaaaaaa", "", "ccccccccccc"});
    CHECK(broadcast[r] == "from two");
  }
}

}  // namespace
}  // namespace genesis
