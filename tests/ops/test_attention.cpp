// Fused scaled_dot_product_attention against attention written here as plain double loops
// (forward, log-sum-exp and all three gradients), causal and not, with T both below and above
// the kernel's query block and not a multiple of it; finite-difference gradients; shape errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gradcheck.hpp"

using namespace genesis;
using Catch::Contains;
using testing::check_gradients;
using testing::leaf;

namespace {

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

// q, k, v, dout (B, H, T, D) flattened; every (b, h) pair is independent.
Reference naive_attention(const Tensor& qt, const Tensor& kt, const Tensor& vt, const Tensor& dot,
                          bool causal, double scale) {
  const std::int64_t pairs = qt.size(0) * qt.size(1), T = qt.size(2), D = qt.size(3);
  const std::vector<float> q = qt.to_vector(), k = kt.to_vector(), v = vt.to_vector(),
                           dout = dot.to_vector();
  Reference r;
  r.out.assign(q.size(), 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(q.size(), 0);
  r.dv.assign(q.size(), 0);
  r.lse.assign(pairs * T, 0);
  for (std::int64_t p = 0; p < pairs; ++p) {
    const std::int64_t base = p * T * D;
    for (std::int64_t i = 0; i < T; ++i) {
      const std::int64_t n = causal ? i + 1 : T;
      std::vector<double> s(n), dp(n);
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < n; ++j) {
        for (std::int64_t d = 0; d < D; ++d) s[j] += q[base + i * D + d] * k[base + j * D + d];
        s[j] *= scale;
        m = std::max(m, s[j]);
      }
      double total = 0;
      for (double& x : s) total += (x = std::exp(x - m));
      for (double& x : s) x /= total;
      r.lse[p * T + i] = m + std::log(total);
      double delta = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        for (std::int64_t d = 0; d < D; ++d) {
          r.out[base + i * D + d] += s[j] * v[base + j * D + d];
          dp[j] += dout[base + i * D + d] * v[base + j * D + d];
        }
        delta += s[j] * dp[j];
      }
      for (std::int64_t j = 0; j < n; ++j) {
        const double ds = s[j] * (dp[j] - delta);
        for (std::int64_t d = 0; d < D; ++d) {
          r.dq[base + i * D + d] += scale * ds * k[base + j * D + d];
          r.dk[base + j * D + d] += scale * ds * q[base + i * D + d];
          r.dv[base + j * D + d] += s[j] * dout[base + i * D + d];
        }
      }
    }
  }
  return r;
}

void require_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])));
  }
}

Tensor randn(Shape shape, std::uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn(std::move(shape), gen);
}

}  // namespace

TEST_CASE("attention matches naive loops: output, lse and gradients", "[attention]") {
  const bool causal = GENERATE(false, true);
  const Shape shape = GENERATE(values<Shape>({{2, 3, 70, 16}, {1, 2, 5, 3}, {1, 1, 129, 8}}));
  INFO("causal " << causal << " shape " << shape_str(shape));
  Tensor q = leaf(shape, 1), k = leaf(shape, 2), v = leaf(shape, 3);
  Tensor dout = randn(shape, 4);
  const double scale = 0.37;
  const Reference want = naive_attention(q, k, v, dout, causal, scale);

  Tensor out = scaled_dot_product_attention(q, k, v, causal, scale);
  REQUIRE(out.shape() == shape);
  require_close(out.to_vector(), want.out, 1e-5);
  out.backward(dout);
  require_close(q.grad().to_vector(), want.dq, 1e-4);
  require_close(k.grad().to_vector(), want.dk, 1e-4);
  require_close(v.grad().to_vector(), want.dv, 1e-4);

  // The raw kernel's second output: log-sum-exp of the scaled, masked scores per query row.
  Tensor o = Tensor::empty(shape), lse = Tensor::empty({shape[0], shape[1], shape[2]});
  OpArgs args;
  args.i[0] = causal;
  args.f[0] = scale;
  dispatch(OpId::attention, {q.detach(), k.detach(), v.detach()}, {o, lse}, args);
  require_close(lse.to_vector(), want.lse, 1e-5);
}

TEST_CASE("attention: causal row 0 copies v row 0, default scale is 1/sqrt(D)", "[attention]") {
  Tensor q = randn({1, 1, 4, 9}, 5), k = randn({1, 1, 4, 9}, 6), v = randn({1, 1, 4, 9}, 7);
  std::vector<float> out = scaled_dot_product_attention(q, k, v).to_vector();
  std::vector<float> vv = v.to_vector();
  for (int d = 0; d < 9; ++d) REQUIRE(out[d] == Approx(vv[d]).margin(1e-6));
  REQUIRE(scaled_dot_product_attention(q, k, v, false).to_vector() ==
          scaled_dot_product_attention(q, k, v, false, 1.0 / 3.0).to_vector());
}

