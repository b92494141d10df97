// The Llama family as configs describe it: Llama 2/3 (rope_scaling "llama3"), Mistral (a sliding
// window on every layer), Qwen2 (bias on q, k and v; windows from max_window_layers on) and
// Qwen3 (RMSNorm on each head's q and k; head_dim apart from hidden_size / heads). Each is the
// shared decoder (decoder.hpp) with these switches; hf_config.cpp has already refused what none
// of them computes.
#include <cmath>
#include <numbers>

#include "genesis/core/error.hpp"
#include "genesis/nn/hf_models.hpp"

namespace genesis::nn {

std::vector<float> rope_inv_freq(const HfModelConfig& c) {
  const std::int64_t D = c.head_dim;
  std::vector<float> inv_freq(static_cast<std::size_t>(D / 2));
  for (std::int64_t i = 0; i < D / 2; ++i)  // in f32, as transformers computes it
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(c.rope_theta),
                                  static_cast<float>(2 * i) / static_cast<float>(D));
  if (!c.rope_scaling.llama3) return inv_freq;
  // Llama 3.1's long-context scaling: low frequencies (long wavelengths) slowed by `factor`, high
  // ones kept, those between interpolated.
  const RopeScaling& r = c.rope_scaling;
  const auto old_context = static_cast<float>(r.original_max_position_embeddings);
  const auto factor = static_cast<float>(r.factor);
  const auto low = static_cast<float>(r.low_freq_factor),
             high = static_cast<float>(r.high_freq_factor);
  const float low_freq_wavelen = old_context / low, high_freq_wavelen = old_context / high;
  for (float& f : inv_freq) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth = (old_context / wavelen - low) / (high - low);
      f = (1.0f - smooth) * scaled / factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
  return inv_freq;
}

DecoderSpec llama_family_spec(const HfModelConfig& c, const ModelHeads& heads) {
  DecoderSpec s;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.intermediate_size = c.intermediate_size;
  s.num_layers = c.num_hidden_layers;
  s.num_heads = c.num_attention_heads;
  s.num_kv_heads = c.num_key_value_heads;
  s.head_dim = c.head_dim;
  s.max_positions = c.max_position_embeddings;
  s.norm_eps = c.norm_eps;
  s.inv_freq = rope_inv_freq(c);
  s.qkv_bias = c.attention_bias || c.family == HfFamily::qwen2;
  s.o_bias = c.attention_bias && c.family != HfFamily::qwen2;
  s.mlp_bias = c.mlp_bias;
  s.qk_norm = c.family == HfFamily::qwen3;
  s.tie_word_embeddings = c.tie_word_embeddings;
  s.layer_windows = c.layer_windows;
  s.initializer_range = c.raw.is_object() && c.raw.contains("initializer_range") &&
                                c.raw["initializer_range"].is_number()
                            ? c.raw["initializer_range"].get<double>()
                            : 0.02;
  s.heads = heads;
  return s;
}

}  // namespace genesis::nn
