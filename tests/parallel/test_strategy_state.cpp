// Checkpoint state of every strategy (ckpt/state_piece.hpp), ranks as threads over Gloo: the pieces
// the ranks save cover every element of every logical tensor exactly once; a run stopped after 3
// steps and resumed from its pieces into a differently initialised model matches 6 uninterrupted
// steps byte for byte; pieces saved by one layout load into another; a model-only source leaves
// the optimizer empty; missing or misshapen tensors are errors that name them.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <mutex>

#include "genesis/core/error.hpp"
#include "genesis/nn/mlp.hpp"
#include "parallel/state_pieces.hpp"
#include "parallel/strategy_harness.hpp"

using namespace genesis::testing::strategy_harness;
using genesis::ckpt::StatePiece;
using genesis::ckpt::StateSource;
using Catch::Matchers::Contains;
using StorePtr = std::shared_ptr<genesis::rendezvous::Store>;

namespace {

// The pieces of all ranks assembled into whole logical tensors (copied, since pieces may view
// live storage), with a count of how often each element was provided. Not thread-safe: ranks
// add under the caller's lock.
class MemorySource : public StateSource {
 public:
  void add(const std::vector<StatePiece>& pieces) {
    for (const StatePiece& piece : pieces) {
      const Tensor data = piece.data.detach().to(Device::cpu()).contiguous();
      const std::int64_t total = shape_numel(piece.shape), n = data.numel();
      auto [it, fresh] = entries_.try_emplace(piece.name);
      Entry& e = it->second;
      if (fresh) {
        e.shape = piece.shape;
        e.dtype = data.dtype();
        e.bytes.assign(static_cast<std::size_t>(total) * dtype_size(e.dtype), 0);
        e.count.assign(static_cast<std::size_t>(total), 0);
      }
      if (e.shape != piece.shape || e.dtype != data.dtype() ||
          (data.dim() != 1 && data.shape() != piece.shape) || piece.offset < 0 ||
          piece.offset + n > total) {
        problems_.push_back(piece.name + ": a piece of another shape or dtype, or out of range");
        continue;
      }
      const std::size_t elem = dtype_size(e.dtype);
      std::memcpy(e.bytes.data() + static_cast<std::size_t>(piece.offset) * elem, data.raw_data(),
                  static_cast<std::size_t>(n) * elem);
      for (std::int64_t k = 0; k < n; ++k) ++e.count[static_cast<std::size_t>(piece.offset + k)];
    }
  }

  // Malformed pieces, and tensors with an element provided other than exactly once.
  std::vector<std::string> problems() const {
    std::vector<std::string> out = problems_;
    for (const auto& [name, e] : entries_)
      for (std::size_t k = 0; k < e.count.size(); ++k)
        if (e.count[k] != 1) {
          out.push_back(name + ": element " + std::to_string(k) + " saved " +
                        std::to_string(e.count[k]) + " times");
          break;
        }
    return out;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, e] : entries_) out.push_back(name);
    return out;
  }
  void erase(const std::string& name) { entries_.erase(name); }
  void reshape(const std::string& name, const Shape& shape) {
    Entry& e = entries_.at(name);
    e.shape = shape;
    e.bytes.assign(static_cast<std::size_t>(shape_numel(shape)) * dtype_size(e.dtype), 0);
  }
  const std::vector<std::uint8_t>& bytes(const std::string& name) const {
    return entries_.at(name).bytes;
  }

  bool contains(const std::string& name) const override { return entries_.count(name) > 0; }
  Shape shape(const std::string& name) const override {
    GENESIS_CHECK(contains(name), genesis::InvalidArgument, "MemorySource: no '" + name + "'");
    return entries_.at(name).shape;
  }
  Tensor read(const std::string& name, std::int64_t offset, std::int64_t numel) const override {
    GENESIS_CHECK(contains(name), genesis::InvalidArgument, "MemorySource: no '" + name + "'");
    const Entry& e = entries_.at(name);
    GENESIS_CHECK(offset >= 0 && numel >= 0 && offset + numel <= shape_numel(e.shape),
                  genesis::InvalidArgument, "MemorySource: range out of bounds of '" + name + "'");
    Tensor out = Tensor::empty({numel}, e.dtype);
    const std::size_t elem = dtype_size(e.dtype);
    std::memcpy(out.raw_data(), e.bytes.data() + static_cast<std::size_t>(offset) * elem,
                static_cast<std::size_t>(numel) * elem);
    return out;
  }

 private:
  struct Entry {
    Shape shape;
    DType dtype = DType::f32;
    std::vector<std::uint8_t> bytes;
    std::vector<int> count;
  };
  std::map<std::string, Entry> entries_;
  std::vector<std::string> problems_;
};