TEST_CASE("attention accepts strided and bf16 inputs", "[attention]") {
  // (B, T, H, D) transposed to (B, H, T, D), as a GPT block produces q, k, v.
  Tensor q = randn({2, 6, 3, 4}, 8).transpose(1, 2);
  Tensor k = randn({2, 6, 3, 4}, 9).transpose(1, 2);
  Tensor v = randn({2, 6, 3, 4}, 10).transpose(1, 2);
  REQUIRE_FALSE(q.is_contiguous());
  const Reference want = naive_attention(q, k, v, q, true, 0.5);
  require_close(scaled_dot_product_attention(q, k, v, true, 0.5).to_vector(), want.out, 1e-5);

  Tensor half = scaled_dot_product_attention(q.to(DType::bf16), k.to(DType::bf16),
                                             v.to(DType::bf16), true, 0.5);
  REQUIRE(half.dtype() == DType::bf16);
  require_close(half.to_vector(), want.out, 3e-2);
}

TEST_CASE("attention gradients by finite differences", "[attention]") {
  const bool causal = GENERATE(false, true);
  INFO("causal " << causal);
  auto f = [causal](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], causal);
  };
  check_gradients(f, {leaf({2, 1, 5, 3}, 11), leaf({2, 1, 5, 3}, 12), leaf({2, 1, 5, 3}, 13)});
  // Two query blocks, the second one partial.
  check_gradients(f, {leaf({1, 1, 67, 2}, 14), leaf({1, 1, 67, 2}, 15), leaf({1, 1, 67, 2}, 16)});
}

TEST_CASE("fewer queries than keys are the last rows of the full attention", "[attention]") {
  // A KV cache's decode step: the last Tq query rows over all Tk keys give the last Tq rows of the
  // full (Tk, Tk) attention, causal or not, across the kernel's 64-row query block.
  const bool causal = GENERATE(false, true);
  const std::int64_t Tq = GENERATE(1, 3, 66), Tk = 70;
  INFO("causal " << causal << " Tq " << Tq);
  Tensor q = randn({2, 2, Tk, 8}, 31), k = randn({2, 2, Tk, 8}, 32), v = randn({2, 2, Tk, 8}, 33);
  const std::vector<float> full =
      scaled_dot_product_attention(q, k, v, causal).slice(2, Tk - Tq, Tk).contiguous().to_vector();
  const std::vector<float> tail =
      scaled_dot_product_attention(q.slice(2, Tk - Tq, Tk), k, v, causal).contiguous().to_vector();
  REQUIRE(tail.size() == full.size());
  for (std::size_t i = 0; i < full.size(); ++i) REQUIRE(tail[i] == Approx(full[i]).margin(1e-6));
  check_gradients(
      [causal](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], causal);
      },
      {leaf({1, 2, 2, 3}, 34), leaf({1, 2, 5, 3}, 35), leaf({1, 2, 5, 3}, 36)});
}

TEST_CASE("attention rejects mismatched shapes and names them", "[attention]") {
  Tensor a = randn({2, 3, 5, 4}, 1), b = randn({2, 3, 6, 4}, 2);
  REQUIRE_THROWS_AS(scaled_dot_product_attention(a, b, a), InvalidArgument);
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(a, b, a),
                      Contains("[2, 3, 5, 4]") && Contains("[2, 3, 6, 4]"));
  // More queries than keys has no meaning (queries are the sequence's last positions).
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(b, a, a), Contains("T <= Tk"));
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(a.reshape({6, 5, 4}), a, a),
                      Contains("4-d") && Contains("[6, 5, 4]"));
  REQUIRE_THROWS_AS(scaled_dot_product_attention(a.to(DType::i64), a, a), InvalidArgument);
}

TEST_CASE("packed attention equals split heads plus scaled_dot_product_attention", "[attention]") {
  // T = 70 spans two query blocks; the packed kernel reads q, k, v and writes the output through
  // row-strided views, so any stride mistake shows up as a mismatch here.
  const std::int64_t B = 2, T = 70, H = 3, D = 8, C = H * D;
  Tensor qkv = leaf({B, T, 3 * C}, 71);
  Tensor w = leaf({B, T, C}, 72);
  for (bool causal : {true, false}) {
    INFO("causal " << causal);
    qkv.set_grad(Tensor());
    Tensor packed = packed_attention(qkv, H, causal);
    sum(mul(packed, w)).backward();
    std::vector<float> packed_grad = qkv.grad().to_vector();

    Tensor qkv2 = qkv.detach().clone().set_requires_grad(true);
    auto heads = [&](std::int64_t i) {
      return qkv2.slice(2, i * C, (i + 1) * C).reshape({B, T, H, D}).transpose(1, 2);
    };
    Tensor split = scaled_dot_product_attention(heads(0), heads(1), heads(2), causal)
                       .transpose(1, 2)
                       .reshape({B, T, C});
    sum(mul(split, w)).backward();
    std::vector<float> a = packed.to_vector(), b = split.to_vector();
    std::vector<float> ga = packed_grad, gb = qkv2.grad().to_vector();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(1e-6));
    for (std::size_t i = 0; i < ga.size(); ++i) REQUIRE(ga[i] == Approx(gb[i]).margin(1e-5));
  }
  check_gradients([&](const std::vector<Tensor>& in) { return packed_attention(in[0], 2, true); },
                  {leaf({1, 5, 12}, 73)});
  REQUIRE_THROWS_WITH(packed_attention(Tensor::zeros({2, 5, 10}), 2),
                      Contains("qkv must be (B, T, 3C) with C divisible by n_head 2; got [2, 5, 10]"));
}
