// DeepSpeed ds_config.json files as users bring them: seed 002's zero1/zero2/zero3.json map onto
// the genesis keys row by row, the file sits between the preset and the user's explicit keys,
// the batch triple follows DeepSpeed's rule, and every bad file is one error naming the file and
// JSON path (ConfigError, exit 2), or NotSupported naming what genesis does not have.
#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/deepspeed_config.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "support/scoped_env.hpp"
#include "support/setting_text.hpp"
#include "support/thrown_message.hpp"

using namespace genesis;
using namespace genesis::config_detail;
using genesis::testing::ScopedEnv;
using genesis::testing::TempDir;
using nlohmann::json;

namespace {

const std::filesystem::path kData =
    std::filesystem::path(GENESIS_TEST_SOURCE_DIR) / "tests" / "data" / "deepspeed";

// Seed 002's files, verbatim.
std::string seed_file(const std::string& name) {
  std::ifstream in(kData / name);
  std::ostringstream text;
  text << in.rdbuf();
  REQUIRE(!text.str().empty());
  return text.str();
}

struct Applied {
  Config config;
  DeepSpeedOutcome outcome;
  Origins origins;
};

// `text` applied over the defaults (or `base`) as ds.json, on `world` ranks.
Applied apply_ds(const std::string& text, int world = 1, Config base = {},
                 const Origins* explicit_keys = nullptr) {
  Applied a{std::move(base), {}, {}};
  a.outcome = apply_deepspeed_json(a.config, text, {"ds.json", world, explicit_keys}, a.origins);
  return a;
}

std::string config_error(const std::string& text, int world = 1) {
  return genesis::testing::thrown_message<ConfigError>([&] { apply_ds(text, world); });
}

std::string not_supported(const std::string& text) {
  return genesis::testing::thrown_message<NotSupported>([&] { apply_ds(text); });
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// zero3.json without its parameter offload.
std::string zero3_without_offload_param() {
  json j = json::parse(seed_file("zero3.json"));
  j["zero_optimization"].erase("offload_param");
  return j.dump();
}

}  // namespace

TEST_CASE("deepspeed: seed 002's zero1.json sets every setting it names", "[deepspeed]") {
  const Applied a = apply_ds(seed_file("zero1.json"));
  const Config& c = a.config;
  CHECK(c.distributed.strategy == "zero1");
  // reduce_bucket_size counts f32 elements: 2e8 x 4 bytes in MiB.
  CHECK(c.distributed.bucket_cap_mb == Approx(2e8 * 4 / (1024.0 * 1024.0)));
  CHECK(c.training.mixed_precision == "fp16");
  CHECK(c.loss_scale.initial_scale_power == 16);
  CHECK(c.loss_scale.loss_scale_window == 1000);
  CHECK(c.loss_scale.hysteresis == 2);
  CHECK(c.loss_scale.min_loss_scale == 1.0);
  CHECK(c.training.optimizer == "adamw");
  CHECK(c.training.adam_beta1 == 0.8);
  CHECK(c.training.adam_beta2 == 0.999);
  CHECK(c.training.adam_epsilon == 1e-8);
  CHECK(c.training.weight_decay == 3e-7);
  CHECK(c.training.lr_scheduler_type == "warmup_lr");
  CHECK(c.training.warmup_min_lr == 0.0);
  CHECK(c.training.learning_rate == 3e-5);  // WarmupLR's warmup_max_lr
  CHECK(c.training.warmup_steps == 500);
  CHECK(c.training.warmup_type == "log");
  CHECK(c.training.per_device_train_batch_size == 4);
  CHECK(c.training.gradient_accumulation_steps == 8);
  CHECK(c.training.max_grad_norm == 1.0);
  CHECK(c.training.logging_steps == 10);

  // What genesis accepts without acting on is listed once; wall_clock_breakdown is false.
  for (const char* key : {"allgather_bucket_size", "allgather_partitions", "overlap_comm",
                          "reduce_scatter", "contiguous_gradients"})
    CHECK(contains(a.outcome.not_acted_on, std::string("zero_optimization.") + key));
  CHECK(a.outcome.not_acted_on.size() == 5);
  const std::string warning = describe_not_acted_on("ds.json", a.outcome);
  CHECK_THAT(warning, Catch::Contains("zero_optimization.overlap_comm"));

  // Each setting names where it came from, for the log and for later error messages.
  CHECK(describe_location(a.origins.at("distributed.strategy")) ==
        "ds.json: zero_optimization.stage");
  const auto lines = describe_outcome("ds.json", a.outcome);
  CHECK(contains(
      lines, "deepspeed: ds.json sets distributed.strategy = \"zero1\" (zero_optimization.stage)"));
  CHECK(contains(
      lines,
      "deepspeed: ds.json sets training.learning_rate = 3e-05 (scheduler.params.warmup_max_lr)"));
}

TEST_CASE("deepspeed: zero2.json is zero2, zero3.json offloads parameters and optimizer",
          "[deepspeed]") {
  CHECK(apply_ds(seed_file("zero2.json")).config.distributed.strategy == "zero2");

  const Applied a = apply_ds(seed_file("zero3.json"));
  CHECK(a.config.distributed.strategy == "zero3");
  // Its "auto" values say what they left: a setting genesis has, or nothing genesis acts on.
  CHECK(contains(describe_outcome("ds.json", a.outcome),
                 "deepspeed: ds.json: zero_optimization.reduce_bucket_size is \"auto\": "
                 "distributed.bucket_cap_mb stays 25.0"));
  CHECK(contains(describe_outcome("ds.json", a.outcome),
                 "deepspeed: ds.json: zero_optimization.stage3_prefetch_bucket_size is \"auto\": "
                 "distributed.prefetch_bucket_size stays 50000000"));
  CHECK(contains(describe_outcome("ds.json", a.outcome),
                 "deepspeed: ds.json: zero_optimization.stage3_param_persistence_threshold is "
                 "\"auto\": distributed.param_persistence_threshold stays 0"));
  CHECK(a.outcome.automatic.size() == 3);
  CHECK(a.config.distributed.max_live_parameters == 1'000'000'000);
  const Applied batch =
      apply_ds(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4})");
  CHECK(contains(describe_outcome("ds.json", batch.outcome),
                 "deepspeed: ds.json: train_batch_size is \"auto\": resolved from the rest of "
                 "the config"));
  CHECK(a.config.distributed.offload_optimizer == "cpu");
  CHECK(a.config.distributed.offload_param == "cpu");
  CHECK(apply_ds(zero3_without_offload_param()).config.distributed.offload_param == "none");
  const std::string message = not_supported(
      R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})");
  CHECK_THAT(message, Catch::StartsWith("ds.json: zero_optimization.offload_param.device: "));
  CHECK_THAT(message, Catch::Contains("is not supported: genesis offloads to host memory"));
  CHECK(a.config.distributed.bucket_cap_mb == 25);  // "auto": as the config had it
  for (const char* key :
       {"offload_optimizer.pin_memory", "sub_group_size", "stage3_gather_16bit_weights_on_model_save"})
    CHECK(contains(a.outcome.not_acted_on, std::string("zero_optimization.") + key));

