// Cached inference for every causal LM: the prompt runs once through every block, then each new
// token attends to all cached keys. The cache is allocated once per generation (keys and values
// written in place, not concatenated each step), and a batch of prompts of different lengths is
// left-padded, with an additive mask that hides the padding; a batch without padding takes the
// fused causal kernel (fewer queries than keys: the queries are the last positions).
#include "genesis/nn/causal_lm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "token_sampling.hpp"

namespace genesis::nn {
namespace {

// The additive mask (B, 1, T, length + T) of a step feeding T tokens after `length` positions:
// row b's query t (position length + t) sees keys j <= length + t that are not padding (j >=
// pads[b]) and, with a window, j > length + t - window; a padding query sees itself only, so that
// no row of scores is all -inf.
Tensor padding_mask(const std::vector<std::int64_t>& pads, std::int64_t length, std::int64_t T,
                    std::int64_t window, Device device) {
  const auto B = static_cast<std::int64_t>(pads.size());
  const std::int64_t L = length + T;
  std::vector<float> m(static_cast<std::size_t>(B * T * L),
                       -std::numeric_limits<float>::infinity());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) {
      float* row = m.data() + (b * T + t) * L;
      const std::int64_t query = length + t;
      const std::int64_t from = window > 0 ? std::max(pads[b], query - window + 1) : pads[b];
      for (std::int64_t j = from; j <= query; ++j) row[j] = 0.0f;
      row[query] = 0.0f;
    }
  return Tensor::from_vector(m, {B, 1, T, L}).to(device);
}

// softmax(q k^T / sqrt(D) + mask) v, the key/value heads repeated for grouped-query attention.
Tensor masked_attention(const Tensor& q, Tensor k, Tensor v, const Tensor& mask) {
  const std::int64_t H = q.size(1), Hkv = k.size(1);
  if (Hkv != H) {
    const Shape shape{k.size(0), Hkv, H / Hkv, k.size(2), k.size(3)};
    k = k.unsqueeze(2).expand(shape).reshape({k.size(0), H, k.size(2), k.size(3)});
    v = v.unsqueeze(2).expand(shape).reshape({v.size(0), H, v.size(2), v.size(3)});
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  Tensor scores = add(mul(matmul(q, k.transpose(2, 3)), scale), mask);
  return matmul(softmax(scores, -1), v);
}

bool stops(const SamplingOptions& options, std::int64_t token) {
  return token == options.stop_token ||
         std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) !=
             options.stop_tokens.end();
}

// Prompts left-padded to P tokens, one row each: the ids (rows, P) and each row's padding.
struct PaddedPrompts {
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> pads;  // empty when no row is padded
};

PaddedPrompts left_padded(const std::vector<const std::vector<std::int64_t>*>& rows,
                          std::int64_t P) {
  PaddedPrompts padded{std::vector<std::int64_t>(rows.size() * static_cast<std::size_t>(P), 0), {}};
  bool any = false;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto len = static_cast<std::int64_t>(rows[r]->size());
    padded.pads.push_back(P - len);
    any = any || len < P;
    std::copy(rows[r]->begin(), rows[r]->end(),
              padded.ids.begin() + static_cast<std::int64_t>(r) * P + (P - len));
  }
  if (!any) padded.pads.clear();
  return padded;
}

}  // namespace

Tensor CausalLMBlock::operator()(const Tensor& x, const Tensor& positions) {
  // Restored on the way out, an exception included: a later plain call must not see them.
  struct Restore {
    Tensor& slot;
    Tensor saved;
    ~Restore() { slot = std::move(saved); }
  } restore{packed_positions_, packed_positions_};
  packed_positions_ = positions;
  return Module::operator()(x);
}

CausalLM::PackedRows::PackedRows(CausalLM& model, Tensor positions)
    : model_(model), saved_(std::move(model.packed_positions_)) {
  model_.packed_positions_ = std::move(positions);
}

CausalLM::PackedRows::~PackedRows() { model_.packed_positions_ = std::move(saved_); }

Tensor CausalLM::forward_packed(const Tensor& idx, const Tensor& positions) {
  const PackedRows packed(*this, positions);
  return forward(idx);
}

