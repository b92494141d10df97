// Resume and save for the trainer. Choosing is done by rank 0 alone (it verifies every checksum
// of the candidate, which reads the whole checkpoint once) and broadcast, so all ranks resume from
// the same step even when a file is being damaged while they look.
#include "checkpointing.hpp"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/rewrite.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/distributed.hpp"
#include "genesis/dist/string_collectives.hpp"
#include "lora_checkpoint.hpp"

namespace genesis::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kErrorTag = "error:";
constexpr const char* kConfigErrorTag = "config-error:";

bool restarted_by_launcher() { return dist::launch_attempt() > 0; }

// What rank 0 found looking for a checkpoint to resume from.
struct Search {
  std::string found;  // the checkpoint to resume from; "" for none
  std::vector<std::pair<fs::path, std::string>> rejected;  // tried before `found`, and why not
};

// The newest checkpoint of the run that verifies: `latest`, then the others newest first (an
// older complete checkpoint beats none). Leftovers of interrupted saves and deletes are never
// candidates: list_checkpoints skips them, and a `latest` naming one fails to open.
Search find_loadable(const fs::path& run_dir) {
  const fs::path root = ckpt::checkpoints_dir_of(run_dir);
  std::vector<fs::path> candidates = ckpt::list_checkpoints(root);
  std::optional<fs::path> latest;
  try {
    latest = ckpt::read_latest(root);
  } catch (const Error& e) {
    spdlog::warn("{}", e.what());
  }
  std::vector<fs::path> order;
  if (latest) order.push_back(*latest);
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it)
    if (!latest || *it != *latest) order.push_back(*it);
  Search search;
  for (const fs::path& dir : order) {
    try {
      ckpt::Checkpoint(dir).verify();
      search.found = dir.string();
      return search;
    } catch (const std::exception& e) {
      search.rejected.emplace_back(dir, e.what());
    }
  }
  return search;
}

void warn_rejected(const Search& search) {
  for (const auto& [dir, why] : search.rejected)
    spdlog::warn("cannot resume from {}: {}", dir.string(), why);
}

// Every checkpoint of the run is damaged. Starting from step 0 would throw away what the run
// trained, unseen in a log nobody reads (a launcher restart, a scheduler's requeue), so it takes
// the user's word: the refusal names each checkpoint, why it cannot be loaded, and the way on.
std::string refusal(const fs::path& run_dir, const Search& search, bool restarted) {
  std::string why;
  for (const auto& [dir, reason] : search.rejected)
    why += (why.empty() ? "" : "; ") + dir.string() + ": " + reason;
  return std::string(restarted ? "restarted by genesis launch: " : "") + "no checkpoint in " +
         ckpt::checkpoints_dir_of(run_dir).string() + " can be resumed from (" + why +
         "), and starting from step 0 would lose what they hold. To start over on purpose, run "
         "genesis train again with --overwrite (training.overwrite_output_dir = true), which "
         "deletes them; to keep them, move them out of the run directory first";
}

// Rank 0, before a fresh start: the run directory's checkpoints belong to an earlier run, which
// this one would mix with (save_total_limit would prune by step across both). They are deleted
// when overwrite_output_dir says so; otherwise the start is refused, naming the ways on.
void clear_earlier_run(const TrainingConfig& training, const fs::path& run_dir) {
  const fs::path root = ckpt::checkpoints_dir_of(run_dir);
  const std::vector<fs::path> earlier = ckpt::list_checkpoints(root);
  if (earlier.empty()) return;
  const std::string what = std::to_string(earlier.size()) +
                           (earlier.size() == 1 ? " checkpoint" : " checkpoints") + " (up to " +
                           earlier.back().filename().string() + ")";
  if (!training.overwrite_output_dir)
    throw ConfigError(root.string() + " holds " + what + " of an earlier run: continue it with "
                      "--resume auto, start over with --overwrite (deletes them), or pick another "
                      "--name");
  spdlog::warn("--overwrite: deleting {} of an earlier run in {}", what, root.string());
  fs::remove_all(root);
}

