// amp::autocast: guards nest and restore, per thread; under bf16 the covered ops (matmul,
// linear, both attentions) return bf16 equal to the f32 op on bf16-rounded inputs, rounded, while
// f32 leaves get f32 gradients that went through bf16 and stay close to the f32 ones; other ops,
// and everything with autocast off, are untouched; backward and checkpoint recompute see the
// right state; under fp16 a large upstream gradient overflows to inf in the weight's .grad.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/checkpoint.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"

using namespace genesis;
using amp::AutocastGuard;

namespace {

Tensor leaf(Shape shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator gen(seed);
  Tensor t = Tensor::rand(std::move(shape), gen, lo, hi);
  t.set_requires_grad(true);
  return t;
}

// t's values rounded to `dtype` and back to f32, outside the graph.
Tensor rounded(const Tensor& t, DType dtype = DType::bf16) {
  return t.detach().to(dtype).to(DType::f32);
}

// Largest |a - b| relative to b's largest magnitude.
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(y[i])));
  }
  return diff / scale;
}

// Every element survives a round trip through `dtype` unchanged: the value passed through it.
bool representable_in(const Tensor& t, DType dtype) {
  return rounded(t, dtype).to_vector() == t.to_vector();
}

bool any_inf(const Tensor& t) {
  for (float x : t.to_vector())
    if (std::isinf(x)) return true;
  return false;
}

bool all_finite(const Tensor& t) {
  for (float x : t.to_vector())
    if (!std::isfinite(x)) return false;
  return true;
}

void clear_grads(const std::vector<Tensor>& leaves) {
  for (Tensor t : leaves) t.set_grad(Tensor());
}

}  // namespace

TEST_CASE("autocast guards nest, restore the previous state and are per thread", "[autocast]") {
  REQUIRE_FALSE(amp::autocast_dtype().has_value());
  {
    AutocastGuard bf16(DType::bf16);
    CHECK(amp::autocast_dtype() == DType::bf16);
    {
      AutocastGuard f16(DType::f16);
      CHECK(amp::autocast_dtype() == DType::f16);
      {
        AutocastGuard off(std::nullopt);
        CHECK_FALSE(amp::autocast_dtype().has_value());
        AutocastGuard on_again(DType::bf16);
        CHECK(amp::autocast_dtype() == DType::bf16);
      }
      CHECK(amp::autocast_dtype() == DType::f16);
      {
        AutocastGuard f32(DType::f32);  // f32 means off
        CHECK_FALSE(amp::autocast_dtype().has_value());
      }
      CHECK(amp::autocast_dtype() == DType::f16);
    }
    CHECK(amp::autocast_dtype() == DType::bf16);

    std::optional<DType> seen_by_other_thread = DType::f32;
    std::thread([&] { seen_by_other_thread = amp::autocast_dtype(); }).join();
    CHECK_FALSE(seen_by_other_thread.has_value());

    // A type autocast cannot compute in is refused, and the state is left as it was.
    CHECK_THROWS_AS(AutocastGuard(DType::i64), InvalidArgument);
    CHECK(amp::autocast_dtype() == DType::bf16);
  }
  CHECK_FALSE(amp::autocast_dtype().has_value());
}

TEST_CASE("bf16 autocast linear: bf16 output of the rounded inputs, f32 gradients through bf16",
          "[autocast]") {
  Tensor x = leaf({6, 8}, 1), w = leaf({5, 8}, 2, -0.5, 0.5), b = leaf({5}, 3);
  const Tensor up = leaf({6, 5}, 4).detach();  // upstream gradient

  // f32 reference: the op on the bf16-rounded inputs, with the plain f32 gradients beside it.
  const Tensor expected = linear(rounded(x), rounded(w), rounded(b)).to(DType::bf16);
  sum(mul(linear(x, w, b), up)).backward();
  const Tensor dx32 = x.grad(), dw32 = w.grad(), db32 = b.grad();
  clear_grads({x, w, b});

  Tensor y;
  {
    AutocastGuard autocast(DType::bf16);
    y = linear(x, w, b);
  }
  REQUIRE(y.dtype() == DType::bf16);
  CHECK(y.to_vector() == expected.to_vector());
  sum(mul(y, up)).backward();

  for (const Tensor& t : {x, w, b}) {
    REQUIRE(t.grad().defined());
    CHECK(t.grad().dtype() == DType::f32);
    CHECK(representable_in(t.grad(), DType::bf16));  // it passed through the bf16 cast
  }
  CHECK(relative_difference(x.grad(), dx32) < 2e-2);
  CHECK(relative_difference(w.grad(), dw32) < 2e-2);
  CHECK(relative_difference(b.grad(), db32) < 2e-2);
  // Exactly: the upstream gradient rounded to bf16 (y's type), the f32 products on the rounded
  // inputs, rounded to bf16 (the inputs' cast) and widened back.
  const Tensor dy = rounded(up);
  CHECK(w.grad().to_vector() ==
        rounded(matmul(dy.transpose(0, 1), rounded(x))).to_vector());
  CHECK(b.grad().to_vector() == rounded(sum(dy, {0})).to_vector());
}