CausalLM::LossTargets::LossTargets(CausalLM& model, Tensor targets)
    : model_(model), saved_(std::move(model.loss_targets_)) {
  GENESIS_CHECK(!model.has_value_head(), InvalidArgument,
                "a language-modelling loss needs the language-model head; this model has a "
                "value head");
  model_.loss_targets_ = std::move(targets);
  model_.loss_hits_ = Tensor();
}

CausalLM::LossTargets::~LossTargets() { model_.loss_targets_ = std::move(saved_); }

Tensor CausalLM::head_output(const Tensor& h, const Tensor& head_weight) {
  const Tensor& targets = loss_targets_;
  if (!targets.defined()) return lm_logits(h);
  GENESIS_CHECK(targets.shape() == Shape(h.shape().begin(), h.shape().end() - 1), InvalidArgument,
                "loss targets of shape " + shape_str(targets.shape()) + " for hidden states " +
                    shape_str(h.shape()));
  ScoredLoss scored = head_weight.defined() ? linear_cross_entropy(h, head_weight, targets)
                                            : cross_entropy_scored(lm_logits(h), targets);
  loss_hits_ = std::move(scored.hits);
  return std::move(scored.loss);
}

Tensor CausalLM::packed_positions(const Tensor& idx) const {
  const Tensor& p = packed_positions_;
  if (!p.defined()) return p;
  GENESIS_CHECK(p.dtype() == DType::i64 && p.shape() == idx.shape(), InvalidArgument,
                "packed rows: positions must be i64 of the token ids' shape " +
                    shape_str(idx.shape()) + ", got " + std::string(dtype_name(p.dtype())) + " " +
                    shape_str(p.shape()));
  GENESIS_CHECK(p.device() == idx.device(), InvalidArgument,
                "packed rows: positions are on " + p.device().str() + " and the token ids on " +
                    idx.device().str());
  return p;
}

Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, const CacheStep& step,
                        std::int64_t window) {
  const std::int64_t T = q.size(2);
  if (step.pads.empty())
    return scaled_dot_product_attention(q.contiguous(), k, v, true, {}, window);
  return masked_attention(q, k, v, padding_mask(step.pads, step.length, T, window, q.device()));
}

Tensor CausalLM::forward_cached(const Tensor& idx, KVCache& cache) {
  Tensor logits = forward_cached_rows(idx, cache, 0, idx.size(0), /*last_only=*/false);
  cache.length += idx.size(1);
  return logits;
}

Tensor CausalLM::forward_cached_rows(const Tensor& idx, KVCache& cache, std::int64_t first_row,
                                     std::int64_t batch_rows, bool last_only) {
  NoGradGuard no_grad;
  GENESIS_CHECK(!has_value_head(), InvalidArgument,
                "generation needs the language-model head; this model has a value head "
                "(model.head = \"value\")");
  const std::int64_t B = idx.size(0), T = idx.size(1);
  GENESIS_CHECK(cache.pads.empty() || static_cast<std::int64_t>(cache.pads.size()) == batch_rows,
                InvalidArgument,
                "generation: the cache has padding for " + std::to_string(cache.pads.size()) +
                    " rows, the input " + std::to_string(batch_rows));
  const std::int64_t max_pad =
      cache.pads.empty() ? 0 : *std::max_element(cache.pads.begin(), cache.pads.end());
  const std::int64_t capacity =
      cache.room > 0 ? std::min(cache.room, max_positions() + max_pad) : max_positions() + max_pad;
  GENESIS_CHECK(cache.length + T <= capacity, InvalidArgument,
                "generation past the model's " + std::to_string(max_positions()) + " positions");
  std::vector<std::int64_t> pads(static_cast<std::size_t>(B), 0);
  if (!cache.pads.empty()) std::copy_n(cache.pads.begin() + first_row, B, pads.begin());
  std::vector<std::int64_t> positions(static_cast<std::size_t>(B * T));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      positions[b * T + t] =
          std::clamp<std::int64_t>(cache.length + t - pads[b], 0, max_positions() - 1);
  CacheStep step{.length = cache.length,
                 .capacity = capacity,
                 .positions = Tensor::from_vector(positions, {B, T}).to(idx.device()),
                 .pads = {},
                 .first_row = first_row,
                 .batch_rows = batch_rows};
  if (max_pad > 0) step.pads = std::move(pads);
  return lm_logits(cached_hidden(idx, cache, step, last_only));
}

