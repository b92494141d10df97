// ZeRO-3 and HSDP with deferred init (the model built under the strategy's build scope, each unit
// sharded as its constructor announces it), ranks as threads over Gloo: the same training as the
// model built whole and sharded by the strategy, rank 0's initial values on every rank, the units
// released before the strategy exists, clear errors for units that do not fit the model, and,
// in fresh launched processes, a setup peak well below the full model's bytes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "genesis/core/error.hpp"
#include "genesis/dist/distributed.hpp"
#include "genesis/nn/sequential.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "parallel/strategy_harness.hpp"
#include "support/cli_run.hpp"

using namespace genesis::testing::strategy_harness;
using genesis::Device;
using genesis::parallel::DeferredInit;
using genesis::parallel::StrategyOptions;
using genesis::parallel::detail::FullyShardedStrategy;
using StorePtr = std::shared_ptr<genesis::rendezvous::Store>;
namespace nn = genesis::nn;

namespace {

void hsdp_shard_2(StrategyOptions& o) { o.zero.hsdp_shard_size = 2; }
// LayerNorms and biases left whole as the model is built, for the strategy's persistent unit.
void persist_small(StrategyOptions& o) { o.zero.persistence_threshold = 128; }

struct Case {
  const char* strategy;
  int world;
  void (*override_options)(StrategyOptions&);
};
const Case kCases[] = {
    {"zero3", 2, nullptr}, {"hsdp", 4, hsdp_shard_2}, {"zero3", 2, persist_small}};

OptionsOverride options_of(const Case& c) {
  if (c.override_options == nullptr) return {};
  return c.override_options;
}

// Training of case `c` with the model built under deferred init, rank r's from seed_of(r).
Outcome train_deferred(const Case& c, Model kind, Opt opt,
                       const std::function<std::uint64_t(int rank)>& seed_of = {}) {
  const RankStrategy make = [&](int rank, const StorePtr& store) {
    const std::uint64_t seed = seed_of ? seed_of(rank) : 11;
    return make_deferred_strategy(c.strategy, rank, c.world, store, opt,
                                  [&] { return build(kind, seed); }, options_of(c));
  };
  return train_with(c.world, kind, opt, 2, 4, make);
}

const char* name_of(Model kind) { return kind == Model::mlp ? "mlp" : "gpt"; }

}  // namespace

// Same values, same flat layout, same shards: nothing but the time of sharding differs.
TEST_CASE("zero3 and hsdp with deferred init train exactly as with the model built whole",
          "[zero3]") {
  for (Model kind : {Model::mlp, Model::gpt})
    for (const Case& c : kCases)
      for (Opt opt : {Opt::sgd, Opt::adamw}) {
        INFO(c.strategy << " on " << c.world << " ranks, " << name_of(kind)
                        << (opt == Opt::sgd ? ", sgd" : ", adamw"));
        const Outcome whole = train(c.strategy, c.world, kind, opt, 2, 4, options_of(c));
        const Outcome deferred = train_deferred(c, kind, opt);
        CHECK(worst_difference(deferred, whole) == 0);
        CHECK(deferred.norms == whole.norms);
        CHECK(deferred.memory.parameter_bytes == whole.memory.parameter_bytes);
      }
  const Outcome ddp = train("ddp", 2, Model::gpt, Opt::sgd);
  CHECK(worst_difference(train_deferred(kCases[0], Model::gpt, Opt::sgd), ddp) < 1e-5);
}

// Each unit is broadcast from rank 0 as it is built, the root when the strategy is made.
TEST_CASE("deferred init gives every rank rank 0's initial values, unit by unit", "[zero3]") {
  for (const Case& c : kCases) {
    INFO(c.strategy << " on " << c.world << " ranks");
    const Outcome same = train_deferred(c, Model::gpt, Opt::sgd);
    const Outcome diverged =
        train_deferred(c, Model::gpt, Opt::sgd, [](int rank) { return rank == 0 ? 11u : 99u; });
    CHECK(worst_difference(diverged, same) == 0);
  }
}

TEST_CASE("deferred init frees each unit as it is built, and the strategy adopts them",
          "[zero3]") {
  std::vector<std::map<std::string, bool>> held(2);  // parameter -> holds bytes before strategy
  std::vector<std::vector<std::string>> units(2);
  genesis::testing::run_ranks(2, [&](int rank, StorePtr store) {
    const auto r = static_cast<std::size_t>(rank);
    auto group = genesis::testing::make_gloo_group(rank, 2, store);
    const StrategyOptions options = rank_options("zero3", store);
    DeferredInit deferred(options, group, Device::cpu());
    auto model = build_under(&deferred, [] { return build(Model::gpt); });
    model->to(Device::cpu());  // as the trainer does: the released units stay as they are
    for (auto& [name, p] : model->named_parameters()) held[r][name] = p.storage()->has_memory();
    auto s = genesis::parallel::make_strategy(options, model, optimizer_for(Opt::sgd), group,
                                              &deferred);
    units[r] = dynamic_cast<FullyShardedStrategy&>(*s).unit_names();
  });
  for (std::size_t r : {0u, 1u}) {
    CHECK(units[r] == std::vector<std::string>{"h.0", "h.1", ""});  // as wrap_units cuts it
    for (const auto& [name, has_bytes] : held[r]) {
      INFO("rank " << r << ", " << name);
      CHECK(has_bytes == (name.rfind("h.", 0) != 0));  // only the root is whole before
    }
  }
}

