// The Llama family's fused decoder ops against the compositions they replaced, each written here
// with basic ops (Hugging Face's formulas step for step): rms_norm (f32, and 16-bit x cast back
// before the weight), rotary_embedding (left padding, a KV cache's offset, strided views),
// swiglu; grouped-query attention against repeated K/V heads and the sliding window against an
// explicit mask, with fewer queries than keys. Finite-difference gradients for every op.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gradcheck.hpp"

using namespace genesis;
using Catch::Contains;
using testing::check_gradients;
using testing::leaf;

namespace {

Tensor randn(Shape shape, std::uint64_t seed, double std = 1.0) {
  Generator gen(seed);
  return Tensor::randn(std::move(shape), gen, std);
}

void require_close(const Tensor& got, const Tensor& want, double tol) {
  REQUIRE(got.shape() == want.shape());
  const std::vector<float> g = got.contiguous().to_vector(), w = want.contiguous().to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << " want " << w[i]);
    REQUIRE(std::abs(g[i] - w[i]) <= tol * (1.0 + std::abs(w[i])));
  }
}

// The gradients of sum(f(inputs) * w) for a fixed random w, one per input (fresh leaves).
std::vector<Tensor> grads_of(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                             const std::vector<Tensor>& values) {
  std::vector<Tensor> in;
  for (const Tensor& v : values) in.push_back(v.detach().clone().set_requires_grad(true));
  Tensor out = f(in);
  sum(mul(out, randn(out.shape(), 99))).backward();
  std::vector<Tensor> g;
  for (const Tensor& t : in) g.push_back(t.grad());
  return g;
}

// ---- the reference compositions

Tensor ref_rms_norm(const Tensor& x, const Tensor& w, double eps) {
  const Tensor xf = x.dtype() == DType::f32 ? x : x.to(DType::f32);
  const Tensor rstd = pow(add(mean(mul(xf, xf), {-1}, true), eps), -0.5);
  const Tensor normed = mul(xf, rstd);
  return mul(x.dtype() == DType::f32 ? normed : normed.to(x.dtype()), w);
}

// cos and sin tables (B, T, 1, D/2) from angle = f32(position) * inv_freq in f32.
Tensor ref_rotary(const Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  const std::int64_t B = x.size(0), T = x.size(1), half = x.size(3) / 2;
  const std::vector<float> freq = inv_freq.to_vector();
  const std::vector<float> pos = positions.to_vector();
  std::vector<float> c(B * T * half), s(B * T * half);
  for (std::int64_t r = 0; r < B * T; ++r)
    for (std::int64_t i = 0; i < half; ++i) {
      const float a = static_cast<float>(pos[r]) * freq[i];
      c[r * half + i] = std::cos(a);
      s[r * half + i] = std::sin(a);
    }
  const Tensor cos_t = Tensor::from_vector(c, {B, T, 1, half});
  const Tensor sin_t = Tensor::from_vector(s, {B, T, 1, half});
  const Tensor x1 = x.slice(3, 0, half), x2 = x.slice(3, half, 2 * half);
  return cat({sub(mul(x1, cos_t), mul(x2, sin_t)), add(mul(x2, cos_t), mul(x1, sin_t))}, 3);
}

Tensor ref_swiglu(const Tensor& gate, const Tensor& up) { return mul(silu(gate), up); }

// k or v (B, Hkv, Tk, D) repeated to H heads, head h reading kv head h / (H / Hkv).
Tensor repeat_heads(const Tensor& t, std::int64_t H) {
  const std::int64_t B = t.size(0), Hkv = t.size(1), T = t.size(2), D = t.size(3);
  return t.unsqueeze(2).expand({B, Hkv, H / Hkv, T, D}).contiguous().reshape({B, H, T, D});
}