// Rank 0: the directory to resume from, "" for none; throws for a bad explicit path. A restarted
// attempt continues from the run's own latest checkpoint whatever was asked for, so it neither
// starts over nor goes back to an explicit checkpoint (which save_total_limit may have pruned);
// only a run that saved nothing yet falls back to the explicit path.
std::string choose_on_rank0(const TrainingConfig& training, const fs::path& run_dir) {
  const std::string& requested = training.resume_from_checkpoint;
  const bool restarted = restarted_by_launcher();
  if (requested == "auto" || restarted) {
    if (restarted)
      spdlog::info("restarted by genesis launch: resuming from the latest checkpoint, if any");
    const Search search = find_loadable(run_dir);
    if (!search.found.empty()) {
      warn_rejected(search);
      if (!search.rejected.empty())
        spdlog::warn("resuming from the older checkpoint {} instead", search.found);
      return search.found;
    }
    if (!search.rejected.empty()) {
      // --overwrite on a new command line is the user's word; inside a restart it was meant for
      // an earlier run's checkpoints, not for the ones this run saved before it failed.
      GENESIS_CHECK(training.overwrite_output_dir && !restarted, IoError,
                    refusal(run_dir, search, restarted));
      warn_rejected(search);
      spdlog::warn("--overwrite: no checkpoint of {} can be resumed from; deleting them and "
                   "starting from step 0", ckpt::checkpoints_dir_of(run_dir).string());
      fs::remove_all(ckpt::checkpoints_dir_of(run_dir));
      return "";
    }
    if (requested.empty() || requested == "auto") return "";
  }
  if (requested.empty()) {
    if (!restarted) clear_earlier_run(training, run_dir);
    return "";
  }
  const fs::path dir = ckpt::resolve_checkpoint(requested);
  ckpt::Checkpoint(dir).verify();
  return dir.string();
}

std::string value_text(const toml::node& node) {
  std::ostringstream text;
  node.visit([&](const auto& value) { text << value; });
  return text.str();
}

// "section.key" -> value text, for the keys of a TOML config.
std::map<std::string, std::string> flatten(const std::string& toml_text) {
  std::map<std::string, std::string> out;
  const toml::table table = toml::parse(toml_text);
  for (const auto& [section, node] : table) {
    if (const toml::table* inner = node.as_table()) {
      for (const auto& [key, value] : *inner)
        out[std::string(section.str()) + "." + std::string(key.str())] = value_text(value);
    } else {
      out[std::string(section.str())] = value_text(node);
    }
  }
  return out;
}

// Keys whose change does not change what training computes (where it writes, how often it logs,
// how the ranks split the work); the batch is compared as the global batch instead.
bool ignored_key(const std::string& key) {
  static const std::set<std::string> ignored = {
      "name", "training.output_dir", "training.save_steps", "training.save_total_limit",
      "training.resume_from_checkpoint", "training.overwrite_output_dir",
      "training.node_local_checkpoints", "training.logging_steps", "training.eval_steps",
      "training.eval_batches", "training.device", "training.per_device_train_batch_size",
      "training.gradient_accumulation_steps"};
  return ignored.count(key) > 0 || key.rfind("distributed.", 0) == 0;
}

std::int64_t global_batch(const std::map<std::string, std::string>& values, int world) {
  auto number = [&](const char* key) {
    auto it = values.find(key);
    return it == values.end() ? 0 : std::atoll(it->second.c_str());
  };
  return number("training.per_device_train_batch_size") * world *
         number("training.gradient_accumulation_steps");
}