  CHECK(apply_ds(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "none"}}})")
            .config.distributed.offload_param == "none");
}

TEST_CASE("deepspeed: stage 3's prefetch limits and persistence threshold are element counts",
          "[deepspeed]") {
  const Config c = apply_ds(R"({"zero_optimization": {"stage": 3,
      "stage3_prefetch_bucket_size": 0, "stage3_max_live_parameters": 3e7,
      "stage3_param_persistence_threshold": 1e4}})")
                       .config;
  CHECK(c.distributed.prefetch_bucket_size == 0);
  CHECK(c.distributed.max_live_parameters == 30'000'000);
  CHECK(c.distributed.param_persistence_threshold == 10'000);
  CHECK_THAT(config_error(R"({"zero_optimization": {"stage3_param_persistence_threshold": -1}})"),
             Catch::Contains("ds.json: zero_optimization.stage3_param_persistence_threshold: "));
  CHECK_THAT(config_error(R"({"zero_optimization": {"stage3_prefetch_bucket_size": 1.5}})"),
             Catch::Contains("ds.json: zero_optimization.stage3_prefetch_bucket_size: expected "
                             "an integer, got 1.5"));
  CHECK_THAT(config_error(R"({"zero_optimization": {"stage3_max_live_parameters": 0}})"),
             Catch::Contains("ds.json: zero_optimization.stage3_max_live_parameters: "));
}

