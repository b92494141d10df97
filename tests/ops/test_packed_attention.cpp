// Attention over rows that pack several examples (positions restarting at each one): the fused
// kernel must give each example exactly what attention over that example alone gives, output and
// all three gradients, for GPT's packed projection and for grouped-query heads with and without
// a sliding window; arbitrary positions must mean what the contract says (an additive mask built
// here from t - positions[t] <= j <= t); bad positions are refused by name. The [cuda] case runs
// the same packed rows on the GPU against the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gpu_required.hpp"
#include "support/gradcheck.hpp"

using namespace genesis;
using Catch::Contains;
using testing::leaf;

namespace {

// An example's place in a packed row: batch row b, columns [begin, end).
struct Segment {
  std::int64_t b, begin, end;
};

// Rows of T packing examples of `lengths` in turn (row b starting at lengths[b]), the last one
// cut where the row ends, as packing's padding is one more sequence; their positions (B, T).
std::vector<Segment> segments_of(std::int64_t B, std::int64_t T,
                                 const std::vector<std::int64_t>& lengths) {
  std::vector<Segment> out;
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t at = 0;
    for (std::size_t i = static_cast<std::size_t>(b); at < T; ++i) {
      const std::int64_t len = std::min(lengths[i % lengths.size()], T - at);
      out.push_back({b, at, at + len});
      at += len;
    }
  }
  return out;
}

Tensor positions_of(std::int64_t B, std::int64_t T, const std::vector<Segment>& segments) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(B * T));
  for (const Segment& s : segments)
    for (std::int64_t t = s.begin; t < s.end; ++t)
      p[static_cast<std::size_t>(s.b * T + t)] = t - s.begin;
  return Tensor::from_vector(p, {B, T});
}

Tensor randn(Shape shape, std::uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn(std::move(shape), gen);
}

// |got - want| <= tol (1 + |want|) element by element.
void require_close(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
  REQUIRE(got.shape() == want.shape());
  const std::vector<float> g = got.to_vector(), w = want.to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO(what << " element " << i << ": got " << g[i] << " want " << w[i]);
    REQUIRE(std::abs(g[i] - w[i]) <= tol * (1.0 + std::abs(w[i])));
  }
}

// A fresh leaf holding t's values.
Tensor leaf_copy(const Tensor& t) {
  Tensor c = t.detach().contiguous().clone();
  c.set_requires_grad(true);
  return c;
}

// Segment s's slice of a (B, heads, T, D) tensor, (1, heads, len, D).
Tensor heads_slice(const Tensor& t, const Segment& s) {
  return t.slice(0, s.b, s.b + 1).slice(2, s.begin, s.end);
}

}  // namespace

TEST_CASE("packed rows: each example's attention and gradients are its own, GQA and windows",
          "[attention][packing]") {
  const std::int64_t window = GENERATE(0, 5);
  const std::int64_t Hkv = GENERATE(4, 2);
  const std::int64_t B = 2, H = 4, T = 150, D = 8;
  INFO("Hkv " << Hkv << " window " << window);
  // Examples of 1 token, longer than the kernel's 64-row block, and crossing block edges.
  const std::vector<Segment> segments = segments_of(B, T, {1, 70, 9, 30, 2, 40});
  const Tensor positions = positions_of(B, T, segments);
  Tensor q = leaf({B, H, T, D}, 1), k = leaf({B, Hkv, T, D}, 2), v = leaf({B, Hkv, T, D}, 3);
  const Tensor w = randn({B, H, T, D}, 4);
  Tensor out = scaled_dot_product_attention(q, k, v, true, {}, window, positions);
  sum(mul(out, w)).backward();

  for (const Segment& s : segments) {
    INFO("row " << s.b << " columns [" << s.begin << ", " << s.end << ")");
    Tensor qs = leaf_copy(heads_slice(q, s)), ks = leaf_copy(heads_slice(k, s)),
           vs = leaf_copy(heads_slice(v, s));
    Tensor alone = scaled_dot_product_attention(qs, ks, vs, true, {}, window);
    sum(mul(alone, heads_slice(w, s))).backward();
    require_close("out", heads_slice(out, s), alone, 1e-5);
    require_close("dq", heads_slice(q.grad(), s), qs.grad(), 1e-5);
    require_close("dk", heads_slice(k.grad(), s), ks.grad(), 1e-5);
    require_close("dv", heads_slice(v.grad(), s), vs.grad(), 1e-5);
  }
}