void warn_about_config_changes(const ckpt::Manifest& m, const Config& config, int world,
                               const std::string& name) {
  std::map<std::string, std::string> saved, now;
  try {
    saved = flatten(m.config_toml);
    now = flatten(config_to_toml(config));
  } catch (const std::exception& e) {
    spdlog::warn("checkpoint {}: cannot compare its config with this run's: {}", name, e.what());
    return;
  }
  std::vector<std::string> changed;
  for (const auto& [key, value] : now) {
    if (ignored_key(key)) continue;
    auto it = saved.find(key);
    if (it == saved.end() || it->second != value)
      changed.push_back(key + " " + (it == saved.end() ? "(absent)" : it->second) + " -> " + value);
  }
  const std::int64_t before = global_batch(saved, m.world_size), after = global_batch(now, world);
  if (before != after)
    changed.push_back("global batch " + std::to_string(before) + " -> " + std::to_string(after));
  for (const std::string& c : changed)
    spdlog::warn("resuming {} with a different config: {} (the run will not match the original)",
                 name, c);
}

// Rank 0 runs `decide`; every rank returns its answer or throws its error (a ConfigError stays
// one, anything else, a filesystem error too, becomes an IoError), so no rank is left waiting.
std::string decide_on_rank0(const Job& job, const std::function<std::string()>& decide) {
  std::string answer;
  if (job.is_main()) {
    try {
      answer = decide();
    } catch (const ConfigError& e) {
      answer = kConfigErrorTag + std::string(e.what());
    } catch (const std::exception& e) {
      answer = kErrorTag + std::string(e.what());
    }
  }
  answer = dist::broadcast_string(*job.group(), answer);
  if (answer.rfind(kConfigErrorTag, 0) == 0)
    throw ConfigError(answer.substr(std::string(kConfigErrorTag).size()));
  if (answer.rfind(kErrorTag, 0) == 0) throw IoError(answer.substr(std::string(kErrorTag).size()));
  return answer;
}

