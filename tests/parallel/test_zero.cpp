// The sharded strategies against DDP, ranks as threads over Gloo: after K steps of AdamW with
// gradient accumulation and clipping, zero1/zero2 (and zero3, hsdp) hold the same parameters as
// ddp; their optimizer state is 1/N of DDP's.
#include <catch2/catch.hpp>

#include "parallel/strategy_harness.hpp"

using namespace genesis::testing::strategy_harness;


// Sharding changes only the order in which floats are added: the reduce-scatter of a bucket
// laid out differently, zero2's per-micro-batch reduction, 3-rank sums. With SGD that moves
// parameters by rounding (1e-7); every element is held to 1e-5 of its tensor's scale.
TEST_CASE("zero1 and zero2 reach DDP's parameters (SGD, elementwise)", "[zero]") {
  for (Model kind : {Model::mlp, Model::gpt})
    for (int world : {2, 3}) {
      const Outcome ddp = train("ddp", world, kind, Opt::sgd);
      CHECK(ddp.norms.front() > 0.2);  // clipping was active
      for (const char* strategy : {"zero1", "zero2"}) {
        const Outcome z = train(strategy, world, kind, Opt::sgd);
        INFO(strategy << " on " << world << " ranks, " << (kind == Model::mlp ? "mlp" : "gpt"));
        CHECK(worst_difference(z, ddp) < 1e-5);
        REQUIRE(z.norms.size() == ddp.norms.size());
        for (std::size_t i = 0; i < z.norms.size(); ++i)
          CHECK(z.norms[i] == Approx(ddp.norms[i]).epsilon(1e-5));
      }
    }
}

// Adam divides each gradient by its own running magnitude, so an element whose true gradient is
// zero and whose computed one is rounding noise (the key bias of attention: softmax ignores a
// constant added to every score) moves by +-lr in a direction set by that noise. Elementwise
// agreement is then a matter of luck; the model as a whole agrees to 1e-5, and the MLP, which
// has no such element, elementwise too. zero1 on 2 ranks adds in DDP's order and is exact.
TEST_CASE("zero1 and zero2 reach DDP's parameters (AdamW)", "[zero]") {
  for (int world : {2, 3}) {
    const Outcome mlp = train("ddp", world, Model::mlp), gpt = train("ddp", world, Model::gpt);
    for (const char* strategy : {"zero1", "zero2"}) {
      INFO(strategy << " on " << world << " ranks");
      CHECK(worst_difference(train(strategy, world, Model::mlp), mlp) < 1e-5);
      const Outcome z = train(strategy, world, Model::gpt);
      CHECK(model_difference(z, gpt) < 1e-5);
      if (world == 2 && std::string(strategy) == "zero1") CHECK(worst_difference(z, gpt) == 0);
    }
  }
}

TEST_CASE("zero1 and zero2 hold 1/N of DDP's optimizer state", "[zero]") {
  for (int world : {2, 3, 4}) {
    const Outcome ddp = train("ddp", world, Model::gpt, Opt::adamw, 1, 1);
    for (const char* strategy : {"zero1", "zero2"}) {
      const Outcome z = train(strategy, world, Model::gpt, Opt::adamw, 1, 1);
      INFO(strategy << " on " << world << " ranks");
      const double ratio = static_cast<double>(z.memory.optimizer_bytes) /
                           static_cast<double>(ddp.memory.optimizer_bytes);
      CHECK(ratio == Approx(1.0 / world).epsilon(0.05));
      CHECK(z.memory.parameter_bytes >= ddp.memory.parameter_bytes);  // full parameters
    }
  }
}

// ZeRO-Offload: the optimizer steps host copies of the shards (here host to host); the update is
// the same. Where the copies are is measured: on this CPU run they are new host tensors (each
// rank's shard and its gradient), while nothing left a device, so none is reported offloaded
// (tests/train/test_train_device.cpp checks a GPU run's state leaves the device). ddp refuses
// the setting by name.
TEST_CASE("zero1 and zero2 with the optimizer offloaded match them without", "[zero]") {
  const auto offload = [](genesis::parallel::StrategyOptions& o) {
    o.zero.offload_optimizer = true;
  };
  for (const char* strategy : {"zero1", "zero2"}) {
    INFO(strategy);
    HostBytesAtEnd plain_bytes(2), offloaded_bytes(2);
    const Outcome plain =
        train(strategy, 2, Model::gpt, Opt::adamw, 2, 4, {}, plain_bytes.inspect());
    const Outcome offloaded =
        train(strategy, 2, Model::gpt, Opt::adamw, 2, 4, offload, offloaded_bytes.inspect());
    CHECK(worst_difference(offloaded, plain) == 0);
    // The ranks' shards together are the padded parameters, each copied once with its gradient;
    // the allocator rounds each block up by at most 64 bytes here.
    const std::int64_t copies = 2 * plain.memory.parameter_bytes;
    const std::int64_t extra = offloaded_bytes.bytes() - plain_bytes.bytes();
    INFO("host bytes: " << plain_bytes.bytes() << " plain, " << offloaded_bytes.bytes()
                        << " offloaded; the host copies hold " << copies);
    CHECK(extra >= copies - kTransientHostBytes);
    CHECK(extra <= copies + copies / 20);
    CHECK(offloaded.memory.optimizer_bytes == plain.memory.optimizer_bytes);
    CHECK(offloaded.memory.offloaded_bytes == 0);
    CHECK(plain.memory.offloaded_bytes == 0);
  }
  // One rank: the refusal comes before any collective, and with two a rank that refuses first
  // can close its group while the other is still joining it (which then fails on that instead).
  CHECK_THROWS_WITH(train("ddp", 1, Model::mlp, Opt::adamw, 1, 1, offload),
                    Catch::Contains("offload_optimizer = cpu applies to zero1, zero2, zero3 and "
                                    "hsdp, not to ddp"));
}