TEST_CASE("packed rows: GPT's packed attention keeps each example to itself",
          "[attention][packing]") {
  const std::int64_t B = 2, T = 100, n_head = 2, C = 16;
  const std::vector<Segment> segments = segments_of(B, T, {33, 5, 64, 1});
  const Tensor positions = positions_of(B, T, segments);
  Tensor qkv = leaf({B, T, 3 * C}, 5);
  const Tensor w = randn({B, T, C}, 6);
  Tensor out = packed_attention(qkv, n_head, true, positions);
  sum(mul(out, w)).backward();
  for (const Segment& s : segments) {
    INFO("row " << s.b << " columns [" << s.begin << ", " << s.end << ")");
    auto rows = [&](const Tensor& t) { return t.slice(0, s.b, s.b + 1).slice(1, s.begin, s.end); };
    Tensor alone_in = leaf_copy(rows(qkv));
    Tensor alone = packed_attention(alone_in, n_head, true);
    sum(mul(alone, rows(w))).backward();
    require_close("out", rows(out), alone, 1e-5);
    require_close("dqkv", rows(qkv.grad()), alone_in.grad(), 1e-5);
  }
}

TEST_CASE("packed rows: any positions mean keys t - positions[t] .. t", "[attention][packing]") {
  const std::int64_t B = 2, H = 2, T = 70, D = 8;
  // Negative, past the row, out of order: clamped to [0, t], so a row sees at least itself.
  Generator gen(7);
  std::vector<std::int64_t> p(static_cast<std::size_t>(B * T));
  for (auto& x : p) x = static_cast<std::int64_t>(gen.uniform() * (T + 6)) - 3;
  const Tensor positions = Tensor::from_vector(p, {B, T});
  std::vector<float> mask(static_cast<std::size_t>(B * T * T),
                          -std::numeric_limits<float>::infinity());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t first = t - std::clamp<std::int64_t>(p[b * T + t], 0, t);
      for (std::int64_t j = first; j <= t; ++j)
        mask[static_cast<std::size_t>((b * T + t) * T + j)] = 0;
    }
  const Tensor additive = Tensor::from_vector(mask, {B, 1, T, T});
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Tensor q = leaf({B, H, T, D}, 8), k = leaf({B, H, T, D}, 9), v = leaf({B, H, T, D}, 10);
  Tensor q2 = leaf_copy(q), k2 = leaf_copy(k), v2 = leaf_copy(v);
  const Tensor w = randn({B, H, T, D}, 11);
  Tensor fused = scaled_dot_product_attention(q, k, v, true, {}, 0, positions);
  Tensor reference =
      matmul(softmax(add(mul(matmul(q2, k2.transpose(2, 3)), scale), additive), -1), v2);
  require_close("out", fused, reference, 1e-5);
  sum(mul(fused, w)).backward();
  sum(mul(reference, w)).backward();
  require_close("dq", q.grad(), q2.grad(), 1e-4);
  require_close("dk", k.grad(), k2.grad(), 1e-4);
  require_close("dv", v.grad(), v2.grad(), 1e-4);
}

TEST_CASE("packed rows: positions that do not fit are refused by name", "[attention][packing]") {
  const Tensor q = randn({1, 2, 6, 4}, 12), k = randn({1, 2, 6, 4}, 13);
  const Tensor good = Tensor::zeros({1, 6}, DType::i64);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, k, false, {}, 0, good),
                    Contains("positions") && Contains("causal"));
  const Tensor longer = randn({1, 2, 9, 4}, 14);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, longer, longer, true, {}, 0, good),
                  InvalidArgument);
  CHECK_THROWS_WITH(
      scaled_dot_product_attention(q, k, k, true, {}, 0, Tensor::zeros({1, 5}, DType::i64)),
      Contains("positions must be i64 (B, T) = (1, 6)"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, k, true, {}, 0, Tensor::zeros({1, 6})),
                    Contains("positions must be i64"));
  CHECK_THROWS_WITH(packed_attention(randn({1, 6, 24}, 15), 2, true,
                                     Tensor::zeros({2, 6}, DType::i64)),
                    Contains("packed_attention: positions"));
}