// softmax(q k^T * scale + mask) v with the causal (and window) mask materialised, on repeated
// heads: the composition the fused kernels replace.
Tensor ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                     std::int64_t window) {
  const std::int64_t T = q.size(2), Tk = k.size(2), H = q.size(1);
  std::vector<float> m(T * Tk, 0.0f);
  for (std::int64_t i = 0; i < T; ++i) {
    const std::int64_t p = Tk - T + i;
    for (std::int64_t j = 0; j < Tk; ++j)
      if ((causal && j > p) || (window > 0 && j <= p - window))
        m[i * Tk + j] = -std::numeric_limits<float>::infinity();
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const Tensor kr = repeat_heads(k, H), vr = repeat_heads(v, H);
  const Tensor scores =
      add(mul(matmul(q, kr.transpose(2, 3)), scale), Tensor::from_vector(m, {T, Tk}));
  return matmul(softmax(scores, -1), vr);
}

// Llama's inverse frequencies for head dim D: theta^(-2i/D).
Tensor llama_inv_freq(std::int64_t D, double theta) {
  std::vector<float> f(D / 2);
  for (std::int64_t i = 0; i < D / 2; ++i)
    f[i] = static_cast<float>(1.0 / std::pow(theta, 2.0 * i / static_cast<double>(D)));
  return Tensor::from_vector(f, {D / 2});
}

// positions (B, T): row 0 counts from `offset`; row 1 is left-padded by `pad` (Hugging Face's
// generate gives padding position 1 and counts the real tokens from 0).
Tensor padded_positions(std::int64_t B, std::int64_t T, std::int64_t offset, std::int64_t pad) {
  std::vector<std::int64_t> p(B * T);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      p[b * T + t] = b % 2 == 0 ? offset + t : (t < pad ? 1 : offset + t - pad);
  return Tensor::from_vector(p, {B, T});
}

}  // namespace

// ---- rms_norm

TEST_CASE("rms_norm matches Hugging Face's RMSNorm composition", "[decoder][rms_norm]") {
  // (64, 768): enough rows for the kernel's threads.
  const Shape shape = GENERATE(values<Shape>({{3, 5, 37}, {64, 768}, {1, 1}}));
  INFO("shape " << shape_str(shape));
  const Tensor x = randn(shape, 1, 2.0), w = randn({shape.back()}, 2);
  auto fused = [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-6); };
  auto ref = [](const std::vector<Tensor>& in) { return ref_rms_norm(in[0], in[1], 1e-6); };
  require_close(fused({x, w}), ref({x, w}), 1e-5);
  const std::vector<Tensor> g = grads_of(fused, {x, w}), gr = grads_of(ref, {x, w});
  require_close(g[0], gr[0], 1e-4);
  require_close(g[1], gr[1], 1e-4);
}

TEST_CASE("rms_norm casts x * rstd back to a 16-bit x's type before the weight",
          "[decoder][rms_norm]") {
  const DType dt = GENERATE(DType::bf16, DType::f16);
  const bool f32_weight = GENERATE(false, true);
  INFO("dtype " << dtype_name(dt) << ", f32 weight " << f32_weight);
  const Tensor x = randn({6, 40}, 3, 3.0).to(dt);
  const Tensor w = f32_weight ? randn({40}, 4) : randn({40}, 4).to(dt);
  const Tensor got = rms_norm(x, w, 1e-5), want = ref_rms_norm(x, w, 1e-5);
  // Torch's promotion: an f32 weight makes the result f32.
  REQUIRE(got.dtype() == (f32_weight ? DType::f32 : dt));
  REQUIRE(want.dtype() == got.dtype());
  // Both round x * rstd to the 16-bit type; rstd's last bit (1 / sqrt against pow) may move
  // that rounding by one step of the 16-bit type.
  require_close(got, want, dt == DType::bf16 ? 1e-2 : 2e-3);
  auto fused = [dt](const std::vector<Tensor>& in) {
    return rms_norm(in[0].to(dt), in[1], 1e-5);
  };
  auto ref = [dt](const std::vector<Tensor>& in) {
    return ref_rms_norm(in[0].to(dt), in[1], 1e-5);
  };
  const Tensor x32 = randn({6, 40}, 5), w32 = randn({40}, 6);
  const std::vector<Tensor> g = grads_of(fused, {x32, w32}), gr = grads_of(ref, {x32, w32});
  require_close(g[0], gr[0], 2e-2);
  require_close(g[1], gr[1], 2e-2);
}

TEST_CASE("rms_norm gradients by finite differences", "[decoder][rms_norm]") {
  auto f = [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-6); };
  check_gradients(f, {leaf({3, 7}, 11), leaf({7}, 12)});
  // A transposed (non-contiguous) input.
  check_gradients(
      [](const std::vector<Tensor>& in) { return rms_norm(in[0].transpose(0, 1), in[1], 0.1); },
      {leaf({5, 4}, 13), leaf({5}, 14)});
}

// ---- rotary_embedding

