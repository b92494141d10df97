// The [training] half of a DeepSpeed config: optimizer, scheduler, the batch triple
// (train_batch_size = micro x accumulation x world size, any two determine the third, as
// deepspeed/runtime/config.py resolves them), gradient clipping, steps_per_print,
// wall_clock_breakdown, the tensorboard monitor and checkpoint.use_node_local_storage.
// WarmupLR, WarmupDecayLR and WarmupCosineLR are the DeepSpeed schedules genesis has
// (lr_scheduler_type "warmup_lr", "warmup_decay_lr" and "warmup_cosine_lr").
#include <algorithm>
#include <array>
#include <cctype>
#include <optional>

#include "deepspeed_config.hpp"
#include "genesis/core/error.hpp"

namespace genesis::config_detail {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 3> kOptimizers = {"AdamW", "Adam", "SGD"};
// DeepSpeed optimizers genesis does not have: refused as NotSupported rather than as typos.
constexpr std::array<std::string_view, 9> kOtherOptimizers = {
    "onebitadam", "zerooneadam", "onebitlamb", "lamb", "adagrad",
    "lion",       "muadam",      "muadamw",    "musgd"};
constexpr std::array<std::string_view, 3> kSchedulers = {"WarmupLR", "WarmupDecayLR",
                                                        "WarmupCosineLR"};
constexpr std::array<std::string_view, 2> kOtherSchedulers = {"OneCycle", "LRRangeTest"};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

template <std::size_t N>
std::vector<std::string> names(const std::array<std::string_view, N>& list) {
  return {list.begin(), list.end()};
}

// The type string of section `name` when it has one ("auto" leaves the genesis setting).
std::optional<std::string> type_of(const json& root, const char* name) {
  auto section = root.find(name);
  if (section == root.end() || !section->is_object()) return std::nullopt;
  auto type = section->find("type");
  if (type == section->end() || !type->is_string() || is_auto(*type)) return std::nullopt;
  return type->get<std::string>();
}

// --- optimizer ---

void map_optimizer(DeepSpeedMapper& m, const json& root) {
  auto section = root.find("optimizer");
  if (section == root.end()) return;
  const json params = section->value("params", json::object());
  if (auto type = type_of(root, "optimizer")) {
    // DeepSpeed lower-cases the type, and its "Adam" runs AdamW (decoupled weight decay)
    // unless params.adam_w_mode is false (engine.py, ADAM_W_MODE_DEFAULT = True).
    const std::string t = lower(*type);
    const json* w_mode = given(params, "adam_w_mode");
    const bool adam_w = t == "adamw" || (t == "adam" && (w_mode == nullptr || w_mode->get<bool>()));
    std::string kind = "sgd";
    if (t != "sgd") kind = adam_w ? "adamw" : "adam";
    const bool by_mode = w_mode != nullptr && t == "adam";
    m.set_text("training.optimizer", kind,
               by_mode ? "optimizer.type, optimizer.params.adam_w_mode" : "optimizer.type");
  } else if (section->find("type") == section->end()) {
    m.fail("optimizer.type", "missing: one of AdamW, Adam, SGD");
  }
  if (const json* v = given(params, "lr"))
    m.set_number("training.learning_rate", v->get<double>(), "optimizer.params.lr");
  if (const json* v = given(params, "betas")) {
    m.set_number("training.adam_beta1", (*v)[0].get<double>(), "optimizer.params.betas[0]");
    m.set_number("training.adam_beta2", (*v)[1].get<double>(), "optimizer.params.betas[1]");
  }
  if (const json* v = given(params, "eps"))
    m.set_number("training.adam_epsilon", v->get<double>(), "optimizer.params.eps");
  if (const json* v = given(params, "weight_decay"))
    m.set_number("training.weight_decay", v->get<double>(), "optimizer.params.weight_decay");
  if (const json* v = given(params, "momentum"))
    m.set_number("training.momentum", v->get<double>(), "optimizer.params.momentum");
}

// --- scheduler ---

// The horizon of WarmupDecayLR and WarmupCosineLR, which DeepSpeed requires ("auto":
// training.max_steps).
void map_decay_steps(DeepSpeedMapper& m, const json& params, const char* type) {
  const std::string path = "scheduler.params.total_num_steps";
  if (!params.contains("total_num_steps"))
    m.fail(path, std::string("missing: ") + type + " needs it (\"auto\" for training.max_steps)");
  if (const json* v = given(params, "total_num_steps"))
    m.set_integer("training.lr_decay_steps", json_integer(*v, m.file(), path), path);
}

// One scheduler's params, with DeepSpeed's defaults (lr_schedules.py), so the file alone decides
// the schedule as it would under DeepSpeed; "auto" leaves a setting as the rest of the config has
// it (nullopt).
class SchedulerParams {
 public:
  SchedulerParams(DeepSpeedMapper& m, const json& params) : m_(m), params_(params) {}