// Names that only one side has, or whose shape, dtype or bytes differ.
std::vector<std::string> differences(const MemorySource& a, const MemorySource& b) {
  std::vector<std::string> out;
  for (const std::string& name : a.names())
    if (!b.contains(name) || a.shape(name) != b.shape(name) ||
        a.read(name, 0, 0).dtype() != b.read(name, 0, 0).dtype() || a.bytes(name) != b.bytes(name))
      out.push_back(name);
  for (const std::string& name : b.names())
    if (!a.contains(name)) out.push_back(name + " (only in the second)");
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.detach().contiguous(), y = b.detach().contiguous();
  return x.dtype() == y.dtype() && x.numel() == y.numel() &&
         std::memcmp(x.raw_data(), y.raw_data(), static_cast<std::size_t>(x.numel()) *
                                                     dtype_size(x.dtype())) == 0;
}

// The message of the InvalidArgument `fn` throws ("" if it throws none; other errors propagate).
std::string invalid_argument_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const genesis::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* strategy;
  int world;
  int hsdp_shard_size = 0;
  bool offload_optimizer = false;
  bool offload_param = false;
  std::int64_t persistence_threshold = 0;
  OptionsOverride options() const {
    const int size = hsdp_shard_size;
    const bool offload = offload_optimizer, offload_params = offload_param;
    const std::int64_t persistence = persistence_threshold;
    return [size, offload, offload_params, persistence](genesis::parallel::StrategyOptions& o) {
      o.zero.hsdp_shard_size = size;
      o.zero.offload_optimizer = offload;
      o.zero.offload_param = offload_params;
      o.zero.persistence_threshold = persistence;
    };
  }
};
const Case kCases[] = {{"ddp", 2},   {"zero1", 2},          {"zero2", 2, 0, true},
                       {"zero2", 2}, {"zero3", 2},          {"zero3", 2, 0, true},
                       {"zero3", 2, 0, false, true},        {"hsdp", 4, 2},
                       {"zero3", 2, 0, false, false, 128}};
constexpr int kAccum = 2;

// Builds `c` on a model initialised from `seed`, loads `resume_from` when given, trains steps
// [first, last) and returns the pieces of all ranks assembled.
MemorySource run(const Case& c, Model kind, Opt opt, std::uint64_t seed, int first, int last,
                 const MemorySource* resume_from) {
  MemorySource out;
  std::mutex mutex;
  genesis::testing::run_ranks(c.world, [&](int rank, StorePtr store) {
    auto s = make_rank_strategy(c.strategy, rank, c.world, store, opt, build(kind, seed),
                                c.options());
    if (resume_from) {
      s->load_state(*resume_from);
      s->optimizer().set_step_count(first);
    }
    for (int step = first; step < last; ++step)
      train_step(*s, kind, opt, rank, c.world, kAccum, step);
    const std::vector<StatePiece> pieces = s->state_pieces();
    std::lock_guard lock(mutex);
    out.add(pieces);
  });
  return out;
}

std::string describe(const Case& c, Model kind, Opt opt) {
  return std::string(c.strategy) + (c.offload_optimizer ? " (offload)" : "") +
         (c.offload_param ? " (offload_param)" : "") +
         (c.persistence_threshold > 0 ? " (persistence)" : "") + " on " +
         std::to_string(c.world) + " ranks, " +
         (kind == Model::mlp ? "mlp" : "gpt") + ", " + (opt == Opt::sgd ? "sgd" : "adamw");
}