TEST_CASE("rotary_embedding matches the rotate_half composition", "[decoder][rotary]") {
  const std::int64_t offset = GENERATE(0, 4093);  // a KV cache's decode offset, large angles
  const Shape shape = GENERATE(values<Shape>({{2, 9, 3, 16}, {2, 40, 8, 64}}));  // 2nd: threads
  INFO("offset " << offset << " shape " << shape_str(shape));
  const std::int64_t B = shape[0], T = shape[1], H = shape[2], D = shape[3];
  const Tensor pos = padded_positions(B, T, offset, 3);
  const Tensor freq = llama_inv_freq(D, offset > 0 ? 500000.0 : 10000.0);
  const Tensor x = randn({B, T, H, D}, 21);
  auto fused = [&](const std::vector<Tensor>& in) { return rotary_embedding(in[0], pos, freq); };
  auto ref = [&](const std::vector<Tensor>& in) { return ref_rotary(in[0], pos, freq); };
  require_close(fused({x}), ref({x}), 1e-6);
  require_close(grads_of(fused, {x})[0], grads_of(ref, {x})[0], 1e-6);
}

TEST_CASE("rotary_embedding reads strided views of q and k in place", "[decoder][rotary]") {
  const std::int64_t B = 2, T = 5, H = 4, Hkv = 2, D = 8, W = (H + 2 * Hkv) * D;
  const Tensor pos = padded_positions(B, T, 0, 2);
  const Tensor freq = llama_inv_freq(D, 10000.0);
  const Tensor packed = randn({B, T, W}, 31);
  // q and k as (B, T, heads, D) views of a packed qkv projection (row stride W, not H * D).
  const Tensor q = make_view(packed, {B, T, H, D}, {T * W, W, D, 1}, 0);
  const Tensor k = make_view(packed, {B, T, Hkv, D}, {T * W, W, D, 1}, H * D);
  require_close(rotary_embedding(q, pos, freq), ref_rotary(q.contiguous(), pos, freq), 1e-6);
  require_close(rotary_embedding(k, pos, freq), ref_rotary(k.contiguous(), pos, freq), 1e-6);
  // (B, H, T, D) transposed to (B, T, H, D), and a D stride that is not 1 (copied first).
  const Tensor t = randn({B, H, T, D}, 32).transpose(1, 2);
  require_close(rotary_embedding(t, pos, freq), ref_rotary(t.contiguous(), pos, freq), 1e-6);
  const Tensor d = randn({B, T, D, H}, 33).transpose(2, 3);
  require_close(rotary_embedding(d, pos, freq), ref_rotary(d.contiguous(), pos, freq), 1e-6);
  // Positions spread wider than the batch's rows (no shared table) and given as i32.
  const Tensor far = Tensor::from_vector(std::vector<std::int64_t>{0, 7000, 3, 90000, 5, 6, 1, 2,
                                                                   100, 4, 8, 20000},
                                         {2, 6});
  const Tensor y = randn({2, 6, 1, D}, 34);
  require_close(rotary_embedding(y, far.to(DType::i32), freq), ref_rotary(y, far, freq), 1e-6);
}

TEST_CASE("rotary_embedding keeps a 16-bit type and differentiates", "[decoder][rotary]") {
  const Tensor pos = padded_positions(2, 4, 0, 1);
  const Tensor freq = llama_inv_freq(6, 10000.0);
  const Tensor x = randn({2, 4, 2, 6}, 41);
  const Tensor h = rotary_embedding(x.to(DType::bf16), pos, freq);
  REQUIRE(h.dtype() == DType::bf16);
  require_close(h, ref_rotary(x, pos, freq), 1e-2);
  check_gradients(
      [&](const std::vector<Tensor>& in) { return rotary_embedding(in[0], pos, freq); },
      {leaf({2, 4, 2, 6}, 42)});
  check_gradients(
      [&](const std::vector<Tensor>& in) {
        return rotary_embedding(in[0].transpose(1, 2), pos, freq);
      },
      {leaf({2, 2, 4, 6}, 43)});
}

// ---- swiglu

TEST_CASE("swiglu is silu(gate) * up, forward and backward", "[decoder][swiglu]") {
  const Shape shape = GENERATE(values<Shape>({{3, 11}, {2, 64, 1408}, {1}}));
  INFO("shape " << shape_str(shape));
  const Tensor gate = randn(shape, 51, 3.0), up = randn(shape, 52);
  auto fused = [](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); };
  auto ref = [](const std::vector<Tensor>& in) { return ref_swiglu(in[0], in[1]); };
  require_close(fused({gate, up}), ref({gate, up}), 1e-6);
  const std::vector<Tensor> g = grads_of(fused, {gate, up}), gr = grads_of(ref, {gate, up});
  require_close(g[0], gr[0], 1e-6);
  require_close(g[1], gr[1], 1e-6);
  REQUIRE(swiglu(gate.to(DType::bf16), up.to(DType::bf16)).dtype() == DType::bf16);
  REQUIRE_THROWS_WITH(swiglu(gate, randn({2}, 1)), Contains("differ"));
}