  std::optional<double> number(const char* name, double fallback) const {
    if (!params_.contains(name)) return fallback;
    const json* v = given(params_, name);
    return v ? std::optional<double>(v->get<double>()) : std::nullopt;
  }
  std::string path(const char* name) const {
    return std::string("scheduler.params.") + name +
           (params_.contains(name) ? "" : ", DeepSpeed's default");
  }
  void set_number(const char* name, double fallback, const char* key) const {
    if (auto v = number(name, fallback)) m_.set_number(key, *v, path(name));
  }
  // warmup_num_steps (1000) and warmup_type (log), which every warmup schedule has.
  void set_warmup() const {
    if (!params_.contains("warmup_num_steps") || given(params_, "warmup_num_steps")) {
      const json* v = given(params_, "warmup_num_steps");
      const std::int64_t steps = v ? json_integer(*v, m_.file(), path("warmup_num_steps")) : 1000;
      m_.set_integer("training.warmup_steps", steps, path("warmup_num_steps"));
      m_.set_number("training.warmup_ratio", 0.0, path("warmup_num_steps"));  // steps, not a ratio
    }
    if (!params_.contains("warmup_type") || given(params_, "warmup_type")) {
      const json* v = given(params_, "warmup_type");
      const std::string type = v ? v->get<std::string>() : "log";
      if (type != "log" && type != "linear")
        m_.fail(path("warmup_type"), "must be \"log\" or \"linear\", got " + v->dump());
      m_.set_text("training.warmup_type", type, path("warmup_type"));
    }
  }
  // A parameter of another schedule is a mistake DeepSpeed would stop at too.
  void refuse(std::initializer_list<const char*> others, const char* type) const {
    for (const char* other : others)
      if (params_.contains(other))
        m_.fail(std::string("scheduler.params.") + other,
                std::string("is not a parameter of ") + type);
  }