TEST_CASE("deepspeed: checkpoint.use_node_local_storage is training.node_local_checkpoints",
          "[deepspeed]") {
  const Applied a = apply_ds(R"({"checkpoint": {"use_node_local_storage": true}})");
  CHECK(a.config.training.node_local_checkpoints);
  CHECK(describe_location(a.origins.at("training.node_local_checkpoints")) ==
        "ds.json: checkpoint.use_node_local_storage");
  CHECK_FALSE(apply_ds(R"({"checkpoint": {"use_node_local_storage": false}})")
                  .config.training.node_local_checkpoints);
  CHECK_THAT(config_error(R"({"checkpoint": {"use_node_local_storage": 1}})"),
             Catch::Contains("checkpoint.use_node_local_storage: expected true or false"));
}

TEST_CASE("deepspeed: zero_optimization rows", "[deepspeed]") {
  const std::vector<std::pair<int, std::string>> stages = {
      {0, "ddp"}, {1, "zero1"}, {2, "zero2"}, {3, "zero3"}};
  for (const auto& [stage, strategy] : stages)
    CHECK(apply_ds(R"({"zero_optimization": {"stage": )" + std::to_string(stage) + "}}")
              .config.distributed.strategy == strategy);
  CHECK_THAT(config_error(R"({"zero_optimization": {"stage": 4}})"),
             Catch::Contains("ds.json: zero_optimization.stage: must be 0, 1, 2 or 3, got 4"));

  Config offloaded;
  offloaded.distributed.offload_optimizer = OffloadKind::cpu;
  CHECK(
      apply_ds(R"({"zero_optimization": {"offload_optimizer": {"device": "none"}}})", 1, offloaded)
          .config.distributed.offload_optimizer == "none");
  CHECK_THAT(not_supported(R"({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}})"),
             Catch::Contains("zero_optimization.offload_optimizer.device"));
  CHECK_THAT(config_error(R"({"zero_optimization": {"offload_optimizer": {"device": "gpu"}}})"),
             Catch::Contains("must be \"cpu\" or \"none\""));

  CHECK(apply_ds(R"({"zero_optimization": {"reduce_bucket_size": 262144}})")
            .config.distributed.bucket_cap_mb == 1.0);
  CHECK_THAT(config_error(R"({"zero_optimization": {"reduce_bucket_size": 0}})"),
             Catch::Contains("zero_optimization.reduce_bucket_size: must be positive"));
}

TEST_CASE("deepspeed: fp16 and bf16 rows", "[deepspeed]") {
  CHECK(apply_ds(R"({"bf16": {"enabled": true}})").config.training.mixed_precision == "bf16");
  Config fp16;
  fp16.training.mixed_precision = MixedPrecision::fp16;
  // A disabled section means fp32 under DeepSpeed; "auto" leaves the setting alone.
  CHECK(apply_ds(R"({"fp16": {"enabled": false}})", 1, fp16).config.training.mixed_precision ==
        "no");
  CHECK(apply_ds(R"({"bf16": {}})", 1, fp16).config.training.mixed_precision == "no");
  CHECK(apply_ds(R"({"fp16": {"enabled": "auto"}})", 1, fp16).config.training.mixed_precision ==
        "fp16");
  CHECK_THAT(config_error(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})"),
             Catch::Contains("both true"));

  // 0 is dynamic scaling, which genesis has; a fixed scale it has not.
  CHECK(apply_ds(R"({"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 12}})")
            .config.loss_scale.initial_scale_power == 12);
  // loss_scale 0 is dynamic, any other value a fixed scale.
  CHECK(apply_ds(R"({"fp16": {"enabled": true, "loss_scale": 128}})")
            .config.loss_scale.static_scale == 128);
  CHECK(apply_ds(R"({"fp16": {"enabled": true, "loss_scale": 0}})")
            .config.loss_scale.static_scale == 0);
  CHECK_THAT(config_error(R"({"fp16": {"enabled": true, "loss_scale": -1}})"),
             Catch::Contains("ds.json: fp16.loss_scale: must be >= 0, got -1"));
  CHECK_THAT(config_error(R"({"fp16": {"hysteresis": 0}})"),
             Catch::Contains(
                 "ds.json: fp16.hysteresis: loss_scale.hysteresis must be a positive integer"));
}