std::string ranks_text(std::int64_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

// The accumulation that gives `global` examples a step on `world` ranks of `per_device` each;
// ConfigError naming what would, when none does.
std::int64_t accumulation_keeping(std::int64_t global, int saved_world, std::int64_t per_device,
                                  int world) {
  const std::string head = "cannot resume a " + std::to_string(saved_world) +
                           "-rank checkpoint on " + ranks_text(world) +
                           " keeping its global batch of " + std::to_string(global);
  if (global % world != 0) {
    std::string worlds;
    for (int w = 1; w <= std::max(saved_world, world); ++w)
      if (global % w == 0) worlds += (worlds.empty() ? "" : ", ") + std::to_string(w);
    throw ConfigError(head + ": it does not split over " + ranks_text(world) + "; run on " +
                      worlds + " ranks, or start a new run");
  }
  const std::int64_t per_rank = global / world;
  if (per_rank % per_device == 0) return per_rank / per_device;
  std::string settings;
  for (std::int64_t b = per_rank; b >= 1; --b)
    if (per_rank % b == 0)
      settings += (settings.empty() ? "" : ", or ") + std::string("per_device_train_batch_size=") +
                  std::to_string(b) + " with gradient_accumulation_steps=" + std::to_string(per_rank / b);
  throw ConfigError(head + ": per_device_train_batch_size " + std::to_string(per_device) +
                    " does not divide the " + std::to_string(per_rank) +
                    " examples each rank needs a step; set " + settings);
}

// Rank 0: the plan as JSON (see ResumePlan). The global batch is the checkpoint's when the world
// changes now or changed at an earlier resume: an elastic restart repeats the first command
// line, whose accumulation was meant for the original world.
json plan_on_rank0(const fs::path& dir, const TrainingConfig& t, const fs::path& run_dir, int world) {
  const ckpt::Checkpoint checkpoint(dir);
  const ckpt::Manifest& m = checkpoint.manifest();
  // Past the last step there is nothing to train, and no evaluation of the last step to report.
  GENESIS_CHECK(m.step <= t.max_steps, ConfigError,
                "checkpoint '" + dir.string() + "' is at step " + std::to_string(m.step) +
                    ", past training.max_steps = " + std::to_string(t.max_steps) +
                    ": nothing to train; raise training.max_steps to continue the run");
  json changes = m.info.value("world_size_changes", json::array());
  std::int64_t accum = t.gradient_accumulation_steps;
  std::string notice;
  const bool moved = m.world_size != world;
  if (moved || !changes.empty()) {
    std::int64_t saved_batch = t.per_device_train_batch_size, saved_accum = accum;
    if (!m.config_toml.empty()) {
      const Config saved = parse_config_toml(m.config_toml, "'" + dir.string() + "' config");
      saved_batch = saved.training.per_device_train_batch_size;
      saved_accum = saved.training.gradient_accumulation_steps;
    }
    const std::int64_t global = saved_batch * m.world_size * saved_accum;
    accum = accumulation_keeping(global, m.world_size, t.per_device_train_batch_size, world);
    if (moved) changes.push_back({{"step", m.step}, {"from", m.world_size}, {"to", world}});
    const json& last = changes.back();
    const std::string steps = accum == t.gradient_accumulation_steps
                                  ? std::to_string(accum)
                                  : std::to_string(t.gradient_accumulation_steps) + " -> " +
                                        std::to_string(accum);
    if (moved || accum != t.gradient_accumulation_steps)
      notice = "world " + last.at("from").dump() + " -> " + last.at("to").dump() +
               ": gradient_accumulation_steps " + steps + " keeps the global batch of " +
               std::to_string(global);
  }
  json plan = {{"load_dir", dir.string()}, {"resharded", moved}, {"accumulation", accum},
               {"changes", changes}, {"notice", notice}};
  if (!moved) return plan;
  const fs::path root = ckpt::checkpoints_dir_of(run_dir);
  fs::path name = dir.lexically_normal();
  if (!name.has_filename()) name = name.parent_path();  // "step-4/"
  const fs::path copy = root / (std::string(ckpt::kSavingPrefix) + name.filename().string() +
                                ".world-" + std::to_string(world));
  fs::create_directories(root);
  fs::remove_all(copy);  // a copy an interrupted resume left behind
  ckpt::reshard_checkpoint(checkpoint, {.out = copy, .world_size = world, .strategy = "",
                                        .reshard_ranks = reshard_rank_states});
  spdlog::info("resuming a {}-rank checkpoint on {}: resharded {} into {} (removed once loaded)",
               m.world_size, ranks_text(world), dir.string(), copy.string());
  plan["load_dir"] = copy.string();
  return plan;
}

// Collective, node-local checkpoints: the newest step every node committed (with what each node
// holds), or nullopt to start fresh. A step some node lacks is no step to resume from, so
// checkpoints held by only some nodes (a node lost for good, a disk replaced) are refused, as
// damaged ones are, unless --overwrite says to start over.
std::optional<std::pair<std::int64_t, ckpt::NodeLocalSteps>> newest_node_local_step(
    const TrainingConfig& t, const fs::path& run_dir, const Job& job, const ckpt::Nodes& nodes) {
  const fs::path root = ckpt::checkpoints_dir_of(run_dir);
  const ckpt::NodeLocalSteps steps = ckpt::find_node_local_steps(root, nodes, *job.group());
  if (!steps.newest_common) {
    if (steps.held.empty()) return std::nullopt;
    GENESIS_CHECK(t.overwrite_output_dir && !restarted_by_launcher(), IoError,
                  "no node-local checkpoint of " + root.string() + " is held whole by the nodes "
                  "of this job (" + steps.describe(nodes) + "): a node's shards are only on "
                  "that node, so a job without it cannot resume from them. Start over with "
                  "--overwrite, or run on the nodes that saved them");
    if (job.is_main())
      spdlog::warn("--overwrite: no node-local checkpoint is held whole ({}); starting from step 0",
                   steps.describe(nodes));
    return std::nullopt;
  }
  const std::int64_t step = *steps.newest_common;
  const int saved_world = steps.world.at(step);
  GENESIS_CHECK(saved_world == job.world_size(), ConfigError,
                "node-local checkpoint " + (root / ckpt::checkpoint_dir_name(step)).string() +
                    " was saved by " + ranks_text(saved_world) + " and this run has " +
                    ranks_text(job.world_size()) + ": a node-local checkpoint resumes on the "
                    "world that saved it; to change it, copy every node's shards of that step "
                    "into one directory and run genesis ckpt reshard on it");
  if (job.is_main())
    spdlog::info("node-local checkpoints: resuming from step-{}, the newest every node holds ({})",
                 step, steps.describe(nodes));
  return std::pair{step, steps};
}

}  // namespace