TEST_CASE("packed rows on the GPU match the CPU: forward and gradients", "[cuda][packing]") {
  if (testing::skip_without_gpu("packed attention on CUDA")) return;
  const Device gpu = Device::cuda(0);
  const std::int64_t B = 2, H = 4, T = 200;
  const std::vector<Segment> segments = segments_of(B, T, {1, 70, 9, 64, 2, 40, 100});
  const Tensor positions = positions_of(B, T, segments);
  // f32 takes the FMA path, bf16 with D 64 the tensor cores; GQA 4/2, with and without a window.
  struct Case {
    DType dt;
    std::int64_t Hkv, D, window;
    double tol;
  };
  for (const Case c : {Case{DType::f32, 2, 32, 0, 1e-4}, Case{DType::f32, 4, 64, 7, 1e-4},
                       Case{DType::bf16, 2, 64, 0, 3e-2}, Case{DType::bf16, 4, 64, 40, 3e-2},
                       Case{DType::bf16, 2, 128, 0, 3e-2}}) {
    INFO(dtype_name(c.dt) << " Hkv " << c.Hkv << " D " << c.D << " window " << c.window);
    // Values rounded to the case's type on both sides, so that only the kernels differ.
    auto input = [&](Shape shape, std::uint64_t seed) {
      return randn(std::move(shape), seed).to(c.dt).to(DType::f32);
    };
    const Tensor q0 = input({B, H, T, c.D}, 20), k0 = input({B, c.Hkv, T, c.D}, 21),
                 v0 = input({B, c.Hkv, T, c.D}, 22), w = input({B, H, T, c.D}, 23);
    Tensor q = leaf_copy(q0), k = leaf_copy(k0), v = leaf_copy(v0);
    Tensor out = scaled_dot_product_attention(q, k, v, true, {}, c.window, positions);
    sum(mul(out, w)).backward();
    Tensor qg = leaf_copy(q0.to(c.dt).to(gpu)), kg = leaf_copy(k0.to(c.dt).to(gpu)),
           vg = leaf_copy(v0.to(c.dt).to(gpu));
    Tensor out_gpu =
        scaled_dot_product_attention(qg, kg, vg, true, {}, c.window, positions.to(gpu));
    sum(mul(out_gpu.to(DType::f32), w.to(gpu))).backward();
    require_close("out", out_gpu.to(DType::f32).to(Device::cpu()), out, c.tol);
    require_close("dq", qg.grad().to(DType::f32).to(Device::cpu()), q.grad(), c.tol);
    require_close("dk", kg.grad().to(DType::f32).to(Device::cpu()), k.grad(), c.tol);
    require_close("dv", vg.grad().to(DType::f32).to(Device::cpu()), v.grad(), c.tol);
  }
  // GPT's packed projection, bf16 (tensor cores, D 64).
  const std::int64_t C = 4 * 64;
  const Tensor x0 = randn({B, T, 3 * C}, 24).to(DType::bf16).to(DType::f32);
  const Tensor w = randn({B, T, C}, 25);
  Tensor x = leaf_copy(x0);
  Tensor out = packed_attention(x, 4, true, positions);
  sum(mul(out, w)).backward();
  Tensor xg = leaf_copy(x0.to(DType::bf16).to(gpu));
  Tensor out_gpu = packed_attention(xg, 4, true, positions.to(gpu));
  sum(mul(out_gpu.to(DType::f32), w.to(gpu))).backward();
  require_close("packed out", out_gpu.to(DType::f32).to(Device::cpu()), out, 3e-2);
  require_close("packed dqkv", xg.grad().to(DType::f32).to(Device::cpu()), x.grad(), 3e-2);
}