// The MLP plus a buffer and a frozen parameter, which every strategy must save once (rank 0)
// and restore although no unit or bucket holds them.
class MLPWithExtras : public genesis::nn::Module {
 public:
  MLPWithExtras(std::uint64_t seed, double buffer_value, bool frozen) {
    genesis::Generator gen(seed);
    mlp_ = register_module("mlp", std::make_shared<genesis::nn::MLP>(
                                      20, std::vector<std::int64_t>{64, 48}, 5, gen));
    register_buffer("running", Tensor::full({3, 4}, buffer_value));
    if (frozen) register_parameter("frozen", Tensor::randn({7}, gen)).set_requires_grad(false);
  }
  Tensor forward(const Tensor& x) override { return (*mlp_)(x); }

 private:
  std::shared_ptr<genesis::nn::MLP> mlp_;
};

}  // namespace

TEST_CASE("every strategy resumes bit-exactly from its own state pieces", "[strategy-state]") {
  for (const Case& c : kCases)
    for (Model kind : {Model::mlp, Model::gpt})
      for (Opt opt : {Opt::adamw, Opt::sgd}) {
        INFO(describe(c, kind, opt));
        const MemorySource whole = run(c, kind, opt, 11, 0, 6, nullptr);
        const MemorySource first = run(c, kind, opt, 11, 0, 3, nullptr);
        const MemorySource resumed = run(c, kind, opt, 99, 3, 6, &first);
        CHECK(whole.problems() == std::vector<std::string>{});
        CHECK(first.problems() == std::vector<std::string>{});
        CHECK(resumed.problems() == std::vector<std::string>{});
        const std::string param = build(kind)->named_parameters().front().first;
        REQUIRE(whole.contains("optimizer." + param + ".step"));
        CHECK(whole.read("optimizer." + param + ".step", 0, 1).item<std::int64_t>() == 6);
        const char* buffer = opt == Opt::sgd ? ".momentum_buffer" : ".exp_avg_sq";
        CHECK(whole.contains("optimizer." + param + buffer));
        CHECK(differences(first, whole).size() > 0);  // training moved the state
        CHECK(differences(resumed, whole) == std::vector<std::string>{});
      }
}

TEST_CASE("state saved by zero2 on 2 ranks loads into ddp on 3, zero3 on 1 and 2, zero1 on 3, hsdp on 4",
          "[strategy-state]") {
  for (Model kind : {Model::mlp, Model::gpt})
    for (Opt opt : {Opt::adamw, Opt::sgd}) {
      const MemorySource saved = run({"zero2", 2}, kind, opt, 11, 0, 3, nullptr);
      REQUIRE(saved.problems() == std::vector<std::string>{});
      for (const Case& target :
           {Case{"ddp", 3}, Case{"zero3", 1}, Case{"zero1", 3}, Case{"hsdp", 4, 2},
            Case{"zero3", 2, 0, false, false, 128}}) {
        INFO(describe(target, kind, opt));
        MemorySource reloaded;
        std::vector<std::string> mismatched;
        std::mutex mutex;
        genesis::testing::run_ranks(target.world, [&](int rank, StorePtr store) {
          auto s = make_rank_strategy(target.strategy, rank, target.world, store, opt,
                                      build(kind, 99), target.options());
          s->load_state(saved);
          s->gather_full_parameters();
          std::vector<std::string> bad;
          for (const auto& [name, p] : s->module().named_parameters())
            if (!same_bytes(p, saved.read_full("model." + name)))
              bad.push_back(name + " on rank " + std::to_string(rank));
          const std::vector<StatePiece> pieces = s->state_pieces();
          std::lock_guard lock(mutex);
          reloaded.add(pieces);
          mismatched.insert(mismatched.end(), bad.begin(), bad.end());
        });
        CHECK(mismatched == std::vector<std::string>{});
        CHECK(reloaded.problems() == std::vector<std::string>{});
        // The optimizer state, reassembled from the new layout's own pieces, is the saved one.
        CHECK(differences(reloaded, saved) == std::vector<std::string>{});
      }
    }
}

