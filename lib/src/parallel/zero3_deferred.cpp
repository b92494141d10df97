// Sharding units while the model is built (see zero3_deferred.hpp and deferred_init.hpp). Each
// unit is checked and broadcast over the whole job before it is cut, so the ranks end with rank
// 0's values exactly as when the strategy broadcasts the whole model; every rank draws the same
// values from the seed anyway, so the broadcast only corrects a rank that diverged.
#include "zero3_deferred.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/parallel/deferred_init.hpp"
#include "replicate.hpp"

namespace genesis::parallel {
namespace detail {

ShardedBuild::ShardedBuild(std::string strategy, ShardGroups groups, Device device,
                           std::int64_t persistence_threshold)
    : strategy_(std::move(strategy)),
      groups_(std::move(groups)),
      device_(device),
      persistence_threshold_(persistence_threshold) {}

void ShardedBuild::shard(const std::string& path, nn::Module& module) {
  UnitSpec spec{.name = path, .module = &module, .params = {}, .frozen = {}};
  for (auto& [name, p] : module.named_parameters())
    if (!is_persistent(p, persistence_threshold_))
      (p.requires_grad() ? spec.params : spec.frozen).emplace_back(path + "." + name, p);
  if (spec.params.empty() && spec.frozen.empty()) return;  // not a unit for the wrap policy either
  NoGradGuard no_grad;
  check_same_parameters(spec.params, *groups_.world);
  check_same_parameters(spec.frozen, *groups_.world);
  // On the device at once: the full unit reaches it only as a gather would bring it.
  FlatParams flat = flatten_parameters(spec.params, groups_.shard->size(), device_);
  std::vector<FlatParams> frozen = flatten_frozen(spec.frozen, groups_.shard->size(), device_);
  if (flat.padded_numel() > 0) groups_.world->broadcast(flat.flat, {.root = 0})->wait();
  for (FlatParams& f : frozen) groups_.world->broadcast(f.flat, {.root = 0})->wait();
  units_.push_back(std::make_unique<ShardedUnit>(std::move(spec), std::move(flat),
                                                 std::move(frozen), *groups_.shard));
}

}  // namespace detail

DeferredInit::DeferredInit(const StrategyOptions& options,
                           std::shared_ptr<dist::ProcessGroup> group, Device device) {
  GENESIS_CHECK(options.name == "zero3" || options.name == "hsdp", InvalidArgument,
                "deferred init shards for zero3 or hsdp, not \"" + options.name + "\"");
  GENESIS_CHECK(group != nullptr, InvalidArgument, "deferred init needs a process group");
  const bool hsdp = options.name == "hsdp";
  build_ = std::make_unique<detail::ShardedBuild>(
      options.name, detail::make_shard_groups(hsdp, std::move(group), options.zero), device,
      options.zero.persistence_threshold);
}

DeferredInit::~DeferredInit() = default;

nn::BuildListener DeferredInit::listener() {
  return [build = build_.get()](const std::string& path, nn::Module& module) {
    build->shard(path, module);
  };
}

}  // namespace genesis::parallel