TEST_CASE("deepspeed: optimizer rows", "[deepspeed]") {
  // DeepSpeed's "Adam" is AdamW unless adam_w_mode is false.
  CHECK(apply_ds(R"({"optimizer": {"type": "Adam"}})").config.training.optimizer == "adamw");
  CHECK(apply_ds(R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})")
            .config.training.optimizer == "adam");
  CHECK(apply_ds(R"({"optimizer": {"type": "adamw"}})").config.training.optimizer == "adamw");
  const Config sgd =
      apply_ds(R"({"optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.5,
                                 "weight_decay": 0.01}}})")
          .config;
  CHECK(sgd.training.optimizer == "sgd");
  CHECK(sgd.training.learning_rate == 0.1);
  CHECK(sgd.training.momentum == 0.5);
  CHECK(sgd.training.weight_decay == 0.01);

  const std::string unknown = config_error(R"({"optimizer": {"type": "AdamX"}})");
  CHECK_THAT(unknown, Catch::StartsWith("ds.json: optimizer.type: unknown optimizer \"AdamX\""));
  CHECK_THAT(unknown, Catch::Contains("did you mean 'Adam"));
  CHECK_THAT(not_supported(R"({"optimizer": {"type": "Lamb", "params": {"max_coeff": 10}}})"),
             Catch::Contains("\"Lamb\" is not supported: genesis has AdamW, Adam and SGD"));
  CHECK_THAT(config_error(R"({"optimizer": {"params": {"lr": 0.1}}})"),
             Catch::Contains("optimizer.type: missing"));
  CHECK_THAT(config_error(R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})"),
             Catch::Contains("optimizer.params.betas: expected a list of two numbers, got [0.9]"));
  CHECK_THAT(config_error(R"({"optimizer": {"type": "AdamW", "params": {"lr": -1}}})"),
             Catch::Contains(
                 "ds.json: optimizer.params.lr: training.learning_rate must be a positive number"));
}

