// Gradient checkpointing recomputes each GPT block in backward: it does happen (each block runs
// twice a step, and the graph holds a fraction of the activations the plain model's does), and
// the gradients must be those of the plain model bit for bit (dropout masks included, through
// the rewound generator), also when DDP's gradient hooks fire inside the recompute and its
// end-of-backward callback must wait for the whole pass.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <mutex>

#include "genesis/autograd/checkpoint.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/parallel/ddp.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "support/thread_ranks.hpp"

namespace genesis {
namespace {

constexpr nn::GPTConfig kConfig{.n_layer = 3, .n_head = 2, .n_embd = 16, .block_size = 8,
                                .vocab_size = 32, .dropout = 0.1};

std::shared_ptr<nn::GPT> make_gpt(bool checkpointing) {
  Generator init(5);
  auto gpt = std::make_shared<nn::GPT>(kConfig, init);
  gpt->set_gradient_checkpointing(checkpointing);
  return gpt;
}

Tensor tokens(std::int64_t batch, std::uint64_t seed) {
  Generator gen(seed);
  Tensor t = Tensor::empty({batch, kConfig.block_size}, DType::i64);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<std::int64_t>()[i] = static_cast<std::int64_t>(gen.next_u64() % kConfig.vocab_size);
  return t;
}

std::vector<std::vector<float>> grads_of(nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (auto& [name, p] : model.named_parameters()) out.push_back(p.grad().to_vector());
  return out;
}

std::vector<std::vector<float>> train_step(nn::Module& model, std::uint64_t seed) {
  Tensor x = tokens(4, seed), y = tokens(4, seed + 1);
  for (int repeat = 0; repeat < 2; ++repeat)  // twice: the generator must advance identically
    cross_entropy(model(x), y).backward();
  return grads_of(model);
}

// The GPT's blocks, h.0 to h.<n_layer - 1>.
std::vector<std::shared_ptr<nn::Module>> blocks_of(nn::Module& gpt) {
  std::vector<std::shared_ptr<nn::Module>> blocks;
  for (auto& [name, child] : gpt.named_children())
    if (name == "h")
      for (auto& [index, block] : child->named_children()) blocks.push_back(block);
  return blocks;
}

TEST_CASE("gradient checkpointing runs each block again in backward and keeps its activations "
          "out of the graph", "[checkpointing]") {
  std::map<bool, std::size_t> held;  // host bytes the forward's graph keeps for backward
  for (bool checkpointing : {false, true}) {
    INFO("gradient checkpointing " << checkpointing);
    auto gpt = make_gpt(checkpointing);
    const auto blocks = blocks_of(*gpt);
    REQUIRE(blocks.size() == static_cast<std::size_t>(kConfig.n_layer));
    std::vector<int> forwards(blocks.size(), 0);
    for (std::size_t i = 0; i < blocks.size(); ++i)
      blocks[i]->register_forward_pre_hook([&forwards, i](nn::Module&, const Tensor&) {
        ++forwards[i];
        return Tensor();
      });
    const Tensor x = tokens(4, 1), y = tokens(4, 2);
    const std::size_t before = host_allocator::stats().allocated_bytes;
    Tensor loss = cross_entropy((*gpt)(x), y);
    held[checkpointing] = host_allocator::stats().allocated_bytes - before;
    CHECK(forwards == std::vector<int>(blocks.size(), 1));
    loss.backward();
    // The recompute is each block's second forward.
    CHECK(forwards == std::vector<int>(blocks.size(), checkpointing ? 2 : 1));
  }
  // Per block the plain graph keeps the layer norms, q, k, v, the attention, the MLP's wide
  // activations and the dropout masks; the checkpointed one keeps the block's input alone.
  INFO("held by the graph: " << held[false] << " bytes plain, " << held[true] << " checkpointed");
  CHECK(held[true] < held[false] / 2);
}

TEST_CASE("gradient checkpointing gives the plain model's gradients exactly", "[checkpointing]") {
  auto plain = make_gpt(false), recomputed = make_gpt(true);
  CHECK(train_step(*plain, 1) == train_step(*recomputed, 1));
  // Both consumed the same random draws (the recompute rewinds and restores the stream).
  CHECK(plain->named_generators()[0].second->state() == recomputed->named_generators()[0].second->state());
  // Evaluation runs without a graph: nothing to recompute, same logits.
  plain->eval();
  recomputed->eval();
  NoGradGuard no_grad;
  Tensor x = tokens(2, 9);
  CHECK((*plain)(x).to_vector() == (*recomputed)(x).to_vector());
}

TEST_CASE("checkpoint() is plain fn when nothing needs a gradient", "[checkpointing]") {
  int calls = 0;
  auto fn = [&](const Tensor& t) { ++calls; return t * 2.0; };
  Tensor x = Tensor::ones({3});
  Tensor y = autograd::checkpoint(fn, x);
  CHECK(calls == 1);
  CHECK_FALSE(y.requires_grad());
  Tensor leaf = Tensor::ones({3});
  leaf.set_requires_grad(true);
  sum(autograd::checkpoint(fn, leaf)).backward();
  CHECK(calls == 3);  // forward, then the recompute in backward
  CHECK(leaf.grad().to_vector() == std::vector<float>{2, 2, 2});
}

TEST_CASE("DDP with gradient checkpointing averages the same gradients as without", "[checkpointing]") {
  std::vector<std::vector<std::vector<float>>> results(4);
  std::mutex mutex;
  for (bool checkpointing : {false, true}) {
    testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
      auto group = testing::make_gloo_group(rank, 2, store);
      // Small buckets so several all-reduces start from hooks fired inside recomputes.
      parallel::DistributedDataParallel ddp(make_gpt(checkpointing), group, {.bucket_cap_mb = 0.002});
      cross_entropy(ddp(tokens(2, 10 + rank)), tokens(2, 20 + rank)).backward();
      std::lock_guard lock(mutex);
      results[(checkpointing ? 2 : 0) + rank] = grads_of(ddp);
    });
  }
  CHECK(results[0] == results[1]);  // averaged: equal on both ranks
  CHECK(results[0] == results[2]);
  CHECK(results[1] == results[3]);
}

}  // namespace
}  // namespace genesis