 private:
  DeepSpeedMapper& m_;
  const json& params_;
};

// WarmupLR (decay = false) or WarmupDecayLR: from warmup_min_lr up to warmup_max_lr.
void map_warmup_lr(DeepSpeedMapper& m, const json& params, bool decay) {
  const char* type = decay ? "WarmupDecayLR" : "WarmupLR";
  const SchedulerParams p(m, params);
  p.refuse({"warmup_min_ratio", "cos_min_ratio"}, type);
  if (!decay) p.refuse({"total_num_steps"}, type);
  m.set_text("training.lr_scheduler_type", decay ? "warmup_decay_lr" : "warmup_lr",
             "scheduler.type");
  if (decay) map_decay_steps(m, params, type);
  p.set_number("warmup_min_lr", 0.0, "training.warmup_min_lr");
  p.set_number("warmup_max_lr", 0.001, "training.learning_rate");
  p.set_warmup();
}

// WarmupCosineLR: ratios of the optimizer's lr (training.learning_rate), which it leaves alone.
void map_warmup_cosine_lr(DeepSpeedMapper& m, const json& params) {
  const SchedulerParams p(m, params);
  p.refuse({"warmup_min_lr", "warmup_max_lr"}, "WarmupCosineLR");
  m.set_text("training.lr_scheduler_type", "warmup_cosine_lr", "scheduler.type");
  map_decay_steps(m, params, "WarmupCosineLR");
  p.set_number("warmup_min_ratio", 0.0, "training.warmup_min_ratio");
  p.set_number("cos_min_ratio", 0.0001, "training.cos_min_ratio");
  p.set_warmup();
}

// WarmupLR and WarmupDecayLR set the lr themselves, up to warmup_max_lr (0.001 when absent), so
// DeepSpeed never trains at optimizer.params.lr: a pitfall worth a line where the two differ.
void warn_optimizer_lr_unused(DeepSpeedMapper& m, const json& root, const json& params,
                              const std::string& type) {
  const json optimizer = root.contains("optimizer")
                             ? root.at("optimizer").value("params", json::object())
                             : json::object();
  const json* lr = given(optimizer, "lr");
  if (lr == nullptr || m.explicit_source("training.learning_rate")) return;
  const json* peak = given(params, "warmup_max_lr");
  if (peak == nullptr && params.contains("warmup_max_lr")) return;  // "auto": the optimizer's lr
  const double top = peak ? peak->get<double>() : 0.001;
  if (top == lr->get<double>()) return;
  m.warn("optimizer.params.lr " + lr->dump() + " is not trained at: " + type +
         " takes the lr to scheduler.params.warmup_max_lr " +
         (peak ? peak->dump() : std::string("(absent: DeepSpeed's default 0.001)")) +
         ", as DeepSpeed does; set warmup_max_lr to " + lr->dump() + " to train at it");
}

void map_scheduler(DeepSpeedMapper& m, const json& root) {
  auto section = root.find("scheduler");
  if (section == root.end()) return;
  if (section->find("type") == section->end())
    m.fail("scheduler.type", "missing: WarmupLR, WarmupDecayLR or WarmupCosineLR");
  const std::optional<std::string> type = type_of(root, "scheduler");
  if (!type) return;
  const json params = section->value("params", json::object());
  if (*type == "WarmupCosineLR") {
    map_warmup_cosine_lr(m, params);
    return;
  }
  map_warmup_lr(m, params, *type == "WarmupDecayLR");
  warn_optimizer_lr_unused(m, root, params, *type);
}

// --- the batch triple ---

struct BatchValue {
  std::optional<std::int64_t> value;
  std::string source;     // "train_batch_size", "training.per_device_train_batch_size from --set"
  bool from_file = true;  // false: the genesis setting already holds it (explicit or "auto")
};

// A triple member: the user's explicit TOML key wins, then the file's number; "auto" takes the
// genesis setting; absent is unknown (DeepSpeed derives it).
BatchValue batch_value(const DeepSpeedMapper& m, const json& root, const char* json_name,
                       std::string_view key, std::optional<std::int64_t> current) {
  if (!key.empty())
    if (auto source = m.explicit_source(key))
      return {current, std::string(key) + " from " + *source, false};
  auto it = root.find(json_name);
  if (it == root.end()) return {std::nullopt, json_name};
  if (is_auto(*it)) return {current, std::string(key) + ", \"auto\"", false};
  return {json_integer(*it, m.file(), json_name), json_name};
}

void map_batch(DeepSpeedMapper& m, const json& root) {
  const TrainingConfig& t = m.config().training;
  BatchValue train = batch_value(m, root, "train_batch_size", "", std::nullopt);
  BatchValue micro =
      batch_value(m, root, "train_micro_batch_size_per_gpu", "training.per_device_train_batch_size",
                  t.per_device_train_batch_size);
  BatchValue accum =
      batch_value(m, root, "gradient_accumulation_steps", "training.gradient_accumulation_steps",
                  t.gradient_accumulation_steps);
  if (!train.value && !micro.value && !accum.value) return;
  const std::int64_t world = m.world_size();
  // DeepSpeed's _set_batch_related_parameters: integer division, then the product is checked.
  if (train.value && micro.value && !accum.value) {
    accum = {*train.value / std::max<std::int64_t>(1, *micro.value * world),
             "train_batch_size (derived)"};
  } else if (train.value && !micro.value) {
    if (!accum.value) accum = {1, "train_batch_size (derived)"};
    micro = {*train.value / std::max<std::int64_t>(1, *accum.value * world),
             "train_batch_size (derived)"};
  } else if (!train.value && !micro.value) {
    micro = {t.per_device_train_batch_size, "training.per_device_train_batch_size", false};
  } else if (!train.value && !accum.value) {
    accum = {1, "train_micro_batch_size_per_gpu (derived)"};
  }
  const std::int64_t product = *micro.value * *accum.value * world;
  // "4" when the file said so, "4 (derived ...)" or "8 (... from --set)" otherwise.
  const auto term = [](const char* name, const BatchValue& v) {
    return std::string(name) + " " + std::to_string(*v.value) +
           (v.source == name ? "" : " (" + v.source + ")");
  };
  if (train.value && *train.value != product)
    m.fail("train_batch_size",
           "inconsistent batch sizes: train_batch_size " + std::to_string(*train.value) +
               " != " + term("train_micro_batch_size_per_gpu", micro) + " x " +
               term("gradient_accumulation_steps", accum) + " x world size " +
               std::to_string(world) + " (WORLD_SIZE) = " + std::to_string(product));
  if (micro.from_file)
    m.set_integer("training.per_device_train_batch_size", *micro.value, micro.source);
  if (accum.from_file)
    m.set_integer("training.gradient_accumulation_steps", *accum.value, accum.source);
}

// tensorboard.enabled = true adds "tensorboard" to training.report_to (false leaves it as the
// rest of the config has it: a genesis config is not switched off by a DeepSpeed default).
void map_tensorboard(DeepSpeedMapper& m, const json& root) {
  const json* section = given(root, "tensorboard");
  const json* enabled = section ? given(*section, "enabled") : nullptr;
  if (enabled == nullptr || !enabled->get<bool>()) return;
  toml::array targets;
  for (const std::string& target : m.config().training.report_to) targets.push_back(target);
  if (!m.config().training.reports_to("tensorboard")) targets.push_back("tensorboard");
  m.set("training.report_to", targets, "tensorboard.enabled");
}

}  // namespace

