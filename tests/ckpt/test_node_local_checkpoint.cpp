// Saves whose ranks do not share one checkpoints directory, with ranks as threads that each get
// a directory of their own (as two hosts without a shared run directory would): a shared save
// that fails there keeps every rank's shard in rescued-step-N/ of its own directory and says
// where; a node-local save keeps each node's shards, its part manifest and the step's manifest
// on that node, and the newest step every node holds is assembled whole on each node.
#include <catch2/catch.hpp>

#include <fstream>
#include <mutex>
#include <set>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/node_local.hpp"
#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "support/thread_ranks.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using ckpt::StatePiece;

// "w" (3x4 f32) split 5 / 7 over the two ranks, "b" whole on rank 1.
std::vector<StatePiece> pieces_of(int rank, std::int64_t step) {
  std::vector<float> w(12);
  for (int i = 0; i < 12; ++i) w[i] = static_cast<float>(i) + 0.5f * static_cast<float>(step);
  if (rank == 0)
    return {{"model.w", {3, 4}, 0,
             Tensor::from_vector(std::vector<float>(w.begin(), w.begin() + 5), {5})}};
  return {{"model.w", {3, 4}, 5, Tensor::from_vector(std::vector<float>(w.begin() + 5, w.end()), {7})},
          {"model.b", {2}, 0, Tensor::from_vector(std::vector<float>{-1.0f, 2.0f}, {2})}};
}

// Rank r's own checkpoints directory: "host<r>/checkpoints" under `root`.
fs::path own_dir(const fs::path& root, int rank) {
  return root / ("host" + std::to_string(rank)) / "checkpoints";
}

// Two ranks on two nodes, each saving into its own directory, node-local.
void save_node_local(const fs::path& root, std::int64_t step) {
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    const ckpt::Nodes nodes = ckpt::gather_nodes(*group, rank, "host" + std::to_string(rank));
    ckpt::save_checkpoint({.checkpoints_dir = own_dir(root, rank), .step = step,
                           .strategy = "zero2", .config_toml = "name = \"t\"\n",
                           .nodes = &nodes},
                          pieces_of(rank, step), {{"rank", rank}}, *group);
  });
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("a save that fails keeps every rank's shard in its own directory and says where",
          "[ckpt]") {
  testing::TempDir dir;
  std::mutex mutex;
  std::vector<std::string> errors;
  // Rank 1 does not see rank 0's directory: rank 0 prepares .tmp-step-3 where rank 1 cannot
  // write, as on two hosts that do not share the run directory.
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    try {
      ckpt::save_checkpoint({.checkpoints_dir = own_dir(dir.path(), rank), .step = 3,
                             .strategy = "zero2"},
                            pieces_of(rank, 3), {{"rank", rank}}, *group);
    } catch (const IoError& e) {
      std::lock_guard lock(mutex);
      errors.push_back(e.what());
    }
  });
  REQUIRE(errors.size() == 2);
  // The same error on both, but for the directory each rank was given (its own here).
  const auto tail = [](const std::string& e) { return e.substr(e.find("': rank 1: ")); };
  CHECK(tail(errors[0]) == tail(errors[1]));
  INFO(errors[0]);
  CHECK_THAT(errors[0], Catch::Contains("rank 1: ") && Catch::Contains("cannot open"));
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path rescued = own_dir(dir.path(), rank) / "rescued-step-3";
    const std::string file = "rank-0000" + std::to_string(rank) + ".safetensors";
    CHECK_THAT(errors[0], Catch::Contains("rank " + std::to_string(rank) + " on ") &&
                              Catch::Contains(fs::absolute(rescued / file).string()));
    REQUIRE(fs::exists(rescued / file));
    const ckpt::SafetensorsFile kept = ckpt::load_safetensors(rescued / file);
    CHECK(kept.tensors.size() == pieces_of(rank, 3).size());
    CHECK(kept.tensors[0].second.to_vector() ==
          pieces_of(rank, 3)[0].data.to_vector());
    std::ifstream index(rescued / ("rank-0000" + std::to_string(rank) + ".json"));
    CHECK(nlohmann::json::parse(index)["state"]["rank"] == rank);
    // Not a checkpoint, and not a leftover that the next save would remove.
    CHECK(ckpt::list_checkpoints(own_dir(dir.path(), rank)).empty());
    CHECK(ckpt::list_leftovers(own_dir(dir.path(), rank)).empty());
  }
}

TEST_CASE("node-local checkpoints: each node keeps its own shards and the step's manifest",
          "[ckpt]") {
  testing::TempDir dir;
  save_node_local(dir.path(), 2);
  save_node_local(dir.path(), 4);
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path root = own_dir(dir.path(), rank);
    INFO("node " << rank);
    CHECK(ckpt::read_latest(root) == root / "step-4");
    CHECK(names_in(root / "step-4") ==
          std::set<std::string>{"manifest.json", "node-" + std::to_string(rank) + ".json",
                                "rank-0000" + std::to_string(rank) + ".safetensors"});
    const ckpt::Checkpoint c(root / "step-4");
    CHECK(c.manifest().world_size == 2);
    CHECK(c.manifest().files.size() == 2);
    CHECK(c.manifest().info["node_local"][1]["host"] == "host1");
    CHECK(c.manifest().info["node_local"][1]["ranks"] == nlohmann::json::array({1}));
  }

  // Node 1 lost step 4's manifest (it never committed it): step 2 is the newest both hold.
  fs::remove(own_dir(dir.path(), 1) / "step-4" / "manifest.json");
  std::mutex mutex;
  std::vector<std::optional<std::int64_t>> common(2);
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    const ckpt::Nodes nodes = ckpt::gather_nodes(*group, rank, "host" + std::to_string(rank));
    const fs::path root = own_dir(dir.path(), rank);
    const ckpt::NodeLocalSteps steps = ckpt::find_node_local_steps(root, nodes, *group);
    common[static_cast<std::size_t>(rank)] = steps.newest_common;
    if (!steps.newest_common) return;
    const fs::path whole = ckpt::assemble_node_local(root, *steps.newest_common, steps, nodes, *group);
    const ckpt::Checkpoint c(whole);
    c.verify();  // every shard, the other node's received over the group
    std::lock_guard lock(mutex);
    CHECK(c.read_full("model.w").to_vector()[11] == 12.0f);  // 11 + 0.5 x 2
    CHECK(whole.filename() == ".tmp-step-2.node-" + std::to_string(rank));
  });
  CHECK(common[0] == std::optional<std::int64_t>(2));
  CHECK(common[1] == std::optional<std::int64_t>(2));
}

}  // namespace genesis
