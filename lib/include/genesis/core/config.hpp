// The run configuration: DESIGN.md's TOML schema as typed structs, with the defaults a preset
// starts from. Keys follow the seeds' (Hugging Face / DeepSpeed) names so configs read as
// familiar. Parsing, validation and --set overrides live in config_*.cpp; every error names the
// file, line and key, and suggests the closest valid key.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace genesis {

// The keys with a fixed set of values hold them as these enums once the config layer has read and
// checked them: code past that layer switches on values and never compares their text. The text
// (TOML, --print-config, error messages, a checkpoint's saved config) is setting_names' below.
enum class StrategyKind { automatic, ddp, zero1, zero2, zero3, hsdp };  // distributed.strategy
enum class BackendKind { automatic, gloo, nccl, shm };                   // distributed.backend
enum class OffloadKind { none, cpu };  // distributed.offload_optimizer, offload_param
enum class DeviceKind { automatic, cpu, cuda };                  // training.device
enum class MixedPrecision { no, fp16, bf16 };                    // training.mixed_precision
enum class OptimizerKind { adamw, adam, sgd };                   // training.optimizer
// training.lr_scheduler_type
enum class LrSchedulerKind { constant, linear, cosine, warmup_lr, warmup_decay_lr, warmup_cosine_lr };
enum class WarmupType { log, linear };                           // training.warmup_type
enum class Algorithm { sft, rm, dpo, grpo, ppo };                // training.algorithm
enum class ModelHead { lm, value };                              // model.head
enum class DpoLossType { sigmoid, ipo };                         // dpo.loss_type
enum class GrpoLossType { grpo, dapo, dr_grpo };                 // grpo.loss_type
enum class ScaleRewards { group, batch, none };                  // grpo.scale_rewards
enum class CriticKind { head, model };                            // ppo.critic
enum class TruncationMode { keep_start, keep_end };               // data.truncation_mode
enum class LoraInit { kaiming, gaussian };                        // lora.init_lora_weights
enum class LoraBaseDtype { f32, bf16 };                           // lora.base_dtype

// Each setting's spellings, in enum order, which is also the order error messages list them in.
template <std::size_t N>
using SettingNames = std::array<std::string_view, N>;
constexpr SettingNames<6> setting_names(StrategyKind) {
  return {"auto", "ddp", "zero1", "zero2", "zero3", "hsdp"};
}
constexpr SettingNames<4> setting_names(BackendKind) { return {"auto", "gloo", "nccl", "shm"}; }
constexpr SettingNames<2> setting_names(OffloadKind) { return {"none", "cpu"}; }
constexpr SettingNames<3> setting_names(DeviceKind) { return {"auto", "cpu", "cuda"}; }
constexpr SettingNames<3> setting_names(MixedPrecision) { return {"no", "fp16", "bf16"}; }
constexpr SettingNames<3> setting_names(OptimizerKind) { return {"adamw", "adam", "sgd"}; }
constexpr SettingNames<6> setting_names(LrSchedulerKind) {
  return {"constant", "linear", "cosine", "warmup_lr", "warmup_decay_lr", "warmup_cosine_lr"};
}
constexpr SettingNames<2> setting_names(WarmupType) { return {"log", "linear"}; }
constexpr SettingNames<5> setting_names(Algorithm) { return {"sft", "rm", "dpo", "grpo", "ppo"}; }
constexpr SettingNames<2> setting_names(ModelHead) { return {"lm", "value"}; }
constexpr SettingNames<2> setting_names(DpoLossType) { return {"sigmoid", "ipo"}; }
constexpr SettingNames<3> setting_names(GrpoLossType) { return {"grpo", "dapo", "dr_grpo"}; }
constexpr SettingNames<3> setting_names(ScaleRewards) { return {"group", "batch", "none"}; }
constexpr SettingNames<2> setting_names(TruncationMode) { return {"keep_start", "keep_end"}; }
constexpr SettingNames<2> setting_names(CriticKind) { return {"head", "model"}; }
// PEFT's init_lora_weights: true (TOML's boolean reads as "true") or "gaussian".
constexpr SettingNames<2> setting_names(LoraInit) { return {"true", "gaussian"}; }
constexpr SettingNames<2> setting_names(LoraBaseDtype) { return {"f32", "bf16"}; }