std::optional<fs::path> choose_resume_checkpoint(const TrainingConfig& training,
                                                 const fs::path& run_dir, const Job& job) {
  const std::string choice = decide_on_rank0(job, [&] { return choose_on_rank0(training, run_dir); });
  if (choice.empty()) return std::nullopt;
  return fs::path(choice);
}

ResumePlan plan_resume(const fs::path& dir, const TrainingConfig& training, const fs::path& run_dir,
                       const Job& job) {
  const json plan = json::parse(decide_on_rank0(
      job, [&] { return plan_on_rank0(dir, training, run_dir, job.world_size()).dump(); }));
  return {plan.at("load_dir").get<std::string>(), plan.at("resharded").get<bool>(),
          plan.at("accumulation").get<std::int64_t>(), plan.at("changes"),
          plan.at("notice").get<std::string>()};
}

void remove_resharded_copy(const ResumePlan& plan, const Job& job) {
  if (!plan.resharded) return;
  std::vector<double> loaded{1.0};
  job.sum(loaded);  // every rank has read the copy
  if (!job.is_main()) return;
  std::error_code ec;  // a copy left behind is a .tmp- leftover, which the next save removes
  fs::remove_all(plan.load_dir, ec);
}

Resumed load_checkpoint(const fs::path& dir, const Config& config, parallel::Strategy& strategy,
                        nn::Module& model, const Job& job, const std::string& shown_as) {
  const ckpt::Checkpoint checkpoint(dir);
  const ckpt::Manifest& m = checkpoint.manifest();
  const int world = job.world_size();
  GENESIS_CHECK(m.world_size == world, ConfigError,
                "checkpoint '" + dir.string() + "' was saved by " + std::to_string(m.world_size) +
                    (m.world_size == 1 ? " rank" : " ranks") + " and this run has " +
                    std::to_string(world) + "; convert it first: genesis ckpt reshard " +
                    dir.string() + " --world-size " + std::to_string(world) + " -o NEW_DIR, then "
                    "resume from NEW_DIR");
  if (job.is_main()) warn_about_config_changes(m, config, world, shown_as);

  const json saved_lora = m.info.value("lora", json());
  if (config.lora.enabled()) {
    check_lora_base(saved_lora, lora_base_identity(config, model), dir.string());
    strategy.load_state(WithFrozenBase(checkpoint, model));
  } else {
    GENESIS_CHECK(saved_lora.is_null(), ConfigError,
                  "checkpoint '" + dir.string() + "' holds LoRA adapters without their base: "
                  "resume it with the run's lora settings (lora.r = " +
                      std::to_string(parse_config_toml(m.config_toml, dir.string()).lora.r) + ")");
    strategy.load_state(checkpoint);
  }
  strategy.optimizer().set_step_count(m.info.value("optimizer", json::object()).value("step_count", m.step));

  Resumed r;
  r.step = m.step;
  if (m.info.contains("loss") && m.info["loss"].is_number()) r.loss = m.info["loss"].get<double>();
  r.state = rank_state_from_json(m.ranks.at(static_cast<std::size_t>(job.rank())));
  for (const auto& [name, generator] : model.named_generators()) {
    auto it = r.state.rng.find(name);
    GENESIS_CHECK(it != r.state.rng.end(), InvalidArgument,
                  "checkpoint '" + dir.string() + "' has no state for the random generator \"" +
                      name + "\" (was it saved from a different model?)");
    generator->set_state(it->second);
  }
  return r;
}

void load_init_weights(InitWeights& init, parallel::Strategy& strategy, nn::Module& model) {
  if (!init.fresh().empty()) {
    strategy.gather_full_parameters();  // ZeRO-3: the fresh tensors' values, whole
    init.take_fresh_from(model);
  }
  strategy.load_state(init);
}

