// The asynchronous save below the trainer (ckpt::AsyncSave), 2 ranks as threads: it writes the
// state as it was when the save started, whatever training does to it after before_update(); nothing is
// committed before a poll or finish finds every rank's write done; a write that fails is an
// error of every rank at that poll, with `latest` untouched; a save still in flight when its
// owner goes is never committed, and the next save clears what it left.
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <thread>

#include "genesis/ckpt/async_save.hpp"
#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "support/scoped_env.hpp"
#include "support/thread_ranks.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using ckpt::StatePiece;

// Rank r's live state: 1000 floats r*1000 + i, saved as model.w's elements [r*1000, r*1000+1000).
Tensor live_state(int rank) {
  std::vector<float> values(1000);
  for (int i = 0; i < 1000; ++i) values[i] = static_cast<float>(rank * 1000 + i);
  return Tensor::from_vector(values, {1000});
}

std::vector<StatePiece> pieces_of(const Tensor& live, int rank) {
  return {{"model.w", {2000}, rank * 1000, live}};
}

ckpt::SaveOptions options_for(const fs::path& root, std::int64_t step) {
  return {.checkpoints_dir = root, .step = step, .strategy = "zero2", .config_toml = "name = \"t\"\n"};
}

// Polls (collectively: each rank calls it as often as the other) until the save commits.
fs::path poll_until_committed(ckpt::AsyncSave& save) {
  for (int i = 0; i < 20000; ++i) {
    if (std::optional<fs::path> dir = save.poll()) return *dir;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL("the save never committed");
  return {};
}

}  // namespace

TEST_CASE("an asynchronous save writes the state as it started and commits once every rank wrote",
          "[ckpt]") {
  testing::TempDir dir;
  testing::ScopedEnv pause("GENESIS_TEST_PAUSE_SAVE", "write:1:300");
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    Tensor live = live_state(rank);
    ckpt::AsyncSave save(*group);
    // The write waits 300 ms before its file: the update below comes before any piece is written.
    save.start(options_for(dir.path(), 1), pieces_of(live, rank), {{"rank", rank}});
    // Training goes on and updates the state while it is written: what is not written yet is
    // copied first.
    save.before_update();
    CHECK(save.copied_bytes() == 4000);
    CHECK(save.buffer_bytes() >= 4000);
    live.fill_(-1.0);
    CHECK(save.in_flight());
    // Nothing is committed before a poll or finish finds every rank done.
    CHECK_FALSE(ckpt::read_latest(dir.path()));
    CHECK_FALSE(fs::exists(dir.path() / "step-1"));
    CHECK(poll_until_committed(save) == dir.path() / "step-1");
    CHECK_FALSE(save.in_flight());
    CHECK_FALSE(save.poll());  // nothing in flight: no collective, nothing committed

    // A second save of the same layout writes the new values, from the same buffers if it has
    // to copy them.
    const std::int64_t mapped = save.buffer_bytes();
    live.fill_(static_cast<double>(rank + 7));
    save.start(options_for(dir.path(), 2), pieces_of(live, rank), {{"rank", rank}});
    save.before_update();  // copies what is left, if anything
    live.fill_(-2.0);
    CHECK(save.finish() == dir.path() / "step-2");
    CHECK(save.buffer_bytes() == mapped);
  });
  CHECK(ckpt::read_latest(dir.path()) == dir.path() / "step-2");
  const ckpt::Checkpoint first(dir.path() / "step-1");
  REQUIRE_NOTHROW(first.verify());
  const Tensor w = first.read_full("model.w");
  for (std::int64_t i : {0, 999, 1000, 1999})
    CHECK(w.data<float>()[i] == static_cast<float>(i));
  CHECK(first.manifest().ranks.at(1) == nlohmann::json{{"rank", 1}});
  const Tensor w2 = ckpt::Checkpoint(dir.path() / "step-2").read_full("model.w");
  CHECK(w2.data<float>()[0] == 7.0f);
  CHECK(w2.data<float>()[1999] == 8.0f);
}

TEST_CASE("a background write that fails is an error of every rank at the next poll",
          "[ckpt]") {
  testing::TempDir dir;
  std::mutex mutex;
  std::vector<std::string> errors;
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    Tensor live = live_state(rank);
    ckpt::AsyncSave save(*group);
    save.start(options_for(dir.path(), 1), pieces_of(live, rank), {});
    REQUIRE(save.finish());
    std::vector<StatePiece> pieces = pieces_of(live, rank);
    if (rank == 1) pieces[0].offset = 1500;  // 1000 elements from 1500 overrun model.w's 2000
    save.start(options_for(dir.path(), 2), pieces, {});
    try {
      poll_until_committed(save);
    } catch (const IoError& e) {
      std::lock_guard lock(mutex);
      errors.push_back(e.what());
    }
    CHECK_FALSE(save.in_flight());
  });
  REQUIRE(errors.size() == 2);
  CHECK(errors[0] == errors[1]);
  CHECK_THAT(errors[0], Catch::Contains("saving checkpoint") && Catch::Contains("step-2") &&
                            Catch::Contains("rank 1") && Catch::Contains("outside"));
  CHECK(ckpt::read_latest(dir.path()) == dir.path() / "step-1");
  CHECK_FALSE(fs::exists(dir.path() / "step-2"));
}

TEST_CASE("a save in flight when its owner goes is not committed and the next save clears it",
          "[ckpt]") {
  testing::TempDir dir;
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 2, store);
    Tensor live = live_state(rank);
    {
      ckpt::AsyncSave save(*group);
      save.start(options_for(dir.path(), 1), pieces_of(live, rank), {});
      REQUIRE(save.finish());
      save.start(options_for(dir.path(), 2), pieces_of(live, rank), {});
    }  // an error unwinding the run: the write is waited for, never committed
    group->barrier()->wait();
    if (rank == 0) {
      CHECK(ckpt::read_latest(dir.path()) == dir.path() / "step-1");
      CHECK_FALSE(fs::exists(dir.path() / "step-2"));
      CHECK(ckpt::list_leftovers(dir.path()) ==
            std::vector<fs::path>{dir.path() / (std::string(ckpt::kSavingPrefix) + "step-2")});
    }
    group->barrier()->wait();
    ckpt::AsyncSave next(*group);
    next.start(options_for(dir.path(), 3), pieces_of(live, rank), {});
    REQUIRE(next.finish());
  });
  CHECK(ckpt::read_latest(dir.path()) == dir.path() / "step-3");
  CHECK(ckpt::list_leftovers(dir.path()).empty());
}

}  // namespace genesis