TEST_CASE("bf16 autocast matmul equals the f32 matmul of the rounded operands", "[autocast]") {
  Tensor a = leaf({2, 3, 4}, 5), m = leaf({4, 7}, 6), v = leaf({4}, 7);
  const Tensor up = leaf({2, 3, 7}, 8).detach();
  const Tensor expected = matmul(rounded(a), rounded(m)).to(DType::bf16);
  const Tensor expected_vec = matmul(rounded(a), rounded(v)).to(DType::bf16);
  sum(mul(matmul(a, m), up)).backward();
  const Tensor da32 = a.grad(), dm32 = m.grad();
  clear_grads({a, m});

  AutocastGuard autocast(DType::bf16);
  Tensor y = matmul(a, m);
  REQUIRE(y.dtype() == DType::bf16);
  CHECK(y.to_vector() == expected.to_vector());
  Tensor yv = matmul(a, v);  // a 1-d operand
  REQUIRE(yv.dtype() == DType::bf16);
  CHECK(yv.to_vector() == expected_vec.to_vector());

  sum(mul(y, up)).backward();  // inside the guard: the engine runs backward without autocast
  REQUIRE(a.grad().dtype() == DType::f32);
  REQUIRE(m.grad().dtype() == DType::f32);
  CHECK(relative_difference(a.grad(), da32) < 2e-2);
  CHECK(relative_difference(m.grad(), dm32) < 2e-2);
  // The backward products themselves ran in f32: only the casts around the op round.
  const Tensor dy = rounded(up);
  // (matmul folds the batch into the rows for a shared right operand: (K, B*M) @ (B*M, N).)
  CHECK(m.grad().to_vector() ==
        rounded(matmul(rounded(a).reshape({-1, 4}).transpose(0, 1), dy.reshape({-1, 7})))
            .to_vector());
}

TEST_CASE("backward inside and outside a bf16 autocast region gives the same gradients",
          "[autocast]") {
  // The first layer is kept in f32 (autocast switched off around it): its backward products
  // must stay f32 even when backward() is called under the guard.
  Tensor x = leaf({4, 6}, 9), w1 = leaf({8, 6}, 10), w2 = leaf({3, 8}, 11);
  auto grads = [&](bool backward_under_autocast) {
    clear_grads({x, w1, w2});
    AutocastGuard autocast(DType::bf16);
    Tensor h;
    {
      AutocastGuard f32_region(std::nullopt);
      h = relu(linear(x, w1));
    }
    Tensor loss = sum(mul(linear(h, w2), Tensor::full({4, 3}, 0.3)));
    std::optional<AutocastGuard> off;
    if (!backward_under_autocast) off.emplace(std::nullopt);
    loss.backward();
    return std::vector<std::vector<float>>{x.grad().to_vector(), w1.grad().to_vector(),
                                           w2.grad().to_vector()};
  };
  CHECK(grads(true) == grads(false));
}

TEST_CASE("bf16 autocast attention: bf16 outputs of the rounded inputs, f32 gradients",
          "[autocast]") {
  SECTION("scaled_dot_product_attention") {
    Tensor q = leaf({2, 2, 5, 4}, 12), k = leaf({2, 2, 5, 4}, 13), v = leaf({2, 2, 5, 4}, 14);
    const Tensor up = leaf({2, 2, 5, 4}, 15).detach();
    const Tensor expected =
        scaled_dot_product_attention(rounded(q), rounded(k), rounded(v), true).to(DType::bf16);
    sum(mul(scaled_dot_product_attention(q, k, v, true), up)).backward();
    const Tensor dq32 = q.grad(), dk32 = k.grad(), dv32 = v.grad();
    clear_grads({q, k, v});

    Tensor y;
    {
      AutocastGuard autocast(DType::bf16);
      y = scaled_dot_product_attention(q, k, v, true);
    }
    REQUIRE(y.dtype() == DType::bf16);
    CHECK(y.to_vector() == expected.to_vector());
    sum(mul(y, up)).backward();
    for (const Tensor& t : {q, k, v}) {
      REQUIRE(t.grad().dtype() == DType::f32);
      CHECK(representable_in(t.grad(), DType::bf16));
    }
    CHECK(relative_difference(q.grad(), dq32) < 3e-2);
    CHECK(relative_difference(k.grad(), dk32) < 3e-2);
    CHECK(relative_difference(v.grad(), dv32) < 3e-2);
  }
  SECTION("packed_attention") {
    Tensor qkv = leaf({2, 5, 12}, 16);
    const Tensor up = leaf({2, 5, 4}, 17).detach();
    const Tensor expected = packed_attention(rounded(qkv), 2, true).to(DType::bf16);
    sum(mul(packed_attention(qkv, 2, true), up)).backward();
    const Tensor d32 = qkv.grad();
    clear_grads({qkv});

    Tensor y;
    {
      AutocastGuard autocast(DType::bf16);
      y = packed_attention(qkv, 2, true);
    }
    REQUIRE(y.dtype() == DType::bf16);
    CHECK(y.to_vector() == expected.to_vector());
    sum(mul(y, up)).backward();
    REQUIRE(qkv.grad().dtype() == DType::f32);
    CHECK(representable_in(qkv.grad(), DType::bf16));
    CHECK(relative_difference(qkv.grad(), d32) < 3e-2);
  }
}