TEST_CASE("swiglu gradients by finite differences", "[decoder][swiglu]") {
  auto f = [](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); };
  check_gradients(f, {leaf({4, 5}, 61, 2.0), leaf({4, 5}, 62)});
  check_gradients(
      [](const std::vector<Tensor>& in) { return swiglu(in[0].transpose(0, 1), in[1]); },
      {leaf({3, 2}, 63), leaf({2, 3}, 64)});
}

// ---- grouped-query and sliding-window attention

TEST_CASE("grouped-query attention equals attention on repeated K/V heads",
          "[decoder][attention]") {
  const bool causal = GENERATE(false, true);
  const std::int64_t Hkv = GENERATE(1, 2, 4);
  const std::int64_t T = GENERATE(70, 3);  // 70: two query blocks; 3 < Tk: a decode step
  const std::int64_t B = 2, H = 4, Tk = 70, D = 8;
  INFO("causal " << causal << " Hkv " << Hkv << " T " << T);
  const Tensor q = randn({B, H, T, D}, 71), k = randn({B, Hkv, Tk, D}, 72),
               v = randn({B, Hkv, Tk, D}, 73);
  auto fused = [causal](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], causal);
  };
  auto ref = [causal](const std::vector<Tensor>& in) {
    return ref_attention(in[0], in[1], in[2], causal, 0);
  };
  require_close(fused({q, k, v}), ref({q, k, v}), 1e-5);
  const std::vector<Tensor> g = grads_of(fused, {q, k, v}), gr = grads_of(ref, {q, k, v});
  for (int i = 0; i < 3; ++i) require_close(g[i], gr[i], 1e-4);
}

TEST_CASE("a sliding window equals attention under an explicit mask", "[decoder][attention]") {
  const std::int64_t window = GENERATE(1, 5, 64, 200);  // 200 > Tk: plain causal attention
  const std::int64_t T = GENERATE(150, 66, 1);
  const std::int64_t Hkv = GENERATE(1, 3);
  const std::int64_t B = 1, H = 3, Tk = 150, D = 4;
  INFO("window " << window << " T " << T << " Hkv " << Hkv);
  const Tensor q = randn({B, H, T, D}, 81), k = randn({B, Hkv, Tk, D}, 82),
               v = randn({B, Hkv, Tk, D}, 83);
  auto fused = [window](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], true, {}, window);
  };
  auto ref = [window](const std::vector<Tensor>& in) {
    return ref_attention(in[0], in[1], in[2], true, window);
  };
  require_close(fused({q, k, v}), ref({q, k, v}), 1e-5);
  const std::vector<Tensor> g = grads_of(fused, {q, k, v}), gr = grads_of(ref, {q, k, v});
  for (int i = 0; i < 3; ++i) require_close(g[i], gr[i], 1e-4);
}

TEST_CASE("grouped-query windowed attention gradients by finite differences",
          "[decoder][attention]") {
  const std::int64_t window = GENERATE(0, 2);
  INFO("window " << window);
  // Views of (B, T, heads, D) tensors, transposed to (B, heads, T, D) as a Llama block makes them.
  auto f = [window](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention(in[0].transpose(1, 2), in[1].transpose(1, 2),
                                        in[2].transpose(1, 2), true, 0.7, window);
  };
  check_gradients(f, {leaf({1, 6, 4, 3}, 91), leaf({1, 6, 2, 3}, 92), leaf({1, 6, 2, 3}, 93)});
  // Fewer queries than keys.
  check_gradients(f, {leaf({1, 2, 4, 3}, 94), leaf({1, 6, 2, 3}, 95), leaf({1, 6, 2, 3}, 96)});
}

TEST_CASE("grouped-query attention refuses heads that do not divide, windows without causal",
          "[decoder][attention]") {
  const Tensor q = randn({1, 6, 4, 8}, 1), k = randn({1, 4, 4, 8}, 2);
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, k, k),
                      Contains("H a multiple of Hkv") && Contains("[1, 4, 4, 8]"));
  const Tensor k3 = randn({1, 3, 4, 8}, 3);
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, k3, k3, false, {}, 2),
                      Contains("sliding window needs causal"));
  REQUIRE_THROWS_AS(scaled_dot_product_attention(q, k3, k3, true, {}, -1), InvalidArgument);
}