TEST_CASE("buffers and frozen parameters are saved once and restored", "[strategy-state]") {
  for (const Case& c : kCases) {
    const bool frozen = std::string(c.strategy) != "ddp";  // DDP's optimizer takes every parameter
    INFO(c.strategy << (frozen ? " with" : " without") << " a frozen parameter");
    MemorySource saved, reloaded;
    std::vector<std::string> wrong;
    std::mutex mutex;
    for (bool resume : {false, true})
      genesis::testing::run_ranks(c.world, [&](int rank, StorePtr store) {
        auto model = std::make_shared<MLPWithExtras>(resume ? 99 : 11, resume ? 0.0 : 7.0, frozen);
        auto s =
            make_rank_strategy(c.strategy, rank, c.world, store, Opt::adamw, model, c.options());
        if (resume) {
          s->load_state(saved);
        } else {
          train_step(*s, Model::mlp, Opt::adamw, rank, c.world, kAccum, 0);
        }
        s->gather_full_parameters();
        std::vector<std::string> bad;
        for (const auto& [name, t] : model->named_buffers())
          if (t.to_vector() != std::vector<float>(12, 7.0f)) bad.push_back(name);
        if (resume && frozen) {
          for (const auto& [name, p] : model->named_parameters())
            if (name == "frozen" && !same_bytes(p, saved.read_full("model.frozen")))
              bad.push_back(name);
        }
        const std::vector<StatePiece> pieces = s->state_pieces();
        std::lock_guard lock(mutex);
        (resume ? reloaded : saved).add(pieces);
        for (const std::string& b : bad) wrong.push_back(b + " on rank " + std::to_string(rank));
      });
    CHECK(wrong == std::vector<std::string>{});
    CHECK(saved.contains("model.running"));
    CHECK(saved.contains("model.frozen") == frozen);
    CHECK(saved.problems() == std::vector<std::string>{});
    CHECK(differences(reloaded, saved) == std::vector<std::string>{});
  }
}

TEST_CASE("a model-only source loads the parameters and leaves the optimizer empty",
          "[strategy-state]") {
  for (const Case& c : kCases) {
    INFO(c.strategy);
    MemorySource saved = run(c, Model::mlp, Opt::adamw, 11, 0, 1, nullptr);
    for (const std::string& name : saved.names())
      if (name.rfind("optimizer.", 0) == 0) saved.erase(name);
    const MemorySource reloaded = run(c, Model::mlp, Opt::adamw, 99, 0, 0, &saved);
    CHECK(differences(reloaded, saved) == std::vector<std::string>{});
  }
}

TEST_CASE("a missing or misshapen tensor is an InvalidArgument naming it", "[strategy-state]") {
  const MemorySource saved = run({"ddp", 1}, Model::mlp, Opt::adamw, 11, 0, 1, nullptr);
  const auto params = build(Model::mlp)->named_parameters();
  const std::string weight = "model." + params.front().first;
  const std::string moment = "optimizer." + params.back().first + ".exp_avg";
  const Case cases[] = {{"ddp", 1}, {"zero1", 1}, {"zero2", 2}, {"zero3", 2}, {"hsdp", 2, 1}};
  for (const Case& c : cases) {
    INFO(c.strategy << " on " << c.world << " ranks");
    for (const std::string& victim : {weight, moment}) {
      MemorySource missing = saved, misshapen = saved;
      missing.erase(victim);
      misshapen.reshape(victim, {3, 7});
      CHECK_THAT(invalid_argument_of([&] { run(c, Model::mlp, Opt::adamw, 11, 0, 0, &missing); }),
                 Contains("'" + victim + "'"));
      CHECK_THAT(invalid_argument_of([&] { run(c, Model::mlp, Opt::adamw, 11, 0, 0, &misshapen); }),
                 Contains("'" + victim + "'"));
    }
  }
}

