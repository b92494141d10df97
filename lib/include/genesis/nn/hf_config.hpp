// A Hugging Face config.json as genesis's model families read it: the fields that change the math,
// checked and bounded before anything is allocated from them (a checkpoint is untrusted input).
// A value genesis does not implement (another rope_scaling type, an unknown model_type or
// hidden_act) is a ConfigError naming the field, the value and what is supported, never a
// silently different model. gpt2's own names (n_embd, n_layer, ...) are read into the same fields.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace genesis::nn {

// The decoder families genesis builds from a config.json's model_type.
enum class HfFamily { llama, mistral, qwen2, qwen3, gpt2 };

// rope_scaling (or transformers 5's rope_parameters) of type "llama3" (Llama 3.1/3.2); type
// "default" or absent: none.
struct RopeScaling {
  bool llama3 = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;
};

struct HfModelConfig {
  HfFamily family = HfFamily::llama;
  std::string model_type;                  // as written: "llama", "qwen3", "gpt2", ...
  std::vector<std::string> architectures;  // e.g. {"LlamaForCausalLM"}; may be empty
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;            // gpt2: n_embd
  std::int64_t intermediate_size = 0;      // gpt2: n_inner, or 4 * n_embd when null
  std::int64_t num_hidden_layers = 0;      // gpt2: n_layer
  std::int64_t num_attention_heads = 0;    // gpt2: n_head
  std::int64_t num_key_value_heads = 0;    // absent: num_attention_heads
  std::int64_t head_dim = 0;               // absent: hidden_size / num_attention_heads (qwen3: 128,
                                           // as transformers' Qwen3Config)
  std::int64_t max_position_embeddings = 0;  // gpt2: n_positions
  double norm_eps = 1e-6;                  // rms_norm_eps; gpt2: layer_norm_epsilon
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool attention_bias = false;             // qwen2: always true (q, k, v only); gpt2: true
  bool mlp_bias = false;                   // llama's mlp_bias; gpt2: true
  bool tie_word_embeddings = false;
  // Per layer: the sliding window of its attention (0: full causal). mistral: sliding_window on
  // every layer; qwen2/qwen3: use_sliding_window from max_window_layers on (or layer_types).
  std::vector<std::int64_t> layer_windows;
  std::string hidden_act = "silu";         // llama family: silu; gpt2: gelu_new (activation_function)
  std::vector<std::int64_t> bos_token_id, eos_token_id;  // an int or a list in the file; may be empty
  std::int64_t pad_token_id = -1;          // -1: none
  std::string torch_dtype = "float32";     // torch_dtype or transformers 5's dtype; absent: float32
  nlohmann::ordered_json raw;              // the file as read, written back (updated) on export

  std::int64_t kv_heads() const { return num_key_value_heads; }
  bool is_gpt2() const { return family == HfFamily::gpt2; }
};

// Parses and checks a config.json's object; `where` names it in errors ("'DIR/config.json'").
// ConfigError naming `where`, the field and its value on anything genesis would not build as
// transformers does.
HfModelConfig parse_hf_config(const nlohmann::json& json, const std::string& where);
// The same from a config.json's text (at most 4 MiB, nested at most 64 deep); raw keeps the
// file's key order.
HfModelConfig parse_hf_config_text(std::string_view text, const std::string& where);
// Reads FILE (a config.json) or DIR/config.json; IoError when it cannot be read.
HfModelConfig read_hf_config(const std::filesystem::path& path);
// The config.json transformers reads for `config` (model_type, architectures, torch_dtype set),
// starting from config.raw when it has one.
nlohmann::ordered_json hf_config_json(const HfModelConfig& config);
// generation_config.json's eos_token_id (an int or a list) beside config.json, added to the
// config's own; the config's when the file is absent.
std::vector<std::int64_t> hf_eos_token_ids(const std::filesystem::path& dir,
                                           const HfModelConfig& config);

}  // namespace genesis::nn
