// The warpers in Hugging Face's order (temperature, top-k, top-p), then one draw.
#include "token_sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace genesis::nn {
namespace {

std::int64_t first_max(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<std::int64_t>(best);
}

// Uniform in [0, 1) with 53 bits.
double uniform53(Generator& gen) { return static_cast<double>(gen.next_u64() >> 11) * 0x1.0p-53; }

// Plain temperature sampling needs no ranking: the cumulative walk goes in id order.
std::int64_t draw_in_id_order(std::span<const float> logits, double temperature, Generator& gen) {
  double top = -INFINITY;
  for (float x : logits)
    if (!std::isnan(x)) top = std::max<double>(top, x);
  if (top == -INFINITY) return 0;
  // Single-precision exponentials (the logits are floats): a batch's sampling spends most of
  // its host time here. The running sums stay in double.
  std::vector<float> p(logits.size());
  const auto top_f = static_cast<float>(top), inverse_t = static_cast<float>(1.0 / temperature);
  double total = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i)
    total += p[i] = std::isnan(logits[i]) ? 0.0f : std::exp((logits[i] - top_f) * inverse_t);
  const double u = uniform53(gen) * total;
  double cumulative = 0.0;
  std::size_t last = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) continue;
    cumulative += p[i];
    last = i;
    if (u < cumulative) return static_cast<std::int64_t>(i);
  }
  return static_cast<std::int64_t>(last);
}

}  // namespace

std::int64_t pick_token(std::span<const float> logits, const SamplingOptions& o, Generator& gen) {
  if (o.temperature <= 0.0) return first_max(logits);
  if (o.top_k <= 0 && o.top_p >= 1.0) return draw_in_id_order(logits, o.temperature, gen);
  // Token ids by logit, largest first (ties: lower id first); a NaN logit ranks as -inf.
  std::vector<float> key(logits.begin(), logits.end());
  for (float& k : key)
    if (std::isnan(k)) k = -INFINITY;
  std::vector<std::int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return key[a] > key[b]; });
  if (key[order[0]] == -INFINITY) return order[0];
  logits = key;
  std::size_t kept = order.size();
  if (o.top_k > 0 && static_cast<std::size_t>(o.top_k) < kept) {
    const float kth = logits[order[static_cast<std::size_t>(o.top_k) - 1]];
    kept = static_cast<std::size_t>(o.top_k);
    while (kept < order.size() && logits[order[kept]] == kth) ++kept;
  }
  std::vector<double> p(kept);
  const double top = logits[order[0]] / o.temperature;
  for (std::size_t i = 0; i < kept; ++i) p[i] = std::exp(logits[order[i]] / o.temperature - top);
  double total = std::accumulate(p.begin(), p.end(), 0.0);
  if (o.top_p < 1.0) {
    // The smallest prefix whose probability reaches top_p (its first token always stays).
    double cumulative = 0.0;
    std::size_t n = 0;
    while (n < kept && (n == 0 || cumulative < o.top_p * total)) cumulative += p[n++];
    kept = n;
    total = cumulative;
  }
  const double u = uniform53(gen) * total;
  double cumulative = 0.0;
  for (std::size_t i = 0; i + 1 < kept; ++i) {
    cumulative += p[i];
    if (u < cumulative) return order[i];
  }
  return order[kept - 1];
}

}  // namespace genesis::nn