// About this many tokens per block of a prompt pass: a block's largest activation (the MLP's,
// 4 x n_embd floats a token) then stays within a few hundred KiB at the sft preset's width.
constexpr std::int64_t kPrefillTokens = 512;

Tensor CausalLM::next_token_logits(const Tensor& idx, KVCache& cache) {
  const std::int64_t B = idx.size(0), T = idx.size(1);
  const std::int64_t rows = std::max<std::int64_t>(1, kPrefillTokens / T);
  if (rows >= B) {
    Tensor logits = forward_cached_rows(idx, cache, 0, B, /*last_only=*/true);
    cache.length += T;
    return logits;
  }
  std::vector<Tensor> blocks;
  for (std::int64_t r = 0; r < B; r += rows)
    blocks.push_back(forward_cached_rows(idx.slice(0, r, std::min(B, r + rows)), cache, r, B,
                                         /*last_only=*/true));
  cache.length += T;
  return cat(blocks, 0);
}

// A prompt repeated on consecutive rows (a GRPO group: num_generations completions of each) runs
// through the model once; its keys, values and logits are then copied to every row of the run.
// Prompts repeated only apart from each other run row by row, as copying run by run would cost
// more than it saves.
Tensor CausalLM::prompt_pass(const std::vector<std::vector<std::int64_t>>& prompts, std::int64_t P,
                             KVCache& cache) {
  const auto B = static_cast<std::int64_t>(prompts.size());
  const Device dev = device();
  std::vector<const std::vector<std::int64_t>*> distinct;
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;  // (first row, distinct prompt)
  for (std::int64_t b = 0; b < B; ++b) {
    if (b > 0 && prompts[b] == prompts[b - 1]) continue;
    runs.emplace_back(b, static_cast<std::int64_t>(distinct.size()));
    distinct.push_back(&prompts[b]);
  }
  if (runs.size() * 2 > prompts.size()) {
    std::vector<const std::vector<std::int64_t>*> all;
    for (const auto& p : prompts) all.push_back(&p);
    PaddedPrompts padded = left_padded(all, P);
    cache.pads = std::move(padded.pads);
    return next_token_logits(Tensor::from_vector(padded.ids, {B, P}).to(dev), cache);
  }
  const auto U = static_cast<std::int64_t>(distinct.size());
  PaddedPrompts padded = left_padded(distinct, P);
  KVCache shared;
  shared.pads = padded.pads;
  shared.room = cache.room;
  const Tensor logits = next_token_logits(Tensor::from_vector(padded.ids, {U, P}).to(dev), shared);
  cache.length = shared.length;
  cache.keys.resize(shared.keys.size());
  cache.values.resize(shared.values.size());
  for (std::size_t i = 0; i < shared.keys.size(); ++i) {
    const Tensor& k = shared.keys[i];
    cache.keys[i] = Tensor::empty({B, k.size(1), k.size(2), k.size(3)}, k.dtype(), k.device());
    cache.values[i] = Tensor::empty(cache.keys[i].shape(), k.dtype(), k.device());
  }
  Tensor all = Tensor::empty({B, logits.size(1)}, logits.dtype(), logits.device());
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const auto [first, u] = runs[r];
    const std::int64_t end = r + 1 < runs.size() ? runs[r + 1].first : B;
    // Prompt u's first P positions into rows first..end.
    const auto spread = [&](Tensor& to, const Tensor& from) {
      to.slice(0, first, end).slice(2, 0, P).copy_(from.slice(0, u, u + 1).slice(2, 0, P));
    };
    for (std::size_t i = 0; i < shared.keys.size(); ++i) {
      spread(cache.keys[i], shared.keys[i]);
      spread(cache.values[i], shared.values[i]);
    }
    all.slice(0, first, end).copy_(logits.slice(0, u, u + 1));
    if (!shared.pads.empty())
      cache.pads.insert(cache.pads.end(), static_cast<std::size_t>(end - first), shared.pads[u]);
  }
  return all;
}