RunStart start_run(const Config& config, const fs::path& run_dir, parallel::Strategy& strategy,
                   nn::Module& model, const Job& job, InitWeights* init, const ckpt::Nodes* nodes) {
  RunStart start{.config = config, .elastic = {}, .resumed_from = {}, .resumed = {}};
  const TrainingConfig& t = config.training;
  std::optional<fs::path> assembled;  // node-local: this node's whole copy of the chosen step
  if (nodes != nullptr && (t.resume_from_checkpoint == "auto" || restarted_by_launcher())) {
    if (const auto step = newest_node_local_step(t, run_dir, job, *nodes)) {
      start.resumed_from = ckpt::checkpoints_dir_of(run_dir) / ckpt::checkpoint_dir_name(step->first);
      assembled = ckpt::assemble_node_local(ckpt::checkpoints_dir_of(run_dir), step->first,
                                            step->second, *nodes, *job.group());
    }
  } else {
    start.resumed_from = choose_resume_checkpoint(t, run_dir, job);
  }
  // A LoRA checkpoint holds no base: the base is loaded first, then the adapters over it.
  if (init != nullptr && (!start.resumed_from || config.lora.enabled()))
    load_init_weights(*init, strategy, model);
  if (!start.resumed_from) return start;
  const fs::path& dir = *start.resumed_from;
  start.elastic = plan_resume(assembled.value_or(dir), t, run_dir, job);
  if (assembled) start.elastic.load_dir = *assembled;  // rank 0 planned on its own node's copy
  start.config.training.gradient_accumulation_steps = start.elastic.gradient_accumulation_steps;
  start.resumed = load_checkpoint(start.elastic.load_dir, start.config, strategy, model, job,
                                  dir.lexically_normal().string());
  remove_resharded_copy(start.elastic, job);
  if (assembled) {
    std::vector<double> loaded{1.0};
    job.sum(loaded);  // every rank of the node has read the copy
    std::error_code ec;  // one left behind is a .tmp- leftover, which the next save removes
    if (nodes->leader()) fs::remove_all(*assembled, ec);
  }
  const std::int64_t consumed = start.resumed->state.consumed;
  GENESIS_CHECK(consumed % job.world_size() == 0, ConfigError,
                "checkpoint '" + dir.string() + "' stopped " + std::to_string(consumed) +
                    " examples into an epoch, which does not split over " +
                    std::to_string(job.world_size()) +
                    " ranks: keep per_device_train_batch_size x ranks x accumulation as it was");
  return start;
}

SaveRequest save_request(const Config& config, const fs::path& run_dir, std::int64_t step,
                         parallel::Strategy& strategy, nn::Module& model, RankState state,
                         std::optional<double> loss, const json& world_size_changes,
                         const ckpt::Nodes* nodes) {
  for (const auto& [name, generator] : model.named_generators()) state.rng[name] = generator->state();
  const TrainingConfig& t = config.training;
  SaveRequest request;
  request.options = {
      .checkpoints_dir = ckpt::checkpoints_dir_of(run_dir),
      .step = step,
      .strategy = strategy.name(),
      .config_toml = config_to_toml(config),
      .info = {{"optimizer", {{"type", to_string(t.optimizer)},
                              {"step_count", strategy.optimizer().step_count()}}},
               {"scheduler", {{"type", to_string(t.lr_scheduler_type)}, {"step", step}}}},
      .keep_last = static_cast<int>(t.save_total_limit),
      .nodes = nodes};
  // A checkpoint saved before the first logged step has no loss to report (`ckpt ls` shows "-").
  if (loss) request.options.info["loss"] = *loss;
  if (!world_size_changes.empty()) request.options.info["world_size_changes"] = world_size_changes;
  request.pieces = strategy.state_pieces();
  if (config.lora.enabled()) {
    request.pieces = without_frozen(std::move(request.pieces), model);
    request.options.info["lora"] = lora_base_identity(config, model);
  }
  request.rank_state = to_json(state);
  return request;
}

}  // namespace genesis::train
