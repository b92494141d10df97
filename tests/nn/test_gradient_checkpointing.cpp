// Gradient checkpointing recomputes each GPT block in backward: the gradients must be those of
// the plain model bit for bit (dropout masks included, through the rewound generator), also when
// DDP's gradient hooks fire inside the recompute and its end-of-backward callback must wait for
// the whole pass.
#include <catch2/catch.hpp>

#include <cstring>
#include <mutex>

#include "genesis/autograd/checkpoint.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/parallel/ddp.hpp"
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
