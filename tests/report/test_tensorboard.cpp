// TensorBoard event files as a user relies on them: CRC-32C and the masked CRC agree with the
// published test vectors (RFC 3720's, TensorBoard's own), the encoder writes TensorFlow's bytes,
// and what a training run writes decodes, through a reader written from the format alone
// (support/tfevents_reader.hpp), to exactly the figures of its metrics.jsonl, step for step. A
// resumed run adds a file and never touches the earlier ones; unsupported targets are refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <regex>
#include <string>

#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "report/crc32c.hpp"
#include "report/protobuf_wire.hpp"
#include "report/tensorboard_writer.hpp"
#include "support/tfevents_reader.hpp"
#include "train/metrics_recorder.hpp"
#include "train/resume_support.hpp"

using namespace genesis;
using namespace genesis::testing::resume;
namespace tfevents = genesis::testing::tfevents;
using genesis::testing::CliResult;
using genesis::testing::TempDir;

namespace {

// (tag, step) -> value as TensorBoard shows a run directory: its files in order, each
// SessionLog START dropping the points logged at its step and after (a resumed run's restart).
using Points = std::map<std::pair<std::string, std::int64_t>, float>;

Points visible_points(const fs::path& dir) {
  Points points;
  for (const fs::path& file : tfevents::event_files(dir)) {
    const auto events = tfevents::read_events(file);
    REQUIRE(!events.empty());
    CHECK(events.front().file_version == "brain.Event:2");
    for (const tfevents::Event& e : events) {
      if (e.session_status == 1)
        std::erase_if(points, [&](const auto& p) { return p.first.second >= e.step; });
      for (const auto& [tag, value] : e.values) points[{tag, e.step}] = value;
    }
  }
  return points;
}

// metrics.jsonl's figures under their TensorBoard names, as the f32 TensorBoard stores.
Points expected_points(const fs::path& run_dir) {
  Points points;
  for (const json& line : read_metrics(run_dir)) {
    const std::int64_t step = line["step"].get<std::int64_t>();
    for (const auto& [key, value] : line.items()) {
      if (key == "step") continue;
      const bool eval = key.starts_with("eval_");
      const std::string tag = train::tensorboard_tag(eval ? key.substr(5) : key, eval);
      points[{tag, step}] = static_cast<float>(value.get<double>());
    }
  }
  return points;
}

CliResult train_ok(const std::vector<std::string>& args) {
  const CliResult r = testing::run_genesis(args, quiet_env());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

TEST_CASE("tensorboard: CRC-32C and its masked form match the published vectors",
          "[tensorboard]") {
  CHECK(report::crc32c("123456789") == 0xE3069283u);
  CHECK(report::crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720, B.4
  CHECK(report::crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  CHECK(report::crc32c("") == 0u);
  // TensorBoard's: the record of tf.compat.v1.Event(file_version=b"CRC test, one two").
  const std::string event("\x1a\x11" "CRC test, one two", 19);
  CHECK(report::masked_crc32c(event) == 0x5794D08Au);
  CHECK(tfevents::masked(event) == 0x5794D08Au);
  CHECK(report::mask_crc(0) == 0xA282EAD8u);
}

TEST_CASE("tensorboard: the protobuf encoder writes the wire format's bytes", "[tensorboard]") {
  CHECK(report::ProtoMessage().add_bytes(3, "CRC test, one two").bytes() ==
        std::string("\x1a\x11" "CRC test, one two", 19));
  CHECK(report::ProtoMessage().add_varint(1, 150).bytes() == "\x08\x96\x01");
  // int64 -1: ten bytes of two's complement.
  CHECK(report::ProtoMessage().add_varint(2, static_cast<std::uint64_t>(-1)).bytes() ==
        std::string("\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11));
  CHECK(report::ProtoMessage().add_float(2, 1.0f).bytes() ==
        std::string("\x15\x00\x00\x80\x3f", 5));
  CHECK(report::ProtoMessage().add_double(1, 2.0).bytes() ==
        std::string("\x09\x00\x00\x00\x00\x00\x00\x00\x40", 9));
  const std::string framed = report::tfrecord_frame("abc");
  REQUIRE(framed.size() == 8 + 4 + 3 + 4);
  CHECK(framed.substr(0, 8) == std::string("\x03\0\0\0\0\0\0\0", 8));
}

TEST_CASE("tensorboard: a writer's file decodes to what was added, CRCs checked",
          "[tensorboard]") {
  TempDir dir;
  const double before = static_cast<double>(std::time(nullptr));
  report::TensorBoardWriter writer(dir.path() / "tb");
  writer.start_session(1);
  writer.add_scalar("train/loss", 10, 2.5);
  writer.add_scalar("train/learning_rate", 10, 1e-3);
  writer.add_scalar("eval/exact_match", 20, 0.75);
  writer.flush();  // visible while the writer is open, as to a TensorBoard following a run

  const std::string name = writer.path().filename().string();
  CHECK(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\..+)")));
  const auto events = tfevents::read_events(writer.path());
  REQUIRE(events.size() == 5);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].wall_time >= before - 1);
  CHECK(events[0].wall_time <= static_cast<double>(std::time(nullptr)) + 1);
  CHECK(events[1].session_status == 1);
  CHECK(events[1].step == 1);
  REQUIRE(events[2].values.size() == 1);
  CHECK(events[2].step == 10);
  CHECK(events[2].values[0].first == "train/loss");
  CHECK(events[2].values[0].second == 2.5f);
  CHECK(events[3].values[0].second == 1e-3f);
  CHECK(events[4].step == 20);
  CHECK(events[4].values[0] == std::pair<std::string, float>("eval/exact_match", 0.75f));
  CHECK(events[4].wall_time >= events[0].wall_time);
}

TEST_CASE("tensorboard: a second writer in the same second gets its own file", "[tensorboard]") {
  TempDir dir;
  report::TensorBoardWriter first(dir.path());
  first.add_scalar("train/loss", 1, 1.0);
  first.flush();
  const std::string first_bytes = read_bytes(first.path());
  report::TensorBoardWriter second(dir.path());
  second.add_scalar("train/loss", 2, 0.5);
  second.flush();
  CHECK(second.path() != first.path());
  CHECK(read_bytes(first.path()) == first_bytes);
  CHECK(tfevents::event_files(dir.path()).size() == 2);
  CHECK(tfevents::read_events(second.path()).back().values[0].second == 0.5f);
}

TEST_CASE("tensorboard: metrics take the names TensorBoard users know", "[tensorboard]") {
  CHECK(train::tensorboard_tag("loss", false) == "train/loss");
  CHECK(train::tensorboard_tag("lr", false) == "train/learning_rate");
  CHECK(train::tensorboard_tag("grad_norm", false) == "train/grad_norm");
  CHECK(train::tensorboard_tag("tokens_per_s", false) == "train/tokens_per_s");
  CHECK(train::tensorboard_tag("rewards/mean", false) == "train/rewards/mean");
  CHECK(train::tensorboard_tag("loss", true) == "eval/loss");
  CHECK(train::tensorboard_tag("exact_match", true) == "eval/exact_match");
  CHECK(train::tensorboard_tag("memory_allocated", false) == "memory/allocated_bytes");
}

TEST_CASE("tensorboard: training.report_to accepts jsonl and tensorboard, refuses the rest",
          "[tensorboard][config]") {
  CHECK(load_config("mlp", "", {}).training.report_to == std::vector<std::string>{"jsonl"});
  CHECK_FALSE(load_config("mlp", "", {}).training.reports_to("tensorboard"));
  const Config on = load_config("mlp", "", {"training.report_to=[\"tensorboard\"]"});
  CHECK(on.training.reports_to("tensorboard"));
  CHECK_THAT(config_to_toml(on), Catch::Contains("report_to = [\"tensorboard\"]"));
  CHECK(load_config("", "", {"training.report_to=[]"}).training.report_to.empty());

  const auto message = [](const std::string& set) {
    try {
      load_config("mlp", "", {set});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no ConfigError");
  };
  const std::string wandb = message("training.report_to=[\"jsonl\", \"wandb\"]");
  CHECK_THAT(wandb, Catch::Contains("--set training.report_to") && Catch::Contains("\"wandb\"") &&
                        Catch::Contains("online service") &&
                        Catch::Contains("\"jsonl\"") && Catch::Contains("\"tensorboard\""));
  CHECK_THAT(message("training.report_to=[\"tensorbord\"]"),
             Catch::Contains("did you mean 'tensorboard'"));
  CHECK_THAT(message("training.report_to=\"tensorboard\""), Catch::Contains("a list of strings"));

  const CliResult r = testing::run_genesis(
      {"train", "--preset", "mlp", "--set", "training.report_to=[\"wandb\"]"}, quiet_env());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("\"wandb\" is not supported"));
}

TEST_CASE("tensorboard: a run's event file holds metrics.jsonl's figures step for step, and a "
          "resumed run adds a file and leaves the first as it was",
          "[tensorboard][train]") {
  TempDir dir;
  const std::vector<std::string> sets = tiny_mlp(
      {"data.num_samples=120", "training.per_device_train_batch_size=16", "training.max_steps=8",
       "training.logging_steps=1", "training.save_steps=3", "training.eval_steps=3",
       "training.report_to=[\"tensorboard\"]"});
  const fs::path out = dir.path(), run = out / "run", tb = run / "tensorboard";
  train_ok(train_args(out, "run", "mlp", sets));

  REQUIRE(tfevents::event_files(tb).size() == 1);
  const fs::path first = tfevents::event_files(tb)[0];
  const Points points = visible_points(tb);
  CHECK(points == expected_points(run));
  // 8 training lines of loss, lr, grad_norm, samples/s, tokens/s, elapsed; evals at 3, 6, 8.
  CHECK(points.count({"train/learning_rate", 8}) == 1);
  CHECK(points.count({"eval/loss", 6}) == 1);
  CHECK(points.count({"train/loss", 1}) == 1);

  // What a run killed during step 5 leaves: its latest checkpoint is step 3, and it already
  // logged steps 4 and 5, which the resumed run logs again.
  const std::string first_bytes = read_bytes(first);
  fs::remove_all(checkpoint_of(run, 6));
  fs::remove_all(checkpoint_of(run, 8));
  write_text(run / "checkpoints" / "latest", "step-3\n");
  std::vector<std::string> resume = sets;
  resume.push_back("training.resume_from_checkpoint=auto");
  train_ok(train_args(out, "run", "mlp", resume));

  const auto files = tfevents::event_files(tb);
  REQUIRE(files.size() == 2);
  CHECK(read_bytes(first) == first_bytes);
  const auto second = tfevents::read_events(files[0] == first ? files[1] : files[0]);
  REQUIRE(second.size() > 2);
  CHECK(second[1].session_status == 1);
  CHECK(second[1].step == 4);
  CHECK(visible_points(tb) == expected_points(run));
}