TEST_CASE("deepspeed: scheduler rows", "[deepspeed]") {
  // Absent parameters take DeepSpeed's defaults, so the file alone decides the schedule.
  Config base;
  base.training.warmup_ratio = 0.05;
  const Config c = apply_ds(R"({"scheduler": {"type": "WarmupLR"}})", 1, base).config;
  CHECK(c.training.lr_scheduler_type == "warmup_lr");
  CHECK(c.training.learning_rate == 0.001);
  CHECK(c.training.warmup_steps == 1000);
  CHECK(c.training.warmup_ratio == 0.0);
  CHECK(c.training.warmup_type == "log");

  const Config linear =
      apply_ds(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear",
                               "warmup_min_lr": 1e-5, "warmup_max_lr": "auto"}}})")
          .config;
  CHECK(linear.training.warmup_type == "linear");
  CHECK(linear.training.warmup_min_lr == 1e-5);
  CHECK(linear.training.learning_rate == Config{}.training.learning_rate);  // "auto"

  // WarmupDecayLR decays to warmup_min_lr at total_num_steps ("auto": training.max_steps).
  const Config decay = apply_ds(R"({"scheduler": {"type": "WarmupDecayLR", "params": {
      "total_num_steps": 2000, "warmup_num_steps": 100, "warmup_max_lr": 0.01}}})")
                           .config;
  CHECK(decay.training.lr_scheduler_type == "warmup_decay_lr");
  CHECK(decay.training.lr_decay_steps == 2000);
  CHECK(decay.training.warmup_steps == 100);
  CHECK(decay.training.learning_rate == 0.01);
  CHECK(
      apply_ds(R"({"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}}})")
          .config.training.lr_decay_steps == 0);
  CHECK_THAT(config_error(R"({"scheduler": {"type": "WarmupDecayLR"}})"),
             Catch::Contains("ds.json: scheduler.params.total_num_steps: missing"));

  // WarmupCosineLR: ratios of the optimizer's lr, which it leaves as the config has it.
  const Config cosine = apply_ds(R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.002}},
      "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 300,
      "warmup_num_steps": 20, "warmup_min_ratio": 0.1, "warmup_type": "linear"}}})")
                            .config;
  CHECK(cosine.training.lr_scheduler_type == "warmup_cosine_lr");
  CHECK(cosine.training.learning_rate == 0.002);
  CHECK(cosine.training.lr_decay_steps == 300);
  CHECK(cosine.training.warmup_steps == 20);
  CHECK(cosine.training.warmup_min_ratio == 0.1);
  CHECK(cosine.training.cos_min_ratio == 0.0001);  // DeepSpeed's default
  CHECK(cosine.training.warmup_type == "linear");
  CHECK_THAT(config_error(R"({"scheduler": {"type": "WarmupCosineLR"}})"),
             Catch::Contains("ds.json: scheduler.params.total_num_steps: missing: WarmupCosineLR"));
  CHECK_THAT(config_error(R"({"scheduler": {"type": "WarmupCosineLR", "params": {
                 "total_num_steps": 10, "warmup_max_lr": 0.1}}})"),
             Catch::Contains("scheduler.params.warmup_max_lr: is not a parameter of WarmupCosineLR"));

  for (const char* type : {"OneCycle", "LRRangeTest"})
    CHECK_THAT(not_supported(std::string(R"({"scheduler": {"type": ")") + type + "\"}}"),
               Catch::StartsWith(std::string("ds.json: scheduler.type: \"") + type +
                                 "\" is not supported"));
  CHECK_THAT(config_error(R"({"scheduler": {"type": "WarmupLRR"}})"),
             Catch::Contains("unknown scheduler \"WarmupLRR\" (WarmupLR, WarmupDecayLR or "
                             "WarmupCosineLR) (did you mean 'WarmupLR'?)"));
  CHECK_THAT(
      config_error(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "cos"}}})"),
      Catch::Contains("scheduler.params.warmup_type: must be \"log\" or \"linear\""));
  CHECK_THAT(
      config_error(R"({"scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 10}}})"),
      Catch::Contains("scheduler.params.total_num_steps: is not a parameter of WarmupLR"));
}

