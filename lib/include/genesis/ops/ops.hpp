// The differentiable math on tensors, PyTorch's functional spelling. Each function checks shapes,
// allocates its output, runs the op-table kernel for the tensors' device and, when autograd is
// recording and an input requires grad, records the backward written beside it in
// lib/src/ops/. Floating inputs of f16/bf16 are computed in f32 and the result keeps the
// widest input float type.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis {

// ---- elementwise (broadcasting)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // tanh approximation, as GPT-2
Tensor silu(const Tensor& x);
// Comparisons give bool tensors and carry no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions; dims may be negative, an empty dims list means all dims
Tensor sum(const Tensor& x, std::vector<std::int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<std::int64_t> dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Sums broadcast dims away so that the result has `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra
// a (..., M, K) @ b (..., K, N), batch dims broadcast; 1-d operands as in torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);
// x (..., K) @ weight (O, K)^T + bias (O): nn.Linear's math in one kernel.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// gelu(linear(x, weight, bias)), GPT's MLP up-projection; on CUDA one cuBLASLt product whose
// epilogue writes both gelu's input (kept for backward) and its output.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias);

// ---- neural-network functions (over the last dim unless a dim is given)
Tensor softmax(const Tensor& x, std::int64_t dim = -1);
Tensor log_softmax(const Tensor& x, std::int64_t dim = -1);
// log(1 + exp(x)), stable for any x; its derivative is sigmoid(x) (1/2 at 0). -log sigmoid(x) is
// softplus(-x).
Tensor softplus(const Tensor& x);
// logits (N, C) or (..., C), target (N) or (...) of i64; mean over targets != ignore_index, an
// f32 scalar whatever the logits' type.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::int64_t ignore_index = -100);
// cross_entropy and, from the same read of the logits, how many counted targets are their row's
// argmax (a 0-d f32 count, not differentiable; argmax's tie and NaN rules): a classifier's
// accuracy without a second pass over (tokens, vocab) logits.
struct ScoredLoss {
  Tensor loss;
  Tensor hits;
};
ScoredLoss cross_entropy_scored(const Tensor& logits, const Tensor& target,
                                std::int64_t ignore_index = -100);
// cross_entropy_scored(linear(x, weight), target) without the (positions, vocabulary) logits: x
// (..., K), weight (V, K) (a language model's head, no bias), target (...) i64. The product and
// the loss run block_rows positions at a time (0: as many as 64 MiB of logits hold on the CPU,
// 1 GiB on a GPU), and where a gradient is wanted each block's share of the gradients of x and
// weight is taken while its logits exist, so that the backward only scales them (Liger-Kernel's
// fused linear cross-entropy). Under autocast the products round as linear's do.
ScoredLoss linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& target,
                                std::int64_t ignore_index = -100, std::int64_t block_rows = 0);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Llama's RMSNorm over the last dim, as Hugging Face computes it: x in f32 scaled by
// 1 / sqrt(mean(x^2) + eps), cast back to x's type, times weight.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
// Rotary position embedding on x (B, T, H, D), Hugging Face's rotate_half convention: each
// head's halves (x1, x2) become (x1 cos - x2 sin, x2 cos + x1 sin) at angle positions[b, t] *
// inv_freq[i] for i < D/2 (computed in f32). positions (B, T) i64 may differ per row (left
// padding, a KV cache's offset); inv_freq (D/2) f32 carries the rope_theta and any scaling.
Tensor rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq);
// silu(gate) * up: the SwiGLU of Llama's MLP, gate and up of one shape.
Tensor swiglu(const Tensor& gate, const Tensor& up);
Tensor embedding(const Tensor& weight, const Tensor& index);
// Inverted dropout; identity when !training or p == 0. The mask is a pure function of a seed
// drawn from `gen`, so backward recomputes it instead of storing it.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// q (B, H, T, D), k and v (B, Hkv, Tk, D) with T <= Tk -> (B, H, T, D). The queries are the last T
// positions of the sequence (T < Tk is a KV cache's decode step), which the causal mask respects.
// Grouped-query attention when Hkv < H (H a multiple of Hkv): query head h reads key/value head
// h / (H / Hkv), never copied per query head. window > 0 (causal only) is a sliding window: the
// query at position p sees keys p - window < j <= p (Hugging Face's sliding_window).
// scale defaults to 1/sqrt(D). Fused: the score matrix is never materialised for the whole batch.
// positions (B, T) i64, for rows that pack several examples one after another (data.packing;
// causal, T == Tk): each token's position within its example, counting from 0 at the example's
// first token (Hugging Face's position_ids for flattened examples). Query t then sees only the
// keys of its own example, t - positions[b, t] <= j <= t: a block-diagonal causal mask, applied
// inside the fused kernel. Undefined: each row is one sequence, the plain causal path.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = true, std::optional<double> scale = {},
                                    std::int64_t window = 0, const Tensor& positions = Tensor());
// Multi-head attention on a packed projection: qkv (B, T, 3C) holding [q | k | v], each C wide
// with n_head heads side by side -> (B, T, C), heads side by side (llm.c's layout). Same math as
// splitting the heads and calling scaled_dot_product_attention with scale 1/sqrt(C/n_head), but
// the kernel reads and writes the packed layouts directly: no head-split or merge copies.
// positions: as scaled_dot_product_attention's (rows packing several examples).
Tensor packed_attention(const Tensor& qkv, std::int64_t n_head, bool causal = true,
                        const Tensor& positions = Tensor());

// ---- joining and splitting
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
// Views of `size` elements along dim (the last may be shorter).
std::vector<Tensor> split(const Tensor& x, std::int64_t size, std::int64_t dim = 0);

// ---- operators
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return add(a, -b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return mul(a, 1.0 / b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace genesis
