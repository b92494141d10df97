// `genesis ckpt ls|info|verify|export|reshard|diff`: nested subcommands over the checkpoint
// tools of lib/src/ckpt/ (inspect, compare, export, checkpoint_rewrite). Each parses its
// arguments, calls one library function and prints; exit codes follow cli/main.cpp, except
// that diff exits 1 for "they differ" and 2 for trouble, as diff(1) does.
#include <memory>

#include "commands/command_table.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/compare.hpp"
#include "genesis/ckpt/export.hpp"
#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/ckpt/holding.hpp"
#include "genesis/ckpt/inspect.hpp"
#include "genesis/ckpt/rewrite.hpp"
#include "genesis/core/error.hpp"
#include "genesis/train/train_state.hpp"

namespace genesis::commands {
namespace {

namespace fs = std::filesystem;

struct CkptFlags {
  CLI::App* ls = nullptr;
  CLI::App* info = nullptr;
  CLI::App* verify = nullptr;
  CLI::App* export_ = nullptr;
  CLI::App* reshard = nullptr;
  CLI::App* diff = nullptr;

  std::string path;  // RUN_DIR or CKPT of ls, info, verify, export, reshard
  bool json = false;
  std::string out;
  std::string format = "auto";
  std::string dtype;
  std::string max_shard_size = "5GB";
  bool force = false;
  bool merge = false;
  int world_size = 0;
  std::string strategy;
  std::string a, b;
  bool all = false;
};

CLI::App* add_ckpt_subcommand(CLI::App& parent, const std::string& name, const std::string& summary) {
  CLI::App* sub = parent.add_subcommand(name, summary);
  sub->set_help_flag("-h,--help", "Print this help and exit");
  return sub;
}

void add_ckpt_argument(CLI::App& app, std::string& value) {
  app.add_option("CKPT", value,
                 "A checkpoint directory, or a run (or its checkpoints/ directory) for its latest")
      ->required()
      ->type_name("DIR");
}

void add_ckpt_flags(CLI::App& app, CkptFlags& f) {
  app.require_subcommand(1);

  f.ls = add_ckpt_subcommand(app, "ls", "List a run's checkpoints: step, time, size, world size, strategy, loss");
  f.ls->add_option("RUN_DIR", f.path, "The run directory, or its checkpoints/ directory")
      ->required()
      ->type_name("DIR");
  f.ls->alias("list");  // as docker and kubectl accept both
  f.ls->add_flag("--json", f.json, "Print the listing as one JSON object");

  f.info = add_ckpt_subcommand(app, "info", "Show a checkpoint's facts, files and every tensor's sharding");
  add_ckpt_argument(*f.info, f.path);
  f.info->alias("inspect");  // docker's word, and what `genesis ckpt --help` says it does
  f.info->add_flag("--json", f.json, "Print the facts and the tensor index as one JSON object");

  f.verify = add_ckpt_subcommand(app, "verify", "Read every file of a checkpoint and check every checksum");
  add_ckpt_argument(*f.verify, f.path);

  f.export_ = add_ckpt_subcommand(
      app, "export",
      "Consolidate the model's weights: a Hugging Face model directory for Hugging Face families "
      "and GPT, or one f32 safetensors file in genesis's names");
  add_ckpt_argument(*f.export_, f.path);
  f.export_->add_option("-o,--output", f.out, "The .safetensors file to write, or else a directory (made if need be) for its model.safetensors; hf: config.json goes beside it, as from_pretrained reads them")
      ->required()
      ->type_name("FILE");
  f.export_->add_option("--format", f.format,
                        "Tensor names: genesis's, or Hugging Face's; auto is hf for a Hugging Face "
                        "family (llama, mistral, qwen2, qwen3, gpt2) and a GPT language model, "
                        "genesis otherwise (a gpt with a value head)")
      ->type_name("FORMAT")
      ->check(CLI::IsMember({"auto", "genesis", "hf"}))
      ->capture_default_str();
  f.export_->add_option("--dtype", f.dtype,
                        "Hugging Face families: the tensors' type (default: the run's, f32, so "
                        "export then import is the identity; bf16 for the usual half-size export)")
      ->type_name("DTYPE")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  f.export_->add_option("--max-shard-size", f.max_shard_size,
                        "Hugging Face families: the largest safetensors shard, as transformers' "
                        "max_shard_size (5GB, 500MB, 2GiB); larger models get shards and an index")
      ->type_name("SIZE")
      ->capture_default_str();
  f.export_->add_flag("--force", f.force, "Replace existing output files");
  f.export_->add_flag("--merge", f.merge,
                      "A LoRA run: write the full model with its adapters merged in (W + scale x "
                      "B A, in the base's dtype) instead of the adapter directory");

  f.reshard = add_ckpt_subcommand(
      app, "reshard", "Write a copy of a checkpoint laid out for another world size or strategy");
  add_ckpt_argument(*f.reshard, f.path);
  f.reshard->add_option("--world-size", f.world_size, "Ranks of the new checkpoint")
      ->required()
      ->type_name("N");
  f.reshard->add_option("--strategy", f.strategy, "Strategy recorded in the new checkpoint (default: the old one)")
      ->type_name("NAME")
      ->check(CLI::IsMember({"ddp", "zero1", "zero2", "zero3", "hsdp"}));
  f.reshard->add_option("-o,--output", f.out, "The new checkpoint directory (must not exist)")
      ->required()
      ->type_name("DIR");

  f.diff = add_ckpt_subcommand(app, "diff", "Compare two checkpoints tensor by tensor; exit 1 when they differ");
  f.diff->add_option("A", f.a, "The first checkpoint (or run)")->required()->type_name("DIR");
  f.diff->add_option("B", f.b, "The second checkpoint (or run)")->required()->type_name("DIR");
  f.diff->add_flag("--all", f.all, "Compare the optimizer state too, not only model.* tensors");
}

int run_ls(const CkptFlags& f, const RunContext& context) {
  const ckpt::RunListing listing = ckpt::list_run(f.path);
  if (f.json)
    context.out << ckpt::run_listing_json(listing).dump(2) << "\n";
  else
    ckpt::write_run_listing(context.out, listing);
  return 0;
}

int run_info(const CkptFlags& f, const RunContext& context) {
  const fs::path dir = ckpt::resolve_checkpoint(f.path);
  const ckpt::Manifest manifest = ckpt::read_manifest(dir);
  if (f.json)
    context.out << ckpt::checkpoint_info_json(dir, manifest).dump(2) << "\n";
  else
    ckpt::write_checkpoint_info(context.out, dir, manifest);
  return 0;
}

int run_verify(const CkptFlags& f, const RunContext& context) {
  const ckpt::Checkpoint checkpoint(ckpt::resolve_checkpoint(f.path));
  context.out << ckpt::verify_checkpoint(checkpoint) << "\n";
  return 0;
}

int run_export(const CkptFlags& f, const RunContext& context) {
  const ckpt::Checkpoint checkpoint(ckpt::resolve_checkpoint(f.path));
  ckpt::require_whole(checkpoint.dir(), checkpoint.manifest(), "cannot export");
  ckpt::ExportOptions options{f.out, ckpt::parse_export_format(f.format), f.force};
  options.merge = f.merge;
  if (!f.dtype.empty())
    options.dtype = f.dtype == "bf16" ? DType::bf16 : f.dtype == "f16" ? DType::f16 : DType::f32;
  options.max_shard_bytes = ckpt::parse_shard_size(f.max_shard_size);
  const ckpt::ExportResult r = ckpt::export_checkpoint(checkpoint, options);
  context.out << "wrote " << r.file.string() << ": " << r.tensors << " tensors ("
              << ckpt::export_format_name(r.format) << " names), " << r.elements << " elements, "
              << ckpt::size_text(r.bytes) << ", from " << checkpoint.dir().string() << "\n";
  if (r.config_file)
    context.out << "wrote " << r.config_file->string() << ": transformers' config\n";
  return 0;
}

std::string ranks_text(int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

int run_reshard(const CkptFlags& f, const RunContext& context) {
  // Checked again by reshard_checkpoint; here so a usage error comes before any reading.
  GENESIS_CHECK(f.world_size >= 1, InvalidArgument,
                "--world-size must be at least 1, got " + std::to_string(f.world_size));
  const ckpt::Checkpoint checkpoint(ckpt::resolve_checkpoint(f.path));
  ckpt::require_whole(checkpoint.dir(), checkpoint.manifest(), "cannot reshard");
  ckpt::ReshardOptions options{f.out, f.world_size, f.strategy, train::reshard_rank_states};
  const ckpt::ReshardResult r = ckpt::reshard_checkpoint(checkpoint, options);
  const ckpt::Manifest& m = r.manifest;
  context.out << "wrote " << f.out << ": step " << m.step << ", " << checkpoint.manifest().world_size
              << " -> " << ranks_text(m.world_size) << ", strategy " << m.strategy << ", "
              << m.tensors.size() << " tensors, " << ckpt::size_text(m.total_bytes()) << "\n";
  if (r.global_batch > 0)
    context.out << "global batch " << r.global_batch << " kept: per_device_train_batch_size "
                << r.per_device_train_batch_size << " x " << ranks_text(m.world_size)
                << " x gradient_accumulation_steps " << r.gradient_accumulation_steps << "\n";
  else
    context.out << "the checkpoint saved no config: the global batch was not checked\n";
  return 0;
}

int run_diff(const CkptFlags& f, const RunContext& context) {
  std::vector<ckpt::TensorDiff> diffs;
  fs::path a, b;
  try {
    a = ckpt::resolve_checkpoint(f.a);
    b = ckpt::resolve_checkpoint(f.b);
    diffs = ckpt::diff_checkpoints(ckpt::Checkpoint(a), ckpt::Checkpoint(b), f.all);
  } catch (const Error& e) {
    // Exit 1 already means "they differ": a checkpoint that cannot be read must not look like one.
    if (e.exit_code() == 2) throw;
    throw InvalidArgument(e.what());
  }
  ckpt::write_diff(context.out, diffs, a.string(), b.string(), f.all);
  return ckpt::all_same(diffs) ? 0 : 1;
}

int run_ckpt(const CkptFlags& f, const RunContext& context) {
  if (f.ls->parsed()) return run_ls(f, context);
  if (f.info->parsed()) return run_info(f, context);
  if (f.verify->parsed()) return run_verify(f, context);
  if (f.export_->parsed()) return run_export(f, context);
  if (f.reshard->parsed()) return run_reshard(f, context);
  if (f.diff->parsed()) return run_diff(f, context);
  throw InvalidArgument("genesis ckpt needs a command: ls, info, verify, export, reshard or diff");
}

}  // namespace

Command make_ckpt_command() {
  auto flags = std::make_shared<CkptFlags>();
  return {"ckpt", "List, inspect, verify, export, reshard and diff checkpoints",
          [flags](CLI::App& app) { add_ckpt_flags(app, *flags); },
          [flags](const RunContext& context) { return run_ckpt(*flags, context); }};
}

}  // namespace genesis::commands