// A model whose constructor announces nothing (a Sequential of Linears) is cut by the strategy.
TEST_CASE("zero3 with deferred init shards a model that announces no unit as before", "[zero3]") {
  const ModelBuilder sequential = [] {
    genesis::Generator gen(11);
    std::vector<std::shared_ptr<nn::Module>> layers{std::make_shared<nn::Linear>(20, 16, gen),
                                                    std::make_shared<nn::ReLU>(),
                                                    std::make_shared<nn::Linear>(16, 5, gen)};
    return std::make_shared<nn::Sequential>(std::move(layers));
  };
  const Outcome whole = train_with(2, Model::mlp, Opt::sgd, 2, 4, [&](int rank, const auto& store) {
    return make_rank_strategy("zero3", rank, 2, store, Opt::sgd, sequential());
  });
  const Outcome deferred =
      train_with(2, Model::mlp, Opt::sgd, 2, 4, [&](int rank, const auto& store) {
        return make_deferred_strategy("zero3", rank, 2, store, Opt::sgd, sequential);
      });
  CHECK(worst_difference(deferred, whole) == 0);
}

TEST_CASE("deferred init refuses units that are not the model's as they were built", "[zero3]") {
  auto store = std::make_shared<genesis::rendezvous::HashStore>();
  auto group = genesis::testing::make_gloo_group(0, 1, store);
  const StrategyOptions options = rank_options("zero3", store);
  const auto attempt = [&](const std::function<void(nn::Module& built)>& change, bool other) {
    DeferredInit deferred(options, group, Device::cpu());
    auto model = build_under(&deferred, [] { return build(Model::gpt); });
    change(*model);
    genesis::parallel::make_strategy(options, other ? build(Model::gpt) : model,
                                     optimizer_for(Opt::sgd), group, &deferred);
  };
  CHECK_THROWS_WITH(attempt([](nn::Module&) {}, true),
                    Catch::Contains("'h.0' was sharded as the model was built but is not a unit"));
  const auto freeze_h0 = [](nn::Module& m) {
    m.named_parameters().at(2).second.set_requires_grad(false);  // h.0.ln_1.weight
  };
  CHECK_THROWS_WITH(attempt(freeze_h0, false),
                    Catch::Contains("parameters of unit 'h.0' changed after it was sharded"));
  CHECK_THROWS_AS(DeferredInit(rank_options("zero2", store), group, Device::cpu()),
                  genesis::InvalidArgument);
}

namespace {

constexpr const char* kPeakLine = "setup peak ";

// A launched rank: a 16-layer GPT (blocks of 111 K parameters beside a 7 K root) made into zero3
// over the job's ranks, built whole or under deferred init. The process is fresh, so the host
// allocator's peak since it started is the peak of setting up.
void report_setup_peak(bool deferred) {
  genesis::dist::init_process_group("gloo");
  {
    auto group = genesis::dist::default_group();
    StrategyOptions options;
    options.name = "zero3";
    std::unique_ptr<DeferredInit> init;
    if (deferred) init = std::make_unique<DeferredInit>(options, group, Device::cpu());
    auto model = build_under(init.get(), [] {
      genesis::Generator gen(3);
      return std::make_shared<nn::GPT>(nn::GPTConfig{16, 2, 96, 16, 64, 0.0}, gen);
    });
    auto s = genesis::parallel::make_strategy(options, model, optimizer_for(Opt::sgd), group,
                                              init.get());
    std::cout << kPeakLine << genesis::host_allocator::stats().peak_allocated_bytes << " of "
              << model->num_parameters() * 4 << " parameter bytes" << std::endl;
  }
  genesis::dist::destroy_process_group();
}

// Each rank's (peak, parameter bytes) from the launcher's prefixed output.
std::vector<std::pair<double, double>> launched_peaks(const std::string& worker) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto r = genesis::testing::run_genesis({"launch", "--nproc", "2", "--", self, worker});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::pair<double, double>> out;
  for (const std::string& line : genesis::testing::lines_of(r.out)) {
    const auto at = line.find(kPeakLine);
    if (at == std::string::npos) continue;
    std::istringstream in(line.substr(at + std::string(kPeakLine).size()));
    double peak = 0, params = 0;
    std::string of;
    in >> peak >> of >> params;
    out.emplace_back(peak, params);
  }
  REQUIRE(out.size() == 2);
  return out;
}

}  // namespace

TEST_CASE("launched: zero3 set up from a model built whole", "[.][zero3-setup-whole]") {
  report_setup_peak(false);
}

TEST_CASE("launched: zero3 set up under deferred init", "[.][zero3-setup-deferred]") {
  report_setup_peak(true);
}

// Built whole, a rank holds the full model before sharding it (measured: 1.06x the parameter
// bytes); under deferred init its shards (half the model at 2 ranks), the root and one unit at a
// time (0.60x).
TEST_CASE("zero3 with deferred init never holds the whole model on a rank", "[zero3]") {
  for (const auto& [peak, params] : launched_peaks("[zero3-setup-whole]")) CHECK(peak >= params);
  for (const auto& [peak, params] : launched_peaks("[zero3-setup-deferred]")) {
    CHECK(peak < 0.75 * params);
    CHECK(peak > 0.5 * params);  // the shards themselves
  }
}