// The flat-shard translation on a layout small enough to check by hand: parameters of 3 and 2
// elements at offsets 0 and 16 (alignment), 18 elements in 4 shards of 5. Shards 1 and 2 hold
// only the alignment gap and shard 3 ends in padding: none of that is saved, it reads back as
// zeros, and the gap shards still get the optimizer step.
TEST_CASE("flat shards map to parameter ranges, skipping gaps and padding", "[strategy-state]") {
  namespace detail = genesis::parallel::detail;
  detail::FlatParams flat = detail::flatten_parameters(
      {{"a", Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})},
       {"b", Tensor::from_vector(std::vector<float>{4, 5}, {1, 2})}},
      4);
  REQUIRE(flat.offsets == std::vector<std::int64_t>{0, 16});
  REQUIRE(flat.shard_numel == 5);
  const auto in_param = [](std::int64_t i) { return i < 3 || (i >= 16 && i < 18); };
  std::vector<float> moments(20);  // nonzero in gaps and padding too: those must not be saved
  for (std::size_t i = 0; i < moments.size(); ++i) moments[i] = 100.0f + static_cast<float>(i);
  const Tensor exp_avg = Tensor::from_vector(moments, {20});

  MemorySource source;
  for (int index = 0; index < 4; ++index) {
    std::vector<StatePiece> pieces;
    detail::append_shard_pieces(flat, index, flat.shard_of(flat.flat, index), "model.", "", pieces);
    detail::SlotState state;
    state.step = 7;
    state.buffers = {{"exp_avg", flat.shard_of(exp_avg, index)}};
    detail::append_shard_slot_pieces(flat, index, state, pieces);
    source.add(pieces);
  }
  CHECK(source.problems() == std::vector<std::string>{});
  CHECK(source.names() == std::vector<std::string>{"model.a", "model.b", "optimizer.a.exp_avg",
                                                   "optimizer.a.step", "optimizer.b.exp_avg",
                                                   "optimizer.b.step"});
  CHECK(source.shape("model.b") == Shape{1, 2});
  CHECK(source.read_full("model.b").to_vector() == std::vector<float>{4, 5});
  CHECK(source.read_full("optimizer.b.exp_avg").to_vector() == std::vector<float>{116, 117});
  CHECK(source.read_full("optimizer.a.step").item<std::int64_t>() == 7);

  const detail::OptimizerLayout layout = detail::optimizer_layout(source, flat.params, {"exp_avg"});
  CHECK(layout.fields == std::vector<std::string>{"exp_avg"});
  for (int index = 0; index < 4; ++index) {
    INFO("shard " << index);
    CHECK(detail::read_shard(source, flat, index, flat.flat).to_vector() ==
          flat.shard_of(flat.flat, index).to_vector());
    const auto state = detail::read_shard_slot(source, layout, flat, index, 3);
    REQUIRE(state.size() == 2);
    CHECK(state[0].first == "3.step");
    CHECK(state[0].second.item<std::int64_t>() == 7);
    CHECK(state[1].first == "3.exp_avg");
    std::vector<float> expected;
    for (std::int64_t i = index * 5; i < index * 5 + 5; ++i)
      expected.push_back(in_param(i) ? moments[static_cast<std::size_t>(i)] : 0.0f);
    CHECK(state[1].second.to_vector() == expected);
  }
  // A step that differs between parameters one shard steps together is refused, by name.
  MemorySource disagreeing = source;
  disagreeing.erase("optimizer.b.step");
  disagreeing.add({StatePiece{"optimizer.b.step", {}, 0, Tensor::scalar(8, DType::i64)}});
  detail::FlatParams one_shard = detail::flatten_parameters(
      {{"a", Tensor::zeros({3})}, {"b", Tensor::zeros({1, 2})}}, 1);
  CHECK_THAT(invalid_argument_of([&] {
               detail::read_shard_slot(disagreeing, layout, one_shard, 0, 0);
             }),
             Contains("'optimizer.b.step'") && Contains("'optimizer.a.step'"));
}