TEST_CASE("deepspeed: an optimizer lr the warmup schedule overrides is warned about",
          "[deepspeed]") {
  // As in DeepSpeed, WarmupLR and WarmupDecayLR train at warmup_max_lr (default 0.001), never at
  // optimizer.params.lr; a file giving only the latter reads as if it were used.
  const std::string adamw = R"("optimizer": {"type": "AdamW", "params": {"lr": 0.0003}})";
  const Applied absent =
      apply_ds("{" + adamw + R"(, "scheduler": {"type": "WarmupDecayLR", "params": {
          "total_num_steps": 100}}})");
  CHECK(absent.config.training.learning_rate == 0.001);
  REQUIRE(absent.outcome.warnings.size() == 1);
  CHECK(absent.outcome.warnings[0] ==
        "deepspeed: ds.json: optimizer.params.lr 0.0003 is not trained at: WarmupDecayLR takes "
        "the lr to scheduler.params.warmup_max_lr (absent: DeepSpeed's default 0.001), as "
        "DeepSpeed does; set warmup_max_lr to 0.0003 to train at it");
  const Applied other =
      apply_ds("{" + adamw + R"(, "scheduler": {"type": "WarmupLR", "params": {
          "warmup_max_lr": 0.01}}})");
  REQUIRE(other.outcome.warnings.size() == 1);
  CHECK_THAT(other.outcome.warnings[0], Catch::Contains("WarmupLR takes the lr to "
                                                        "scheduler.params.warmup_max_lr 0.01,"));
  // Agreeing, "auto" (the optimizer's lr) or a cosine schedule (a ratio of it): nothing to say.
  for (const char* params : {R"({"warmup_max_lr": 0.0003})", R"({"warmup_max_lr": "auto"})"})
    CHECK(apply_ds("{" + adamw + R"(, "scheduler": {"type": "WarmupLR", "params": )" + params +
                   "}}")
              .outcome.warnings.empty());
  CHECK(apply_ds("{" + adamw + R"(, "scheduler": {"type": "WarmupCosineLR", "params": {
          "total_num_steps": 100}}})")
            .outcome.warnings.empty());
}

TEST_CASE("deepspeed: train_batch_size = micro x accumulation x world size", "[deepspeed]") {
  struct Row {
    std::string json;
    int world;
    std::int64_t micro, accumulation;
  };
  const std::vector<Row> rows = {
      {R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8)",
       1, 4, 8},
      {R"("train_batch_size": 32, "train_micro_batch_size_per_gpu": 4)", 2, 4, 4},
      {R"("train_batch_size": 32, "gradient_accumulation_steps": 2)", 2, 8, 2},
      {R"("train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2)", 8, 4, 2},
      {R"("train_batch_size": 32)", 4, 8, 1},
      {R"("train_micro_batch_size_per_gpu": 6)", 3, 6, 1},
  };
  for (const Row& row : rows) {
    INFO(row.json << " on " << row.world << " ranks");
    const Config c = apply_ds("{" + row.json + "}", row.world).config;
    CHECK(c.training.per_device_train_batch_size == row.micro);
    CHECK(c.training.gradient_accumulation_steps == row.accumulation);
  }
  // "auto" takes the genesis setting as the known value.
  Config base;
  base.training.per_device_train_batch_size = 16;
  const Config c = apply_ds(R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": "auto",
                            "gradient_accumulation_steps": "auto"})",
                            4, base)
                       .config;
  CHECK(c.training.per_device_train_batch_size == 16);
  CHECK(c.training.gradient_accumulation_steps == 1);

  // Seed 002's triple holds on one rank only; the error shows the arithmetic.
  const std::string message = config_error(seed_file("zero1.json"), 2);
  CHECK_THAT(message, Catch::StartsWith("ds.json: train_batch_size: inconsistent batch sizes: "
                                        "train_batch_size 32 != train_micro_batch_size_per_gpu 4"));
  CHECK_THAT(message, Catch::Contains("x gradient_accumulation_steps 8"));
  CHECK_THAT(message, Catch::EndsWith("x world size 2 (WORLD_SIZE) = 64"));
  CHECK_THAT(config_error(R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4})"),
             Catch::Contains("!= train_micro_batch_size_per_gpu 4"));
}

TEST_CASE("deepspeed: bad files are one line naming the file and JSON path", "[deepspeed]") {
  CHECK(
      config_error(R"({"zero_optimization": {"stagee": 1}})") ==
      "ds.json: unknown key 'zero_optimization.stagee' (did you mean 'zero_optimization.stage'?)");
  // A key in the wrong section is suggested where it belongs.
  CHECK_THAT(config_error(R"({"stage": 2})"),
             Catch::Contains("(did you mean 'zero_optimization.stage'?)"));
  CHECK(config_error(R"({"zero_optimization": {"stage": "one"}})") ==
        "ds.json: zero_optimization.stage: expected an integer, got \"one\"");
  CHECK(config_error(R"({"gradient_clipping": true})") ==
        "ds.json: gradient_clipping: expected a number, got true");
  CHECK(config_error(R"({"fp16": 1})") == "ds.json: fp16: expected an object, got 1");
  CHECK_THAT(
      config_error(R"({"gradient_clipping": -1})"),
      Catch::Contains(
          "ds.json: gradient_clipping: training.max_grad_norm must be a non-negative number"));
  CHECK_THAT(config_error("{\"zero_optimization\": {\"stage\": 1,}}"),
             Catch::StartsWith("ds.json: malformed JSON: parse error at line 1"));
  CHECK_THAT(config_error("[1, 2]"), Catch::Contains("expected a JSON object at the top level"));
}