TEST_CASE("without autocast the covered ops are unchanged, other ops ignore autocast",
          "[autocast]") {
  Tensor x = leaf({3, 4}, 18), w = leaf({2, 4}, 19);
  const Tensor plain = linear(x, w);
  REQUIRE(plain.dtype() == DType::f32);
  REQUIRE(plain.grad_fn());
  CHECK(plain.grad_fn()->name() == "linear");  // no cast around the op
  {
    AutocastGuard autocast(DType::bf16);
    CHECK(linear(x, w).grad_fn()->name() != "linear");  // the control: casts are recorded
    AutocastGuard off(std::nullopt);
    const Tensor again = linear(x, w);
    CHECK(again.dtype() == DType::f32);
    CHECK(again.grad_fn()->name() == "linear");
    CHECK(again.to_vector() == plain.to_vector());
  }
  // Ops outside autocast's list keep their own dtype rule, even under the guard.
  AutocastGuard autocast(DType::bf16);
  CHECK(add(x, x).dtype() == DType::f32);
  CHECK(softmax(x).dtype() == DType::f32);
  CHECK(layer_norm(x, Tensor::ones({4}), Tensor::zeros({4})).dtype() == DType::f32);
  CHECK(sum(x).dtype() == DType::f32);
  // An integer operand is not cast; the floating one is.
  const Tensor ints = Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3, 4}, {4});
  CHECK(matmul(x, ints).dtype() == DType::bf16);
}

TEST_CASE("autocast casts under NoGradGuard too, recording nothing", "[autocast]") {
  Tensor x = leaf({3, 4}, 20), w = leaf({2, 4}, 21);
  NoGradGuard no_grad;
  AutocastGuard autocast(DType::bf16);
  const Tensor y = linear(x, w);
  CHECK(y.dtype() == DType::bf16);
  CHECK_FALSE(y.requires_grad());
  CHECK(y.to_vector() == linear(rounded(x), rounded(w)).to(DType::bf16).to_vector());
}

TEST_CASE("checkpoint recomputes under the forward's autocast state", "[autocast]") {
  Tensor x = leaf({4, 6}, 22), w1 = leaf({8, 6}, 23), w2 = leaf({3, 8}, 24);
  auto block = [&](const Tensor& in) { return relu(linear(in, w1)); };
  auto run = [&](bool checkpointed) {
    clear_grads({x, w1, w2});
    Tensor loss;
    {
      AutocastGuard autocast(DType::bf16);
      Tensor h = checkpointed ? autograd::checkpoint(block, x) : block(x);
      CHECK(h.dtype() == DType::bf16);
      loss = sum(linear(h, w2));
    }
    loss.backward();  // outside the guard, as a training loop does
    return std::vector<std::vector<float>>{x.grad().to_vector(), w1.grad().to_vector(),
                                           w2.grad().to_vector()};
  };
  CHECK(run(true) == run(false));
}

TEST_CASE("fp16 autocast: a large upstream gradient overflows to inf in the weight's .grad",
          "[autocast]") {
  // Positive inputs, so that dW = dy^T x sums same-signed products: 8 rows * 1e4 * ~10 overflows
  // fp16 (max 65504) while staying far inside f32.
  Tensor x = leaf({8, 4}, 25, 9.0, 11.0), w = leaf({3, 4}, 26), b = leaf({3}, 27);
  auto backward_with = [&](double upstream, bool autocast) {
    clear_grads({x, w, b});
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace(DType::f16);
    Tensor y = linear(x, w, b);
    Tensor loss = sum(mul(y, Tensor::full(y.shape(), upstream)));  // f32: the loss stays finite
    guard.reset();
    REQUIRE(all_finite(loss));
    loss.backward();
  };
  backward_with(1e4, true);
  REQUIRE(w.grad().dtype() == DType::f32);
  CHECK(any_inf(w.grad()));
  // Controls: the same gradient in f32 is finite, and so is a small one under fp16.
  backward_with(1e4, false);
  CHECK(all_finite(w.grad()));
  backward_with(1e-2, true);
  CHECK(all_finite(w.grad()));
  CHECK(all_finite(x.grad()));
}