template <class GeneratorOf>
std::vector<std::vector<std::int64_t>> CausalLM::generate_rows(
    const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
    GeneratorOf&& gen_of, const std::vector<std::int64_t>& limits) {
  GENESIS_CHECK(limits.empty() || limits.size() == prompts.size(), InvalidArgument,
                "generate: " + std::to_string(limits.size()) + " limits for " +
                    std::to_string(prompts.size()) + " prompts");
  const auto B = static_cast<std::int64_t>(prompts.size());
  std::vector<std::vector<std::int64_t>> out(prompts.size());
  if (B == 0) return out;
  std::int64_t P = 0;
  for (const auto& p : prompts) {
    GENESIS_CHECK(!p.empty(), InvalidArgument, "generate: a prompt is empty");
    GENESIS_CHECK(static_cast<std::int64_t>(p.size()) <= max_positions(), InvalidArgument,
                  "generate: a prompt has " + std::to_string(p.size()) +
                      " tokens, more than max_positions " + std::to_string(max_positions()));
    P = std::max<std::int64_t>(P, static_cast<std::int64_t>(p.size()));
  }
  // Row b: at most its limit, and max_positions - length + 1 tokens (the last one is never fed
  // back).
  std::vector<std::int64_t> cap(prompts.size());
  std::int64_t running = 0;
  std::vector<bool> done(prompts.size());
  for (std::int64_t b = 0; b < B; ++b) {
    cap[b] = std::min(limits.empty() ? options.max_new_tokens : limits[b],
                      max_positions() - static_cast<std::int64_t>(prompts[b].size()) + 1);
    done[b] = cap[b] <= 0;
    if (!done[b]) ++running;
  }
  if (running == 0) return out;
  const Device dev = device();
  KVCache cache;
  cache.room = P + *std::max_element(cap.begin(), cap.end());
  Tensor logits = prompt_pass(prompts, P, cache);
  std::vector<std::int64_t> next(prompts.size(), 0);
  for (;;) {
    const Tensor last = logits.to(DType::f32).to(Device::cpu()).contiguous();
    const float* rows = last.data<float>();  // read in place: no copy of the (B, vocab) logits
    const std::int64_t V = last.size(1);
    for (std::int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      next[b] = pick_token({rows + b * V, static_cast<std::size_t>(V)}, options, gen_of(b));
      out[b].push_back(next[b]);
      if (stops(options, next[b]) || static_cast<std::int64_t>(out[b].size()) == cap[b]) {
        done[b] = true;
        --running;
      }
    }
    if (running == 0) break;
    logits = next_token_logits(Tensor::from_vector(next, {B, 1}).to(dev), cache);
  }
  return out;
}

std::vector<std::int64_t> CausalLM::generate(const std::vector<std::int64_t>& prompt,
                                             std::int64_t max_new_tokens, std::int64_t stop_token) {
  Generator unused;
  return generate({prompt}, {.max_new_tokens = max_new_tokens, .stop_token = stop_token},
                  unused)[0];
}

std::vector<std::vector<std::int64_t>> CausalLM::generate(
    const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
    Generator& gen, const std::vector<std::int64_t>& limits) {
  return generate_rows(
      prompts, options, [&gen](std::int64_t) -> Generator& { return gen; }, limits);
}

std::vector<std::vector<std::int64_t>> CausalLM::generate(
    const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
    std::vector<Generator>& row_generators, const std::vector<std::int64_t>& limits) {
  GENESIS_CHECK(row_generators.size() == prompts.size(), InvalidArgument,
                "generate: " + std::to_string(row_generators.size()) + " generators for " +
                    std::to_string(prompts.size()) + " prompts");
  return generate_rows(
      prompts, options,
      [&row_generators](std::int64_t b) -> Generator& {
        return row_generators[static_cast<std::size_t>(b)];
      },
      limits);
}

}  // namespace genesis::nn