TEST_CASE("deepspeed: the file sits between the preset and the user's explicit keys",
          "[deepspeed][config]") {
  TempDir dir;
  const auto ds = dir.write("ds.json", seed_file("zero1.json"));
  // The preset's learning rate and strategy give way to the file's...
  Config c = load_config("sft", "", {"distributed.deepspeed_config=" + ds.string()});
  CHECK(c.training.learning_rate == 3e-5);
  CHECK(c.distributed.strategy == "zero1");
  CHECK(c.training.warmup_steps == 500);

  // ...and the file gives way to the user's --config keys and --set.
  const auto user = dir.write("user.toml",
                              "[training]\nlearning_rate = 0.01\n"
                              "[distributed]\ndeepspeed_config = \"" +
                                  ds.string() + "\"\n");
  c = load_config("sft", user, {"training.max_grad_norm=0.5", "distributed.strategy=ddp"});
  CHECK(c.training.learning_rate == 0.01);
  CHECK(c.training.max_grad_norm == 0.5);
  CHECK(c.distributed.strategy == "ddp");
  CHECK(c.training.mixed_precision == "fp16");  // still the file's where the user said nothing

  // An explicit micro batch joins the triple, so an inconsistent one names where it was set.
  const auto micro = dir.write("micro.toml", "[training]\nper_device_train_batch_size = 8\n");
  const std::string message = genesis::testing::thrown_message<ConfigError>(
      [&] { load_config("sft", micro, {"distributed.deepspeed_config=" + ds.string()}); });
  CHECK_THAT(message,
             Catch::Contains(
                 "train_micro_batch_size_per_gpu 8 (training.per_device_train_batch_size from " +
                 micro.string() + ":2)"));

  // WORLD_SIZE comes from the launcher's environment.
  ScopedEnv world("WORLD_SIZE", "2");
  CHECK_THAT(genesis::testing::thrown_message<ConfigError>(
                 [&] { load_config("sft", "", {"distributed.deepspeed_config=" + ds.string()}); }),
             Catch::Contains("x world size 2 (WORLD_SIZE) = 64"));
}

TEST_CASE("deepspeed: a missing file is a config error", "[deepspeed][config]") {
  CHECK_THAT(genesis::testing::thrown_message<ConfigError>([] {
               load_config("", "", {"distributed.deepspeed_config=/nonexistent/ds.json"});
             }),
             Catch::Contains("DeepSpeed config '/nonexistent/ds.json' not found"));
}

TEST_CASE("deepspeed: tensorboard.enabled adds tensorboard to training.report_to",
          "[deepspeed][tensorboard]") {
  const Applied on = apply_ds(
      R"({"tensorboard": {"enabled": true, "output_path": "logs/", "job_name": "ds"}})");
  CHECK(on.config.training.report_to == std::vector<std::string>{"jsonl", "tensorboard"});
  CHECK(describe_location(on.origins.at("training.report_to")) == "ds.json: tensorboard.enabled");
  CHECK(contains(on.outcome.not_acted_on, "tensorboard.output_path"));
  CHECK(apply_ds(R"({"tensorboard": {"enabled": false}})").config.training.report_to ==
        std::vector<std::string>{"jsonl"});
  CHECK_THAT(config_error(R"({"tensorboard": {"enabled": 1}})"),
             Catch::Contains("tensorboard.enabled: expected true or false"));
}