void check_deepspeed_types(const json& root, const std::string& file) {
  if (auto type = type_of(root, "optimizer")) {
    const auto known = names(kOptimizers);
    const bool ours = std::any_of(known.begin(), known.end(),
                                  [&](const std::string& n) { return lower(n) == lower(*type); });
    if (!ours && std::find(kOtherOptimizers.begin(), kOtherOptimizers.end(), lower(*type)) !=
                     kOtherOptimizers.end())
      throw NotSupported(file + ": optimizer.type: \"" + *type +
                         "\" is not supported: genesis has AdamW, Adam and SGD");
    if (!ours)
      throw ConfigError(file + ": optimizer.type: unknown optimizer \"" + *type +
                        "\" (AdamW, Adam or SGD)" + did_you_mean(*type, known));
  }
  if (auto type = type_of(root, "scheduler")) {
    if (std::find(kOtherSchedulers.begin(), kOtherSchedulers.end(), *type) !=
        kOtherSchedulers.end())
      throw NotSupported(
          file + ": scheduler.type: \"" + *type +
          "\" is not supported: genesis has WarmupLR, WarmupDecayLR and WarmupCosineLR (or "
          "drop the scheduler and set training.lr_scheduler_type)");
    if (std::find(kSchedulers.begin(), kSchedulers.end(), *type) == kSchedulers.end())
      throw ConfigError(file + ": scheduler.type: unknown scheduler \"" + *type +
                        "\" (WarmupLR, WarmupDecayLR or WarmupCosineLR)" +
                        did_you_mean(*type, names(kSchedulers)));
  }
}

void map_deepspeed_training(DeepSpeedMapper& m, const json& root) {
  map_optimizer(m, root);
  map_scheduler(m, root);
  map_batch(m, root);
  if (const json* v = given(root, "gradient_clipping"))
    m.set_number("training.max_grad_norm", v->get<double>(), "gradient_clipping");
  if (const json* v = given(root, "steps_per_print"))
    m.set_integer("training.logging_steps", json_integer(*v, m.file(), "steps_per_print"),
                  "steps_per_print");
  // Like tensorboard.enabled, only true acts: DeepSpeed's default does not switch genesis off.
  if (const json* v = given(root, "wall_clock_breakdown"); v && v->get<bool>())
    m.set("training.wall_clock_breakdown", toml::value<bool>(true), "wall_clock_breakdown");
  map_tensorboard(m, root);
  if (const json* checkpoint = given(root, "checkpoint"))
    if (const json* v = given(*checkpoint, "use_node_local_storage"))
      m.set("training.node_local_checkpoints", toml::value<bool>(v->get<bool>()),
            "checkpoint.use_node_local_storage");
}

}  // namespace genesis::config_detail
