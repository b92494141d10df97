// The rows of the config schema (DESIGN.md's TOML keys, Hugging Face / DeepSpeed names), one per
// key in the order --print-config shows them. Defaults live in config.hpp's member initialisers,
// not here, so the C++ API and the TOML agree by construction.
#include "config_schema.hpp"

#include <algorithm>
#include <utility>

namespace genesis::config_detail {

namespace {

// The top-level keys.
std::vector<ConfigKey> top_level_keys() {
  return {
    {"name", "run directory: <training.output_dir>/<name>/",
     [](Config& c) -> Field { return &c.name; }, Rule::run_name},
    {"seed", "seed for initialisation, data generation and dropout",
     [](Config& c) -> Field { return &c.seed; }},
  };
}

// [model]
std::vector<ConfigKey> model_keys() {
  return {
    {"model.kind",
     "model family: mlp | gpt | hf (a Hugging Face llama, mistral, qwen2, qwen3 or gpt2, which "
     "model.init_from naming a Hugging Face model or model.config implies)",
     [](Config& c) -> Field { return &c.model.kind; }, Rule::any, {"mlp", "gpt", "hf"}},
    {"model.input_size", "mlp: features per example",
     [](Config& c) -> Field { return &c.model.input_size; }, Rule::positive},
    {"model.hidden_sizes", "mlp: width of each hidden layer, ReLU between",
     [](Config& c) -> Field { return &c.model.hidden_sizes; }, Rule::positive},
    {"model.num_classes", "mlp: output classes",
     [](Config& c) -> Field { return &c.model.num_classes; }, Rule::positive},
    {"model.n_layer", "gpt: transformer blocks",
     [](Config& c) -> Field { return &c.model.n_layer; }, Rule::positive},
    {"model.n_head", "gpt: attention heads per block (must divide n_embd)",
     [](Config& c) -> Field { return &c.model.n_head; }, Rule::positive},
    {"model.n_embd", "gpt: embedding width",
     [](Config& c) -> Field { return &c.model.n_embd; }, Rule::positive},
    {"model.block_size", "gpt, hf: training sequence length in tokens (hf: at most max_position_embeddings)",
     [](Config& c) -> Field { return &c.model.block_size; }, Rule::positive},
    {"model.vocab_size", "gpt: vocabulary size",
     [](Config& c) -> Field { return &c.model.vocab_size; }, Rule::positive},
    {"model.head",
     "gpt: lm (logits over the vocabulary) | value (one score per sequence, for training.algorithm "
     "= \"rm\")",
     [](Config& c) -> Field { return &c.model.head; }},
    {"model.dropout", "gpt: dropout probability in [0, 1)",
     [](Config& c) -> Field { return &c.model.dropout; }, Rule::probability},
    {"model.init_from",
     "weights to start from: a run directory (its latest checkpoint), a checkpoint directory, "
     "a .safetensors file from `genesis ckpt export`, a Hugging Face model directory, or a Hub id "
     "(\"Qwen/Qwen3-0.6B\") in the local Hugging Face cache; \"\": the seed's random init",
     [](Config& c) -> Field { return &c.model.init_from; }},
    {"model.config",
     "hf: a Hugging Face config.json to build with fresh weights (transformers' initialisation), "
     "for pre-training; model.block_size stays the training sequence length",
     [](Config& c) -> Field { return &c.model.config; }},
  };
}

// [data]
std::vector<ConfigKey> data_keys() {
  return {
    {"data.source",
     "dataset: synthetic:classification (mlp) | synthetic:tokens | tasks:reverse,sort,... | "
     "chat:reverse,sort,... (the tasks over words, as conversations) | pairs:reverse,... | "
     "jsonl:FILE | json:FILE (text data in TRL's formats)",
     [](Config& c) -> Field { return &c.data.source; }, Rule::non_empty},
    {"data.num_samples", "examples (classification) or sequences (tokens) generated",
     [](Config& c) -> Field { return &c.data.num_samples; }, Rule::positive},
    {"data.eval_fraction", "fraction held out for evaluation, in (0, 1)",
     [](Config& c) -> Field { return &c.data.eval_fraction; }, Rule::open_unit},
    {"data.tokenizer",
     "tokenizer of text data: byte | a tokenizer.json, a directory holding one, or a Hub id "
     "(default: an hf model's own, else byte)",
     [](Config& c) -> Field { return &c.data.tokenizer; }},
    {"data.cache_dir",
     "where encoded jsonl data is cached (default: $XDG_CACHE_HOME/genesis/tokens, else "
     "~/.cache/genesis/tokens)",
     [](Config& c) -> Field { return &c.data.cache_dir; }},
    {"data.chat_template",
     "a Jinja chat template file rendering conversations in place of the tokenizer's own "
     "(tokenizer_config.json's chat_template or chat_template.jinja)",
     [](Config& c) -> Field { return &c.data.chat_template; }},
    {"data.completion_only_loss",
     "prompt-completion data trains on the completion only (false: on every token)",
     [](Config& c) -> Field { return &c.data.completion_only_loss; }},
    {"data.assistant_only_loss",
     "conversations train on every assistant turn and its end-of-turn tokens only (false: on "
     "every token)",
     [](Config& c) -> Field { return &c.data.assistant_only_loss; }},
    {"data.truncation_mode",
     "keep_start | keep_end: which end of an example longer than model.block_size is kept",
     [](Config& c) -> Field { return &c.data.truncation_mode; }},
    {"data.packing",
     "sft: fill each training row of model.block_size with whole examples (best-fit "
     "decreasing) instead of one example and padding; positions restart at each example and "
     "attention stays inside it, so each example's loss is unchanged; batch sizes count rows",
     [](Config& c) -> Field { return &c.data.packing; }},
  };
}

// [training]
std::vector<ConfigKey> training_keys() {
  return {
    {"training.algorithm",
     "sft (next tokens of a response) | rm (reward model: chosen ranked above rejected, "
     "Bradley-Terry) | dpo | grpo (online: rewards of sampled completions against their group) | "
     "ppo (online: a value head and GAE)",
     [](Config& c) -> Field { return &c.training.algorithm; }},
    {"training.per_device_train_batch_size", "examples per step on each device",
     [](Config& c) -> Field { return &c.training.per_device_train_batch_size; }, Rule::positive},
    {"training.gradient_accumulation_steps", "micro-batches summed before each optimizer step",
     [](Config& c) -> Field { return &c.training.gradient_accumulation_steps; }, Rule::positive},
    {"training.train_batch_size",
     "examples per optimizer step over all ranks, so any number of ranks trains alike (0: "
     "per_device_train_batch_size x ranks x accumulation); each rank's micro-batch is then the "
     "largest divisor of its share up to per_device_train_batch_size, accumulation the rest",
     [](Config& c) -> Field { return &c.training.train_batch_size; }, Rule::non_negative},
    {"training.max_steps", "optimizer steps to train",
     [](Config& c) -> Field { return &c.training.max_steps; }, Rule::positive},
    {"training.learning_rate", "peak learning rate",
     [](Config& c) -> Field { return &c.training.learning_rate; }, Rule::positive},
    {"training.weight_decay", "decoupled (adamw) or L2 (adam, sgd) weight decay",
     [](Config& c) -> Field { return &c.training.weight_decay; }, Rule::non_negative},
    {"training.optimizer", "adamw | adam | sgd",
     [](Config& c) -> Field { return &c.training.optimizer; }},
    {"training.adam_beta1", "adam/adamw: first-moment decay in [0, 1)",
     [](Config& c) -> Field { return &c.training.adam_beta1; }, Rule::probability},
    {"training.adam_beta2", "adam/adamw: second-moment decay in [0, 1)",
     [](Config& c) -> Field { return &c.training.adam_beta2; }, Rule::probability},
    {"training.adam_epsilon", "adam/adamw: denominator epsilon",
     [](Config& c) -> Field { return &c.training.adam_epsilon; }, Rule::positive},
    {"training.momentum", "sgd: momentum in [0, 1)",
     [](Config& c) -> Field { return &c.training.momentum; }, Rule::probability},
    {"training.lr_scheduler_type",
     "constant | linear | cosine (after a linear warmup) | warmup_lr | warmup_decay_lr | "
     "warmup_cosine_lr (DeepSpeed's WarmupLR, WarmupDecayLR, WarmupCosineLR)",
     [](Config& c) -> Field { return &c.training.lr_scheduler_type; }},
    {"training.warmup_ratio", "linear warmup as a fraction of max_steps, in [0, 1)",
     [](Config& c) -> Field { return &c.training.warmup_ratio; }, Rule::probability},
    {"training.warmup_steps", "linear warmup steps; wins over warmup_ratio when > 0",
     [](Config& c) -> Field { return &c.training.warmup_steps; }, Rule::non_negative},
    {"training.warmup_min_lr", "warmup_lr, warmup_decay_lr: the lr the warmup starts from",
     [](Config& c) -> Field { return &c.training.warmup_min_lr; }, Rule::non_negative},
    {"training.warmup_type",
     "warmup_lr, warmup_decay_lr, warmup_cosine_lr: log | linear rise over the warmup",
     [](Config& c) -> Field { return &c.training.warmup_type; }},
    {"training.lr_decay_steps",
     "warmup_decay_lr, warmup_cosine_lr: the step where the decay ends (DeepSpeed's "
     "total_num_steps); 0: max_steps",
     [](Config& c) -> Field { return &c.training.lr_decay_steps; }, Rule::non_negative},
    {"training.warmup_min_ratio",
     "warmup_cosine_lr: the fraction of learning_rate the warmup starts from, in [0, 1)",
     [](Config& c) -> Field { return &c.training.warmup_min_ratio; }, Rule::probability},
    {"training.cos_min_ratio",
     "warmup_cosine_lr: the fraction of learning_rate the cosine ends at, in [0, 1)",
     [](Config& c) -> Field { return &c.training.cos_min_ratio; }, Rule::probability},
    {"training.max_grad_norm", "clip gradients to this global norm; 0 disables clipping",
     [](Config& c) -> Field { return &c.training.max_grad_norm; }, Rule::non_negative},
    {"training.stop_on_nan",
     "stop with an error, before the update, at a step whose gradients are NaN or infinite "
     "(training diverged); fp16 skips such steps instead; false trains on",
     [](Config& c) -> Field { return &c.training.stop_on_nan; }},
    {"training.mixed_precision",
     "no | bf16 | fp16: matmuls and attention in reduced precision, fp32 master weights; fp16 "
     "scales the loss ([loss_scale])",
     [](Config& c) -> Field { return &c.training.mixed_precision; }},
    {"training.gradient_checkpointing",
     "gpt: recompute each block's activations in backward (less memory, same gradients)",
     [](Config& c) -> Field { return &c.training.gradient_checkpointing; }},
    {"training.logging_steps", "log loss and accuracy every this many steps",
     [](Config& c) -> Field { return &c.training.logging_steps; }, Rule::positive},
    {"training.report_to",
     "where logged figures go besides the log: jsonl (metrics.jsonl, always written) | "
     "tensorboard (<run>/tensorboard/events.out.tfevents.*, rank 0)",
     [](Config& c) -> Field { return &c.training.report_to; }},
    {"training.wall_clock_breakdown",
     "log where each step's time goes (time/*_ms: data, forward, backward, comm_wait, "
     "optimizer, checkpoint) and sum it in summary.json; on a GPU each phase waits for its "
     "kernels",
     [](Config& c) -> Field { return &c.training.wall_clock_breakdown; }},
    {"training.straggler_threshold",
     "warn when a rank's step time (less communication wait) stays above the ranks' median by "
     "more than this fraction for 3 logging steps; 0: never",
     [](Config& c) -> Field { return &c.training.straggler_threshold; }, Rule::non_negative},
    {"training.profile_steps",
     "\"A-B\": write a Chrome/Perfetto trace of steps A to B, every rank on one timeline, to "
     "<run>/trace.json; \"\": none",
     [](Config& c) -> Field { return &c.training.profile_steps; }},
    {"training.eval_steps", "evaluate every this many steps; 0: only at the end",
     [](Config& c) -> Field { return &c.training.eval_steps; }, Rule::non_negative},
    {"training.eval_batches", "batches per evaluation; 0: the whole eval split",
     [](Config& c) -> Field { return &c.training.eval_batches; }, Rule::non_negative},
    {"training.device", "auto | cpu | cuda", [](Config& c) -> Field { return &c.training.device; }},
    {"training.output_dir", "parent of the run directory",
     [](Config& c) -> Field { return &c.training.output_dir; }, Rule::non_empty},
    {"training.save_steps", "checkpoint every this many steps; 0: only after the last step",
     [](Config& c) -> Field { return &c.training.save_steps; }, Rule::non_negative},
    {"training.save_total_limit", "checkpoints kept (the oldest go first); 0: keep all",
     [](Config& c) -> Field { return &c.training.save_total_limit; }, Rule::non_negative},
    {"training.save_async",
     "saves on the way are written while the next steps train, the optimizer step waiting only "
     "for a copy of what the disk has not taken yet; false: each save is written before "
     "training goes on (the last step's save always is)",
     [](Config& c) -> Field { return &c.training.save_async; }},
    {"training.resume_from_checkpoint",
     "\"\": start fresh; \"auto\": resume from the run's latest checkpoint if any; or a "
     "checkpoint path",
     [](Config& c) -> Field { return &c.training.resume_from_checkpoint; }, Rule::any},
    {"training.overwrite_output_dir",
     "a fresh start deletes the run directory's checkpoints (refused when false)",
     [](Config& c) -> Field { return &c.training.overwrite_output_dir; }},
    {"training.node_local_checkpoints",
     "each node keeps its own ranks' checkpoint shards in its own run directory, for hosts "
     "that do not share one (DeepSpeed's use_node_local_storage); false: every rank must see "
     "rank 0's run directory",
     [](Config& c) -> Field { return &c.training.node_local_checkpoints; }},
  };
}

// [distributed]
std::vector<ConfigKey> distributed_keys() {
  return {
    {"distributed.strategy", "auto | ddp | zero1 | zero2 | zero3 | hsdp (auto: by memory)",
     [](Config& c) -> Field { return &c.distributed.strategy; }},
    {"distributed.backend",
     "auto | gloo | nccl | shm (auto: nccl on a GPU; on the CPU shared memory within a host and "
     "gloo across hosts; shm: CPU ranks of one host through shared memory)",
     [](Config& c) -> Field { return &c.distributed.backend; }},
    {"distributed.bucket_cap_mb", "gradient bucket size in MiB, for every strategy (ddp's all-reduce, zero1/zero2's reduce-scatter)",
     [](Config& c) -> Field { return &c.distributed.bucket_cap_mb; }, Rule::positive},
    {"distributed.find_unused_parameters",
     "ddp: parameters without a gradient are marked ready instead of an error",
     [](Config& c) -> Field { return &c.distributed.find_unused_parameters; }},
    {"distributed.broadcast_buffers", "ddp: copy rank 0's buffers to every rank before forward",
     [](Config& c) -> Field { return &c.distributed.broadcast_buffers; }},
    {"distributed.gradient_as_bucket_view",
     "ddp: .grad views its bucket, where backward writes it: no copy in or out, one gradient's "
     "memory; false: .grad a tensor of its own (PyTorch's default)",
     [](Config& c) -> Field { return &c.distributed.gradient_as_bucket_view; }},
    {"distributed.timeout_s", "seconds a collective or the rendezvous may wait",
     [](Config& c) -> Field { return &c.distributed.timeout_s; }, Rule::positive},
    {"distributed.hsdp_shard_size", "hsdp: ranks per shard group; 0: the ranks of one node",
     [](Config& c) -> Field { return &c.distributed.hsdp_shard_size; }, Rule::non_negative},
    {"distributed.offload_optimizer", "none | cpu: optimizer state and update on the host",
     [](Config& c) -> Field { return &c.distributed.offload_optimizer; }},
    {"distributed.offload_param",
     "none | cpu: zero3/hsdp parameter shards, their gradients and the update on the host, each "
     "unit copied to the device as it is gathered",
     [](Config& c) -> Field { return &c.distributed.offload_param; }},
    {"distributed.prefetch_bucket_size",
     "zero3/hsdp: elements the next unit may hold to be all-gathered ahead of its use; 0: no "
     "prefetch (DeepSpeed's stage3_prefetch_bucket_size)",
     [](Config& c) -> Field { return &c.distributed.prefetch_bucket_size; }, Rule::non_negative},
    {"distributed.max_live_parameters",
     "zero3/hsdp: no prefetch makes more elements gathered at once than this (DeepSpeed's "
     "stage3_max_live_parameters)",
     [](Config& c) -> Field { return &c.distributed.max_live_parameters; }, Rule::positive},
    {"distributed.param_persistence_threshold",
     "zero3/hsdp: parameters of at most this many elements stay gathered from the first forward "
     "after a step until the next step (one all-gather per step); their gradients and optimizer "
     "state stay sharded; 0: none (DeepSpeed's stage3_param_persistence_threshold)",
     [](Config& c) -> Field { return &c.distributed.param_persistence_threshold; },
     Rule::non_negative},
    {"distributed.memory_budget_gb",
     "auto: per-rank memory for model state, GiB; 0: device memory (GPU) or host memory / ranks",
     [](Config& c) -> Field { return &c.distributed.memory_budget_gb; }, Rule::non_negative},
    {"distributed.deepspeed_config",
     "DeepSpeed ds_config.json read over the preset (--config keys and --set win); \"\": none",
     [](Config& c) -> Field { return &c.distributed.deepspeed_config; }},
  };
}

// [loss_scale]
std::vector<ConfigKey> loss_scale_keys() {
  return {
    {"loss_scale.initial_scale_power", "fp16: the first loss scale is 2^this",
     [](Config& c) -> Field { return &c.loss_scale.initial_scale_power; }, Rule::non_negative},
    {"loss_scale.loss_scale_window", "fp16: steps without overflow before the scale doubles",
     [](Config& c) -> Field { return &c.loss_scale.loss_scale_window; }, Rule::positive},
    {"loss_scale.hysteresis", "fp16: overflowing steps absorbed before the scale halves",
     [](Config& c) -> Field { return &c.loss_scale.hysteresis; }, Rule::positive},
    {"loss_scale.min_loss_scale", "fp16: an overflow at this scale stops the run",
     [](Config& c) -> Field { return &c.loss_scale.min_loss_scale; }, Rule::positive},
    {"loss_scale.static_scale",
     "fp16: 0 scales dynamically (the keys above); any other value is a fixed scale, an "
     "overflowing step is skipped and the scale stays (DeepSpeed's fp16.loss_scale)",
     [](Config& c) -> Field { return &c.loss_scale.static_scale; }, Rule::non_negative},
  };
}

// [dpo]
std::vector<ConfigKey> dpo_keys() {
  return {
    {"dpo.beta", "dpo: how far the policy may move from the reference (TRL's beta)",
     [](Config& c) -> Field { return &c.dpo.beta; }, Rule::positive},
    {"dpo.loss_type",
     "dpo: sigmoid (-log sigmoid of beta x the log-ratio margin) | ipo (its squared distance "
     "from 1 / (2 beta), on per-token mean log-probabilities)",
     [](Config& c) -> Field { return &c.dpo.loss_type; }},
    {"dpo.label_smoothing", "dpo, sigmoid: the share of pairs assumed mislabelled, in [0, 0.5)",
     [](Config& c) -> Field { return &c.dpo.label_smoothing; }, Rule::probability},
    {"dpo.rpo_alpha",
     "dpo: weight of the chosen responses' per-token negative log-likelihood added to the loss "
     "(TRL's rpo_alpha), which keeps the answers likely while the margin grows; 0: none",
     [](Config& c) -> Field { return &c.dpo.rpo_alpha; }, Rule::non_negative},
    {"dpo.precompute_ref_log_probs",
     "dpo: compute the reference's log-probabilities in one pass before training (kept with the "
     "run) instead of holding the reference model",
     [](Config& c) -> Field { return &c.dpo.precompute_ref_log_probs; }},
  };
}

// [grpo]
std::vector<ConfigKey> grpo_keys() {
  return {
    {"grpo.num_generations",
     "grpo: completions sampled for each prompt, its group (per_device_train_batch_size counts "
     "prompts)",
     [](Config& c) -> Field { return &c.grpo.num_generations; }, Rule::positive},
    {"grpo.max_completion_length", "grpo: tokens a completion may have; 0: up to block_size",
     [](Config& c) -> Field { return &c.grpo.max_completion_length; }, Rule::non_negative},
    {"grpo.temperature", "grpo: sampling temperature",
     [](Config& c) -> Field { return &c.grpo.temperature; }, Rule::positive},
    {"grpo.top_p", "grpo: sample from the smallest set of tokens this likely, in (0, 1]",
     [](Config& c) -> Field { return &c.grpo.top_p; }, Rule::positive},
    {"grpo.top_k", "grpo: sample from the k most likely tokens; 0: all",
     [](Config& c) -> Field { return &c.grpo.top_k; }, Rule::non_negative},
    {"grpo.beta",
     "grpo: weight of the per-token KL to the reference (k3 estimator); 0 holds no reference",
     [](Config& c) -> Field { return &c.grpo.beta; }, Rule::non_negative},
    {"grpo.epsilon", "grpo: the surrogate's clip range below 1 (and above, unless epsilon_high)",
     [](Config& c) -> Field { return &c.grpo.epsilon; }, Rule::positive},
    {"grpo.epsilon_high", "grpo: the clip range above 1 (DAPO's clip-higher); 0: epsilon",
     [](Config& c) -> Field { return &c.grpo.epsilon_high; }, Rule::non_negative},
    {"grpo.loss_type",
     "grpo: grpo (token mean per completion, then the mean) | dapo (the mean over the "
     "micro-batch's tokens) | dr_grpo (the sum over completions x max_completion_length)",
     [](Config& c) -> Field { return &c.grpo.loss_type; }},
    {"grpo.scale_rewards",
     "grpo: group (advantage = (r - group mean) / group std) | batch (/ the batch's std) | none",
     [](Config& c) -> Field { return &c.grpo.scale_rewards; }},
    {"grpo.num_iterations",
     "grpo: updates on each rollout (TRL's num_iterations, mu): one sampling every this many steps, "
     "against the log-probabilities it was sampled with",
     [](Config& c) -> Field { return &c.grpo.num_iterations; }, Rule::positive},
  };
}

// [ppo]
std::vector<ConfigKey> ppo_keys() {
  return {
    {"ppo.num_ppo_epochs",
     "ppo: passes over each rollout; one sampling every num_ppo_epochs x num_mini_batches steps",
     [](Config& c) -> Field { return &c.ppo.num_ppo_epochs; }, Rule::positive},
    {"ppo.num_mini_batches",
     "ppo: parts of each micro-batch's rollout, one trained on per step (must divide the "
     "micro-batch)",
     [](Config& c) -> Field { return &c.ppo.num_mini_batches; }, Rule::positive},
    {"ppo.max_completion_length", "ppo: tokens a completion may have; 0: up to block_size",
     [](Config& c) -> Field { return &c.ppo.max_completion_length; }, Rule::non_negative},
    {"ppo.temperature", "ppo: sampling temperature",
     [](Config& c) -> Field { return &c.ppo.temperature; }, Rule::positive},
    {"ppo.gamma", "ppo: discount of later rewards",
     [](Config& c) -> Field { return &c.ppo.gamma; }, Rule::non_negative},
    {"ppo.lam", "ppo: GAE's lambda", [](Config& c) -> Field { return &c.ppo.lam; },
     Rule::non_negative},
    {"ppo.cliprange", "ppo: the policy ratio's clip range around 1",
     [](Config& c) -> Field { return &c.ppo.cliprange; }, Rule::positive},
    {"ppo.cliprange_value", "ppo: how far a value may move from the rollout's value",
     [](Config& c) -> Field { return &c.ppo.cliprange_value; }, Rule::positive},
    {"ppo.vf_coef", "ppo: weight of the value loss",
     [](Config& c) -> Field { return &c.ppo.vf_coef; }, Rule::non_negative},
    {"ppo.critic",
     "ppo: head (a value head on the policy's trunk) | model (a model of its own, as TRL's value "
     "model: the reward model's copy when reward.model is given, else the policy's with a fresh "
     "head)",
     [](Config& c) -> Field { return &c.ppo.critic; }},
    {"ppo.critic_lr_scale",
     "ppo: the critic head's learning rate over the policy's (Adam and AdamW), so that a fresh "
     "critic reaches the rewards' scale within the run; 1 with critic = \"model\"",
     [](Config& c) -> Field { return &c.ppo.critic_lr_scale; }, Rule::positive},
    {"ppo.kl_coef", "ppo: per-token KL penalty to the reference, folded into the reward",
     [](Config& c) -> Field { return &c.ppo.kl_coef; }, Rule::non_negative},
    {"ppo.adaptive_kl", "ppo: move kl_coef to keep the rollouts' KL near target_kl (Ziegler et al.)",
     [](Config& c) -> Field { return &c.ppo.adaptive_kl; }},
    {"ppo.target_kl", "ppo: the KL adaptive_kl aims at",
     [](Config& c) -> Field { return &c.ppo.target_kl; }, Rule::positive},
    {"ppo.kl_horizon", "ppo: adaptive_kl's horizon, in completions",
     [](Config& c) -> Field { return &c.ppo.kl_horizon; }, Rule::positive},
    {"ppo.whiten_advantages",
     "ppo: advantages to mean 0 and std 1 over each micro-batch's rollout on all ranks",
     [](Config& c) -> Field { return &c.ppo.whiten_advantages; }},
  };
}

// [reward]
std::vector<ConfigKey> reward_keys() {
  return {
    {"reward.functions",
     "online algorithms: built-in rewards as \"name:weight\", summed: exact (the expected "
     "answer and its end token), chars (the share of positions that match the answer: partial "
     "credit), format (ends at an end token, printable text only)",
     [](Config& c) -> Field { return &c.reward.functions; }},
    {"reward.command",
     "online algorithms: a program (sh -c) reading JSONL {\"prompt\", \"completion\", \"row\"} "
     "lines on stdin (row: the data file's row, every key) and printing one number per line, "
     "added to the functions' rewards",
     [](Config& c) -> Field { return &c.reward.command; }},
    {"reward.timeout_s", "online algorithms: seconds reward.command may take for one micro-batch",
     [](Config& c) -> Field { return &c.reward.timeout_s; }, Rule::positive},
    {"reward.model",
     "online algorithms: a reward model (a run, checkpoint or export of training.algorithm = "
     "\"rm\" with the policy's shape) whose score of prompt + completion is added",
     [](Config& c) -> Field { return &c.reward.model; }},
  };
}

// [lora]
std::vector<ConfigKey> lora_keys() {
  return {
    {"lora.r",
     "LoRA: the adapters' rank; 0: no adapters (full fine-tuning). With r > 0 only the adapters "
     "and lora.modules_to_save train, and a run saves and exports them in PEFT's layout",
     [](Config& c) -> Field { return &c.lora.r; }, Rule::non_negative},
    {"lora.lora_alpha", "LoRA: the adapters' output is scaled by lora_alpha / r",
     [](Config& c) -> Field { return &c.lora.lora_alpha; }, Rule::positive},
    {"lora.lora_dropout", "LoRA: dropout on each adapter's input, in [0, 1)",
     [](Config& c) -> Field { return &c.lora.lora_dropout; }, Rule::probability},
    {"lora.target_modules",
     "LoRA: the linear layers to adapt, by name as PEFT matches them ([\"q_proj\", \"v_proj\"]; "
     "gpt and GPT-2: c_attn, c_proj, c_fc) or \"all-linear\" (every linear layer but the output "
     "and value heads); []: PEFT's default for the family",
     [](Config& c) -> Field { return &c.lora.target_modules; }, Rule::one_or_list},
    {"lora.modules_to_save",
     "LoRA: modules trained in full and saved with the adapter (a reward model's \"score\")",
     [](Config& c) -> Field { return &c.lora.modules_to_save; }},
    {"lora.use_rslora", "LoRA: scale by lora_alpha / sqrt(r) (rank-stabilised) instead of / r",
     [](Config& c) -> Field { return &c.lora.use_rslora; }},
    {"lora.init_lora_weights",
     "LoRA: true (A Kaiming-uniform, B zero: training starts at the base model) | gaussian "
     "(A normal with std 1/r, B zero)",
     [](Config& c) -> Field { return &c.lora.init_lora_weights; }},
    {"lora.base_dtype", "LoRA: the frozen base's storage: f32 | bf16 (adapters stay f32)",
     [](Config& c) -> Field { return &c.lora.base_dtype; }},
    {"lora.init_from", "LoRA: an adapter directory (PEFT's layout) to start from",
     [](Config& c) -> Field { return &c.lora.init_from; }},
  };
}

}  // namespace

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = [] {
    std::vector<ConfigKey> all;
    for (auto section : {top_level_keys, model_keys, data_keys, training_keys, distributed_keys,
                         loss_scale_keys, dpo_keys, grpo_keys, ppo_keys, reward_keys, lora_keys})
      for (ConfigKey& key : section()) all.push_back(std::move(key));
    return all;
  }();
  return schema;
}

const ConfigKey* find_key(std::string_view name) {
  const auto& schema = config_schema();
  auto it = std::find_if(schema.begin(), schema.end(),
                         [&](const ConfigKey& k) { return k.name == name; });
  return it == schema.end() ? nullptr : &*it;
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const auto& key : config_schema()) names.emplace_back(key.name);
  return names;
}

std::vector<std::string> section_names() {
  std::vector<std::string> sections;
  for (const auto& key : config_schema()) {
    auto dot = key.name.find('.');
    if (dot == std::string_view::npos) continue;
    std::string section(key.name.substr(0, dot));
    if (std::find(sections.begin(), sections.end(), section) == sections.end())
      sections.push_back(section);
  }
  return sections;
}

bool takes_string(const Field& field) {
  return std::visit([]<typename T>(T*) { return std::is_same_v<T, std::string> || Setting<T>; },
                    field);
}

bool is_section(std::string_view name) {
  auto sections = section_names();
  return std::find(sections.begin(), sections.end(), name) != sections.end();
}

}  // namespace genesis::config_detail