template <typename E>
concept Setting = std::is_enum_v<E> && requires(E value) { setting_names(value); };

// "zero3" for StrategyKind::zero3.
template <Setting E>
constexpr std::string_view to_string(E value) {
  return setting_names(value)[static_cast<std::size_t>(value)];
}

// The value spelled `text`; nullopt when none is (the config layer's errors say which are).
template <Setting E>
constexpr std::optional<E> parse_setting(std::string_view text) {
  constexpr auto names = setting_names(E{});
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

struct ModelConfig {
  // "mlp" | "gpt" | "hf": a Hugging Face family (llama, mistral, qwen2, qwen3, gpt2) from the
  // config.json of model.init_from or model.config, which either of those implies.
  std::string kind = "mlp";
  // mlp: input_size -> hidden_sizes... -> num_classes, ReLU between
  std::int64_t input_size = 784;
  std::vector<std::int64_t> hidden_sizes = {512, 256};
  std::int64_t num_classes = 10;
  // gpt: GPT-2 layout (learned positions, pre-LN blocks, tied embeddings)
  std::int64_t n_layer = 4;
  std::int64_t n_head = 4;
  std::int64_t n_embd = 256;
  std::int64_t block_size = 128;
  std::int64_t vocab_size = 256;
  double dropout = 0.0;
  // gpt: lm, the tied language-model head (logits per position); value, one scalar per position
  // from the last hidden state (a reward model's score).
  ModelHead head = ModelHead::lm;
  // The weights training starts from: a run directory (its latest checkpoint), a checkpoint
  // directory, a .safetensors file `genesis ckpt export` wrote, a Hugging Face model directory or
  // a Hub id in the local Hugging Face cache; "": the seed's random init.
  std::string init_from;
  // hf: a config.json whose model is built with fresh weights (transformers' initialisation).
  std::string config;
};

struct DataConfig {
  // "synthetic:classification" (mlp) | "synthetic:tokens" (gpt)
  std::string source = "synthetic:classification";
  std::int64_t num_samples = 20000;  // examples (classification) or sequences (tokens) generated
  double eval_fraction = 0.1;        // held out for evaluation
  // The tokenizer of text data: "byte", or a tokenizer.json / a directory holding one / a Hub id.
  // Empty: an hf model's own tokenizer where its directory has one, else "byte".
  std::string tokenizer;
  // Where the token cache keeps encoded data files; empty: $XDG_CACHE_HOME/genesis/tokens (else
  // ~/.cache/genesis/tokens).
  std::string cache_dir;
  // A Jinja chat template file rendering conversations in place of the tokenizer's own
  // (tokenizer_config.json's chat_template, or chat_template.jinja beside it).
  std::string chat_template;
  // TRL's losses: prompt-completion data trains on the completion only; conversations on every
  // assistant turn (with the end-of-turn tokens the template puts after it) and nothing else.
  bool completion_only_loss = true;
  bool assistant_only_loss = true;
  // Which end of an example longer than model.block_size is kept.
  TruncationMode truncation_mode = TruncationMode::keep_start;
  // SFT training rows hold whole examples one after another (best-fit decreasing) instead of one
  // example and padding, each example attending to itself only; evaluation rows stay unpacked.
  bool packing = false;
};

// The largest micro-batch not above `limit` that divides `per_rank`, so per-rank memory does not
// grow and gradient accumulation makes up the rest (training.train_batch_size, a resharded
// checkpoint's new world).
inline std::int64_t micro_batch_for(std::int64_t per_rank, std::int64_t limit) {
  for (std::int64_t b = std::min(limit, per_rank); b > 1; --b)
    if (per_rank % b == 0) return b;
  return 1;
}

struct TrainingConfig {
  // What the model is trained to do, and so the objective and the data it reads: sft, the next
  // tokens of a response; rm, a reward that ranks a chosen response above a rejected one.
  Algorithm algorithm = Algorithm::sft;
  std::int64_t per_device_train_batch_size = 64;
  std::int64_t gradient_accumulation_steps = 1;
  // Examples per optimizer step over all ranks; 0: per_device x ranks x accumulation. When set,
  // load_config derives the other two for the job's world size (config_load.cpp).
  std::int64_t train_batch_size = 0;
  std::int64_t max_steps = 500;
  double learning_rate = 1e-3;
  double weight_decay = 0.0;
  OptimizerKind optimizer = OptimizerKind::adamw;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double momentum = 0.9;                   // sgd
  LrSchedulerKind lr_scheduler_type = LrSchedulerKind::cosine;
  double warmup_ratio = 0.0;                 // fraction of max_steps
  std::int64_t warmup_steps = 0;             // wins over warmup_ratio when > 0
  // warmup_lr (DeepSpeed's WarmupLR): the lr rises from warmup_min_lr to learning_rate over the
  // warmup steps, along log(step + 1) / log(warmup) or linearly, then stays at learning_rate;
  // warmup_decay_lr (WarmupDecayLR) then falls linearly back to warmup_min_lr at lr_decay_steps.
  // warmup_cosine_lr (WarmupCosineLR) scales learning_rate: up from warmup_min_ratio over the
  // warmup, then a half cosine down to cos_min_ratio at lr_decay_steps.
  double warmup_min_lr = 0.0;
  WarmupType warmup_type = WarmupType::log;
  std::int64_t lr_decay_steps = 0;  // warmup_decay/cosine_lr: DeepSpeed's total_num_steps; 0: max_steps
  double warmup_min_ratio = 0.0;
  double cos_min_ratio = 0.0001;
  double max_grad_norm = 1.0;                // 0 disables clipping
  // A step whose gradients are not finite stops training before its update, with an error (as
  // Megatron-LM's check for NaN in the loss and gradients); fp16's loss scaling skips such steps
  // instead. False trains on (and saves) whatever the parameters become.
  bool stop_on_nan = true;
  // bf16 | fp16: matmuls and attention in reduced precision, fp32 master weights; fp16 scales
  // the loss dynamically ([loss_scale]).
  MixedPrecision mixed_precision = MixedPrecision::no;
  bool gradient_checkpointing = false;       // gpt: recompute each block's activations in backward
  std::int64_t logging_steps = 50;
  // Where logged figures go besides the log: "jsonl" (metrics.jsonl, always, listed or not) and
  // "tensorboard" (event files under <run>/tensorboard/); load_config refuses anything else.
  std::vector<std::string> report_to{"jsonl"};
  // DeepSpeed's key: every log line also says where the window's steps spent their time (data,
  // forward, backward, waiting for communication, optimizer, checkpoint: time/*_ms), and
  // summary.json sums it over the run (time_breakdown).
  bool wall_clock_breakdown = false;
  // Rank 0 warns when a rank's step time, less its waiting for communication, stays above the
  // ranks' median by more than this fraction for 3 logging steps in a row; 0: never.
  double straggler_threshold = 0.2;
  // "A-B": a Chrome/Perfetto trace of steps A to B from every rank in <run>/trace.json; "": none.
  std::string profile_steps;
  std::int64_t eval_steps = 0;  // 0: evaluate only at the end
  std::int64_t eval_batches = 0;  // 0: the whole eval split
  DeviceKind device = DeviceKind::automatic;
  std::string output_dir = "runs";
  // Checkpoints under <output_dir>/<name>/checkpoints/: every save_steps steps (0: none on the
  // way) and always after the last step.
  std::int64_t save_steps = 0;
  std::int64_t save_total_limit = 0;       // committed checkpoints kept; 0: all
  // A save on the way is written by a thread while the next steps train; the next optimizer step
  // waits only for a copy of what the disk has not taken yet (torch.distributed.checkpoint's
  // async_save). The save after the last step and one on a signal are written at once.
  bool save_async = true;
  // "": start fresh | "auto": latest loadable if any | a path. A `genesis launch --max-restarts`
  // restart resumes from the run's own newest loadable checkpoint whatever this says.
  std::string resume_from_checkpoint;
  // A fresh start in a run directory that holds checkpoints deletes them when true and is
  // refused otherwise, so an earlier run's checkpoints are never lost to a forgotten --resume.
  bool overwrite_output_dir = false;
  // Each node keeps its own ranks' checkpoint shards in its own run directory, for hosts that
  // do not share one (DeepSpeed's checkpoint.use_node_local_storage); false: every rank must see
  // rank 0's run directory, which the start checks.
  bool node_local_checkpoints = false;

  bool reports_to(std::string_view target) const {
    return std::find(report_to.begin(), report_to.end(), target) != report_to.end();
  }
};

struct DistributedConfig {
  StrategyKind strategy = StrategyKind::automatic;
  BackendKind backend = BackendKind::automatic;  // auto: nccl on a GPU, shm+gloo on the CPU
  double bucket_cap_mb = 25;      // DDP gradient bucket size
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  // The trainer holds no .grad across steps, so it can let .grad alias the bucket (DDPOptions
  // keeps PyTorch's default, false, for code that might).
  bool gradient_as_bucket_view = true;
  double timeout_s = 1800;  // collectives and rendezvous
  std::int64_t hsdp_shard_size = 0;        // 0: the ranks of one node (LOCAL_WORLD_SIZE)
  OffloadKind offload_optimizer = OffloadKind::none;
  OffloadKind offload_param = OffloadKind::none;  // zero3/hsdp: parameter shards on the host
  // zero3/hsdp prefetch limits, in elements (DeepSpeed's stage3_prefetch_bucket_size and
  // stage3_max_live_parameters, with their defaults).
  std::int64_t prefetch_bucket_size = 50'000'000;
  std::int64_t max_live_parameters = 1'000'000'000;
  // zero3/hsdp: parameters of at most this many elements stay gathered between their uses
  // (DeepSpeed's stage3_param_persistence_threshold, whose default is 1e5; 0: none).
  std::int64_t param_persistence_threshold = 0;
  double memory_budget_gb = 0;             // auto's per-rank budget; 0: device or host memory
  // A DeepSpeed ds_config.json read over the preset: explicit keys of --config and --set win
  // over what it sets (core/deepspeed_config.cpp). Empty: none.
  std::string deepspeed_config;
};

// fp16's dynamic loss scaling, DeepSpeed's keys (amp::GradScalerOptions).
struct LossScaleConfig {
  std::int64_t initial_scale_power = 16;  // the first scale is 2^this
  std::int64_t loss_scale_window = 1000;  // clean steps before the scale doubles
  std::int64_t hysteresis = 2;            // overflowing steps absorbed before it halves
  double min_loss_scale = 1;              // overflowing here stops the run
  double static_scale = 0;  // 0: dynamic; else this fixed scale (DeepSpeed's fp16.loss_scale)
};

// training.algorithm = "dpo": TRL's DPOConfig names and defaults.
struct DpoConfig {
  double beta = 0.1;  // how far from the reference the policy may move
  DpoLossType loss_type = DpoLossType::sigmoid;
  double label_smoothing = 0;  // sigmoid: the share of pairs assumed mislabelled (cDPO)
  // Weight of the chosen responses' negative log-likelihood (per token) added to the loss, as
  // TRL's rpo_alpha (Pang et al. 2024); 0: none.
  double rpo_alpha = 0;
  // The reference model's log-probabilities computed in one pass before training instead of
  // holding the reference model beside the policy.
  bool precompute_ref_log_probs = false;
};

// training.algorithm = "grpo": TRL's GRPOConfig names. Each step a rank completes its
// per_device_train_batch_size prompts num_generations times each and learns from the rewards.
struct GrpoConfig {
  std::int64_t num_generations = 8;        // completions of each prompt: its group
  std::int64_t max_completion_length = 0;  // tokens a completion may have; 0: up to block_size
  double temperature = 1.0;                // sampling
  double top_p = 1.0;
  std::int64_t top_k = 0;  // 0: no cut
  double beta = 0.0;       // weight of the k3 KL estimate to the reference; 0: no reference held
  double epsilon = 0.2;    // the surrogate's clip: ratios in [1 - epsilon, 1 + epsilon_high]
  double epsilon_high = 0.0;  // 0: epsilon
  GrpoLossType loss_type = GrpoLossType::grpo;
  ScaleRewards scale_rewards = ScaleRewards::group;  // what a reward's distance to its group mean
                                                     // is divided by
  std::int64_t num_iterations = 1;  // updates per rollout (TRL's mu)
};

// training.algorithm = "ppo": TRL's PPOConfig names. Each step a rank completes its prompts once
// each; the policy's value head (the critic, sharing its trunk) estimates each completion token's
// return, GAE turns rewards into advantages, and the clipped policy and value losses train both.
struct PpoConfig {
  std::int64_t num_ppo_epochs = 4;    // passes over each rollout: one sampling every
                                      // num_ppo_epochs x num_mini_batches steps
  std::int64_t num_mini_batches = 1;  // parts each micro-batch's rollout is trained on in turn
  std::int64_t max_completion_length = 0;  // tokens a completion may have; 0: up to block_size
  double temperature = 1.0;                // sampling
  double gamma = 1.0;                      // discount of later rewards
  double lam = 0.95;                       // GAE's lambda
  double cliprange = 0.2;                  // the policy ratio's clip
  double cliprange_value = 0.2;            // how far a value may move from its rollout's value
  double vf_coef = 0.1;                    // weight of the value loss
  // The critic: a value head on the policy's trunk, or a model of its own (TRL's value model)
  // that starts as reward.model when one is given.
  CriticKind critic = CriticKind::head;
  double critic_lr_scale = 1.0;            // the critic head's learning rate over the policy's (Adam)
  double kl_coef = 0.05;                   // per-token KL penalty folded into the reward
  // Ziegler et al.'s adaptive controller: kl_coef moves to keep the rollouts' KL near target_kl.
  bool adaptive_kl = false;
  double target_kl = 6.0;
  double kl_horizon = 10000;
  bool whiten_advantages = true;  // advantages to mean 0 and std 1 over each micro-batch's rollout
};

// Where an online algorithm's rewards come from.
struct RewardConfig {
  // "name:weight" of built-in rewards, summed with their weights: exact (the completion is the
  // task's answer and end-of-text), chars (the share of positions that match it: partial
  // credit), format (it ends at end-of-text with printable text only).
  std::vector<std::string> functions{"exact:1.0"};
  // A program (run with sh -c) that reads JSONL {"prompt", "completion"} lines on stdin and
  // answers one number per line: its score is added to the functions' with weight 1.
  std::string command;
  double timeout_s = 60;  // the command's time for one micro-batch before it fails the step
  std::string model;      // a reward model trained by algorithm = "rm": its score is added
};

// LoRA adapters in PEFT's terms (LoraConfig's names and defaults); r = 0: none, full fine-tuning.
struct LoraConfig {
  std::int64_t r = 0;  // the adapters' rank
  double lora_alpha = 8;
  double lora_dropout = 0.0;
  // Module names matched as PEFT matches a list (the name, or its last dotted parts), or
  // ["all-linear"]: every linear layer but the output head and value heads. Empty: PEFT's
  // default for the family (q_proj and v_proj; GPT-2's c_attn).
  std::vector<std::string> target_modules;
  // Modules trained in full and saved with the adapter (a reward model's "score").
  std::vector<std::string> modules_to_save;
  bool use_rslora = false;  // scale lora_alpha / sqrt(r) instead of lora_alpha / r
  LoraInit init_lora_weights = LoraInit::kaiming;
  LoraBaseDtype base_dtype = LoraBaseDtype::f32;  // the frozen base's storage
  std::string init_from;  // an adapter directory (PEFT's layout) to start from
  bool enabled() const { return r != 0; }
};

struct Config {
  std::string name = "run";  // run directory: <output_dir>/<name>/
  std::uint64_t seed = 42;
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
  DistributedConfig distributed;
  LossScaleConfig loss_scale;
  DpoConfig dpo;
  GrpoConfig grpo;
  PpoConfig ppo;
  RewardConfig reward;
  LoraConfig lora;
  // Not a key: the settings a DeepSpeed file made, key -> its JSON path ("distributed.strategy"
  // -> "zero_optimization.stage"), so --print-config can say where each came from.
  std::map<std::string, std::string> from_deepspeed;
};

// Where presets are looked up, first match wins: $GENESIS_PRESET_PATH (':'-separated), then
// <directory of the genesis binary>/../share/genesis/presets.
std::vector<std::filesystem::path> preset_dirs();
std::vector<std::string> list_presets();                  // names without .toml, sorted
std::filesystem::path find_preset(const std::string& name);  // ConfigError if missing

// Builds a config from defaults, then the preset (if any), then the DeepSpeed JSON named by
// distributed.deepspeed_config (if any), then the file (if any), then each "section.key=value"
// override in order: the JSON is read last but leaves every key the file or an override set.
// Throws ConfigError (exit 2) on any problem, NotSupported for DeepSpeed features genesis lacks.
Config load_config(const std::string& preset, const std::filesystem::path& file,
                   const std::vector<std::string>& overrides);
// A config saved as TOML text (a checkpoint manifest's config_toml) read back over the defaults,
// with load_config's checks; `source` stands for the file name in errors.
Config parse_config_toml(const std::string& text, const std::string& source);
// Whether model.init_from (or a model named on the command line) names a Hugging Face model: a
// directory with a config.json that is not a genesis run or checkpoint, or, when no such path
// exists, a Hub id ("org/name") that the local Hugging Face cache holds.
bool names_hf_model(const std::string& path_or_id);
// Whether `text`, naming no existing path, reads as a Hub id: "org/name" of letters, digits and
// "_.-" (huggingface_hub's rule), not a path ("./x", "a/b/c", "x.safetensors").
bool looks_like_hub_id(const std::string& text);
// The resolved config as TOML (what `genesis train --print-config` shows); load_config of this
// text reproduces the same Config.
std::string config_to_toml(const Config& config);

// The config keys ("section.key") whose last part is `name`: "learning_rate" names
// training.learning_rate, "beta" both dpo.beta and grpo.beta; with `typos` and none named so,
// those whose last part is within a likely typo of it ("maxsteps": training.max_steps). For a
// flag genesis does not take, as HF Trainer and TRL take `--learning_rate 1e-4` where genesis
// takes --set.
std::vector<std::string> config_keys_named(std::string_view name, bool typos);
// Whether the config key ("section.key") takes true or false.
bool config_key_is_bool(std::string_view key);
// The candidate closest to `word` by edit distance, when it is close enough to be a likely typo.
std::optional<std::string> closest_name(std::string_view word,
                                        const std::vector<std::string>& candidates);

// training.profile_steps: "A-B" (1 <= A <= B) or "A" (A-A); "" is nullopt. ConfigError says
// what is wrong with any other text.
struct StepRange {
  std::int64_t first = 0, last = 0;
};
std::optional<StepRange> parse_step_range(const std::string& text);

}  // namespace genesis
