// config.json <-> HfModelConfig for the five decoder families genesis builds. Reading follows what
// transformers' config classes do with each field (defaults, null meaning "the default", gpt2's own
// names, the legacy rope_scaling beside transformers 5's rope_parameters) and refuses, naming the
// field and its value, whatever would make genesis build another model than transformers would.
// Not here: the weights (ckpt/hf_weights) and building the model.
#include "genesis/nn/hf_config.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "genesis/core/error.hpp"

namespace genesis::nn {
namespace fs = std::filesystem;

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Bounds on every size a model is allocated from: roomy for real models (Llama 3.1 405B has
// hidden 16384, 126 layers, 128 heads, vocab 128256), tight enough that a corrupt or hostile
// config.json fails here rather than in an allocation.
constexpr std::int64_t kMaxVocab = std::int64_t{1} << 22;
constexpr std::int64_t kMaxHidden = 65536;
constexpr std::int64_t kMaxIntermediate = std::int64_t{1} << 20;
constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxHeads = 1024;
constexpr std::int64_t kMaxHeadDim = 4096;
constexpr std::int64_t kMaxPositions = std::int64_t{1} << 24;
constexpr double kMaxRopeTheta = 1e12;
constexpr double kMaxRopeFactor = 1e6;
constexpr std::size_t kMaxIdList = 1024;
constexpr std::size_t kMaxConfigBytes = 4u << 20;  // real ones are a few KB
constexpr int kMaxDepth = 64;

struct Family {
  HfFamily family;
  const char* model_type;
  const char* architecture;  // what save_pretrained writes for the causal LM
  std::int64_t max_positions;  // transformers' default max_position_embeddings
};
constexpr Family kFamilies[] = {
    {HfFamily::llama, "llama", "LlamaForCausalLM", 2048},
    {HfFamily::mistral, "mistral", "MistralForCausalLM", 4096 * 32},
    {HfFamily::qwen2, "qwen2", "Qwen2ForCausalLM", 32768},
    {HfFamily::qwen3, "qwen3", "Qwen3ForCausalLM", 32768},
    {HfFamily::gpt2, "gpt2", "GPT2LMHeadModel", 1024},
};

const Family& family_of(HfFamily f) {
  for (const Family& family : kFamilies)
    if (family.family == f) return family;
  throw InvalidArgument("hf config: unknown family");
}

// A value as an error shows it: compact JSON on one line, cut short on a UTF-8 boundary.
std::string shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() <= 60) return s;
  std::size_t cut = 57;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

// The fields of one JSON object (the config, or its rope_scaling), read with transformers'
// conventions: absent or null takes the default; a present value of the wrong type or out of
// range is an error naming the file, the field and the value.
class Fields {
 public:
  Fields(const Json& object, std::string where, std::string prefix = "")
      : object_(object), where_(std::move(where)), prefix_(std::move(prefix)) {}

  const std::string& where() const { return where_; }
  bool has_key(const char* key) const { return object_.contains(key); }
  // The value, or nullptr when absent or null.
  const Json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void fail(const char* key, const Json& value, const std::string& problem) const {
    throw ConfigError(where_ + ": " + prefix_ + key + " = " + shown(value) + " " + problem);
  }
  [[noreturn]] void missing(const char* key) const {
    throw ConfigError(where_ + ": " + prefix_ + key + " is missing");
  }

  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    const Json* v = find(key);
    if (v == nullptr) missing(key);
    return checked_integer(key, *v, lo, hi);
  }
  std::int64_t integer(const char* key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) const {
    const Json* v = find(key);
    return v == nullptr ? fallback : checked_integer(key, *v, lo, hi);
  }
  std::int64_t checked_integer(const char* key, const Json& v, std::int64_t lo, std::int64_t hi) const {
    if (!v.is_number_integer()) fail(key, v, "is not an integer");
    const bool in_range = v.is_number_unsigned()
                              ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) && hi >= 0 &&
                                    static_cast<std::int64_t>(v.get<std::uint64_t>()) >= lo
                              : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
    if (!in_range)
      fail(key, v, "is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v.get<std::int64_t>();
  }
  // A positive, finite number at most `hi` (an integer literal is a number too).
  double positive(const char* key, double fallback, double hi) const {
    const Json* v = find(key);
    return v == nullptr ? fallback : checked_positive(key, *v, hi);
  }
  double positive(const char* key, double hi) const {
    const Json* v = find(key);
    if (v == nullptr) missing(key);
    return checked_positive(key, *v, hi);
  }
  double checked_positive(const char* key, const Json& v, double hi) const {
    if (!v.is_number()) fail(key, v, "is not a number");
    const double x = v.get<double>();
    if (!(x > 0 && x <= hi)) fail(key, v, "is out of range (0, " + shown(Json(hi)) + "]");
    return x;
  }
  bool flag(const char* key, bool fallback) const {
    const Json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, *v, "is not true or false");
    return v->get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    const Json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(key, *v, "is not a string");
    return v->get<std::string>();
  }
  // A token id or a list of them, each in [0, vocab).
  std::vector<std::int64_t> ids(const char* key, std::int64_t vocab) const {
    const Json* v = find(key);
    std::vector<std::int64_t> out;
    if (v == nullptr) return out;
    if (v->is_array() && v->size() > kMaxIdList) fail(key, *v, "lists more than " + std::to_string(kMaxIdList) + " ids");
    for (const Json& id : v->is_array() ? *v : Json::array({*v})) {
      if (!id.is_number_integer()) fail(key, *v, "is not a token id or a list of them");
      out.push_back(checked_integer(key, id, 0, vocab - 1));
    }
    return out;
  }

 private:
  const Json& object_;
  std::string where_;
  std::string prefix_;
};

// rope_theta and the rope scaling: transformers 5's rope_parameters when present, else the
// legacy rope_theta + rope_scaling. Only "default" and "llama3" are implemented.
void read_rope(const Fields& f, HfModelConfig& c) {
  c.rope_theta = f.positive("rope_theta", 10000.0, kMaxRopeTheta);
  const Json* params = f.find("rope_parameters");
  const char* name = params != nullptr ? "rope_parameters" : "rope_scaling";
  const Json* rope = params != nullptr ? params : f.find("rope_scaling");
  if (rope == nullptr) return;
  if (!rope->is_object()) f.fail(name, *rope, "is not an object");
  // transformers 5 keys rope_parameters by attention type for models that mix types; these
  // families have one.
  if (rope->contains("full_attention") || rope->contains("sliding_attention"))
    f.fail(name, *rope, "holds one entry per attention type, which these families do not use");
  const Fields r(*rope, f.where(), std::string(name) + ".");
  if (params != nullptr) c.rope_theta = r.positive("rope_theta", c.rope_theta, kMaxRopeTheta);
  const char* type_key = r.find("rope_type") != nullptr ? "rope_type" : "type";
  const Json* type = r.find(type_key);
  if (type == nullptr && params == nullptr) f.fail(name, *rope, "has no rope_type");
  const std::string kind = r.text(type_key, "default");
  if (kind == "default") return;
  if (kind != "llama3") r.fail(type_key, *type, "is not supported (supported: default, llama3)");
  RopeScaling& s = c.rope_scaling;
  s.llama3 = true;
  s.factor = r.positive("factor", kMaxRopeFactor);
  s.low_freq_factor = r.positive("low_freq_factor", kMaxRopeFactor);
  s.high_freq_factor = r.positive("high_freq_factor", kMaxRopeFactor);
  // llama3's smoothing divides by high - low.
  if (!(s.high_freq_factor > s.low_freq_factor))
    r.fail("high_freq_factor", *r.find("high_freq_factor"), "must exceed low_freq_factor");
  s.original_max_position_embeddings = r.integer("original_max_position_embeddings", 1, kMaxPositions);
}

// The sliding window of each layer (0: full causal attention), as transformers' configs set it.
void read_windows(const Fields& f, HfModelConfig& c) {
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  c.layer_windows.assign(layers, 0);
  if (c.family == HfFamily::llama || c.family == HfFamily::gpt2) return;
  // sliding_window: absent takes the classes' default 4096, null means no window.
  const std::int64_t window = f.has_key("sliding_window") ? f.integer("sliding_window", 0, 1, kMaxPositions) : 4096;
  if (c.family == HfFamily::mistral) {
    c.layer_windows.assign(layers, window);
    return;
  }
  // qwen2/qwen3: the window applies only under use_sliding_window, to the layers layer_types
  // marks "sliding_attention", or else to those from max_window_layers on.
  if (!f.flag("use_sliding_window", false)) return;
  if (const Json* types = f.find("layer_types")) {
    if (!types->is_array() || types->size() != layers)
      f.fail("layer_types", *types, "is not a list of " + std::to_string(layers) + " layer types");
    for (std::size_t i = 0; i < layers; ++i) {
      const Json& t = (*types)[i];
      if (t != "full_attention" && t != "sliding_attention")
        f.fail("layer_types", t, "is not \"full_attention\" or \"sliding_attention\"");
      c.layer_windows[i] = t == "sliding_attention" ? window : 0;
    }
    return;
  }
  const std::int64_t first = f.integer("max_window_layers", 28, 0, kMaxLayers);
  for (std::size_t i = 0; i < layers; ++i) c.layer_windows[i] = static_cast<std::int64_t>(i) >= first ? window : 0;
}

void read_llama_family(const Fields& f, HfModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer("hidden_size", 1, kMaxHidden);
  c.intermediate_size = f.integer("intermediate_size", 1, kMaxIntermediate);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1, kMaxLayers);
  c.num_attention_heads = f.integer("num_attention_heads", 1, kMaxHeads);
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads, 1, kMaxHeads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    f.fail("num_key_value_heads", *f.find("num_key_value_heads"),
           "does not divide num_attention_heads = " + std::to_string(c.num_attention_heads));
  if (f.find("head_dim") != nullptr || c.family == HfFamily::qwen3) {
    c.head_dim = f.integer("head_dim", 128, 1, kMaxHeadDim);  // Qwen3Config's default
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      f.fail("num_attention_heads", *f.find("num_attention_heads"),
             "does not divide hidden_size = " + std::to_string(c.hidden_size) + " (and no head_dim is given)");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  // Rotary embeddings rotate pairs of a head's dimensions.
  if (c.head_dim % 2 != 0)
    throw ConfigError(f.where() + ": head_dim = " + std::to_string(c.head_dim) +
                      " is odd (rotary embeddings rotate pairs of dimensions)");
  c.max_position_embeddings =
      f.integer("max_position_embeddings", family_of(c.family).max_positions, 1, kMaxPositions);
  c.norm_eps = f.positive("rms_norm_eps", 1e-6, 1.0);
  c.hidden_act = f.text("hidden_act", "silu");
  if (c.hidden_act != "silu") f.fail("hidden_act", *f.find("hidden_act"), "is not supported (supported: silu)");
  c.tie_word_embeddings = f.flag("tie_word_embeddings", false);
  // Which bias flags a family reads: LlamaConfig both, Qwen3Config attention_bias, Mistral none;
  // Qwen2's q/k/v projections always have one.
  c.attention_bias = c.family == HfFamily::qwen2 ||
                     ((c.family == HfFamily::llama || c.family == HfFamily::qwen3) && f.flag("attention_bias", false));
  c.mlp_bias = c.family == HfFamily::llama && f.flag("mlp_bias", false);
  read_rope(f, c);
  read_windows(f, c);
}

// gpt2's own names, or the generic one its attribute_map aliases to it.
const char* gpt2_key(const Fields& f, const char* own, const char* alias) {
  return f.find(own) == nullptr && f.find(alias) != nullptr ? alias : own;
}

void read_gpt2(const Fields& f, HfModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer(gpt2_key(f, "n_embd", "hidden_size"), 1, kMaxHidden);
  c.num_hidden_layers = f.integer(gpt2_key(f, "n_layer", "num_hidden_layers"), 1, kMaxLayers);
  c.num_attention_heads = f.integer(gpt2_key(f, "n_head", "num_attention_heads"), 1, kMaxHeads);
  const char* positions = f.find("n_positions") != nullptr ? "n_positions"
                          : f.find("n_ctx") != nullptr     ? "n_ctx"
                                                           : "max_position_embeddings";
  c.max_position_embeddings = f.integer(positions, 1024, 1, kMaxPositions);
  if (c.hidden_size % c.num_attention_heads != 0)
    f.fail("n_head", *f.find(gpt2_key(f, "n_head", "num_attention_heads")),
           "does not divide n_embd = " + std::to_string(c.hidden_size));
  c.num_key_value_heads = c.num_attention_heads;
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.intermediate_size = f.integer("n_inner", 4 * c.hidden_size, 1, kMaxIntermediate);
  c.norm_eps = f.positive("layer_norm_epsilon", 1e-5, 1.0);
  c.hidden_act = f.text("activation_function", "gelu_new");
  if (c.hidden_act != "gelu_new" && c.hidden_act != "gelu_pytorch_tanh")
    f.fail("activation_function", *f.find("activation_function"),
           "is not supported (supported: gelu_new, gelu_pytorch_tanh)");
  if (!f.flag("scale_attn_weights", true))
    f.fail("scale_attn_weights", *f.find("scale_attn_weights"), "is not supported (attention is scaled)");
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "add_cross_attention"})
    if (f.flag(key, false)) f.fail(key, *f.find(key), "is not supported");
  c.tie_word_embeddings = f.flag("tie_word_embeddings", true);
  c.attention_bias = c.mlp_bias = true;
  c.layer_windows.assign(static_cast<std::size_t>(c.num_hidden_layers), 0);
}

// A copy with the object's keys in the order it iterates them, built without ordered_map's
// per-insertion key search (quadratic in an object's size).
OrderedJson ordered(const Json& j) {
  if (j.is_object()) {
    OrderedJson out = OrderedJson::object();
    auto& map = out.get_ref<OrderedJson::object_t&>();
    for (const auto& [key, value] : j.items()) map.emplace_back(key, ordered(value));
    return out;
  }
  if (j.is_array()) {
    OrderedJson out = OrderedJson::array();
    for (const Json& v : j) out.push_back(ordered(v));
    return out;
  }
  return OrderedJson(j);
}

std::string read_text_file(const fs::path& file) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  GENESIS_CHECK(!ec, IoError, "cannot read '" + file.string() + "': " + ec.message());
  GENESIS_CHECK(size <= kMaxConfigBytes, ConfigError,
                "'" + file.string() + "': " + std::to_string(size) + " bytes is too large for a config file");
  std::ifstream in(file, std::ios::binary);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  GENESIS_CHECK(in.good() || size == 0, IoError, "cannot read '" + file.string() + "'");
  return text;
}

// Strict JSON, nested at most kMaxDepth deep (deeper containers are not even built).
Json parse_json(std::string_view text, const std::string& where) {
  GENESIS_CHECK(text.size() <= kMaxConfigBytes, ConfigError,
                where + ": " + std::to_string(text.size()) + " bytes is too large for a config file");
  // nlohmann's lexer stops at a NUL byte as if the text ended there; JSON never holds a raw one.
  GENESIS_CHECK(text.find('\0') == std::string_view::npos, ConfigError, where + ": not valid JSON (a NUL byte)");
  bool too_deep = false;
  const Json::parser_callback_t limit = [&](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxDepth)
      too_deep = true;
    return !too_deep;
  };
  Json json = Json::parse(text.begin(), text.end(), limit, /*allow_exceptions=*/false);
  GENESIS_CHECK(!too_deep, ConfigError, where + ": nested deeper than " + std::to_string(kMaxDepth) + " levels");
  GENESIS_CHECK(!json.is_discarded(), ConfigError, where + ": not valid JSON");
  return json;
}

}  // namespace

HfModelConfig parse_hf_config(const nlohmann::json& json, const std::string& where) {
  GENESIS_CHECK(json.is_object(), ConfigError, where + ": not a JSON object");
  const Fields f(json, where);
  HfModelConfig c;
  const Json* type = f.find("model_type");
  if (type == nullptr) f.missing("model_type");
  if (!type->is_string()) f.fail("model_type", *type, "is not a string");
  c.model_type = type->get<std::string>();
  const Family* family = nullptr;
  for (const Family& candidate : kFamilies)
    if (c.model_type == candidate.model_type) family = &candidate;
  if (family == nullptr) f.fail("model_type", *type, "is not supported (supported: llama, mistral, qwen2, qwen3, gpt2)");
  c.family = family->family;
  if (const Json* archs = f.find("architectures")) {
    if (!archs->is_array() || archs->size() > 64) f.fail("architectures", *archs, "is not a list of class names");
    for (const Json& a : *archs) {
      if (!a.is_string()) f.fail("architectures", *archs, "is not a list of class names");
      c.architectures.push_back(a.get<std::string>());
    }
  }
  if (c.family == HfFamily::gpt2) read_gpt2(f, c);
  else read_llama_family(f, c);
  c.bos_token_id = f.ids("bos_token_id", c.vocab_size);
  c.eos_token_id = f.ids("eos_token_id", c.vocab_size);
  // Early Llama conversions wrote pad_token_id -1 for "none".
  c.pad_token_id = f.integer("pad_token_id", -1, -1, c.vocab_size - 1);
  // transformers 5 writes dtype, 4 torch_dtype; the weights are converted on load either way.
  const char* dtype_key = f.find("dtype") != nullptr ? "dtype" : "torch_dtype";
  c.torch_dtype = f.text(dtype_key, "float32");
  if (c.torch_dtype != "float32" && c.torch_dtype != "float16" && c.torch_dtype != "bfloat16")
    f.fail(dtype_key, *f.find(dtype_key), "is not supported (supported: float32, float16, bfloat16)");
  c.raw = ordered(json);
  return c;
}

HfModelConfig parse_hf_config_text(std::string_view text, const std::string& where) {
  return parse_hf_config(parse_json(text, where), where);
}

HfModelConfig read_hf_config(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "config.json" : path;
  return parse_hf_config_text(read_text_file(file), "'" + file.string() + "'");
}

nlohmann::ordered_json hf_config_json(const HfModelConfig& c) {
  const Family& family = family_of(c.family);
  GENESIS_CHECK(c.layer_windows.size() == static_cast<std::size_t>(c.num_hidden_layers), InvalidArgument,
                "hf config: layer_windows has " + std::to_string(c.layer_windows.size()) + " entries for " +
                    std::to_string(c.num_hidden_layers) + " layers");
  OrderedJson j = c.raw.is_object() ? c.raw : OrderedJson::object();
  j["architectures"] = c.architectures.empty() ? std::vector<std::string>{family.architecture} : c.architectures;
  j["model_type"] = family.model_type;
  j["vocab_size"] = c.vocab_size;
  std::int64_t window = 0;  // the one window the sliding layers share
  for (std::int64_t w : c.layer_windows) {
    GENESIS_CHECK(w >= 0 && (w == 0 || window == 0 || w == window), InvalidArgument,
                  "hf config: config.json has one sliding_window for every sliding layer");
    if (w > 0) window = w;
  }
  if (c.is_gpt2()) {
    GENESIS_CHECK(window == 0, InvalidArgument, "hf config: gpt2 has no sliding window");
    // The generic aliases would override gpt2's names on load (attribute_map).
    for (const char* alias : {"hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings"})
      j.erase(alias);
    j["n_embd"] = c.hidden_size;
    j["n_layer"] = c.num_hidden_layers;
    j["n_head"] = c.num_attention_heads;
    j["n_positions"] = c.max_position_embeddings;
    if (j.contains("n_ctx")) j["n_ctx"] = c.max_position_embeddings;
    j["n_inner"] = c.intermediate_size;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["activation_function"] = c.hidden_act;
  } else {
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["num_hidden_layers"] = c.num_hidden_layers;
    j["num_attention_heads"] = c.num_attention_heads;
    j["num_key_value_heads"] = c.num_key_value_heads;
    j["head_dim"] = c.head_dim;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["rms_norm_eps"] = c.norm_eps;
    j["hidden_act"] = c.hidden_act;
    if (c.family == HfFamily::llama || c.family == HfFamily::qwen3) j["attention_bias"] = c.attention_bias;
    if (c.family == HfFamily::llama) j["mlp_bias"] = c.mlp_bias;
    OrderedJson scaling = nullptr;
    if (c.rope_scaling.llama3)
      scaling = {{"factor", c.rope_scaling.factor},
                 {"high_freq_factor", c.rope_scaling.high_freq_factor},
                 {"low_freq_factor", c.rope_scaling.low_freq_factor},
                 {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings},
                 {"rope_type", "llama3"}};
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
      OrderedJson params = scaling.is_null() ? OrderedJson{{"rope_type", "default"}} : scaling;
      params["rope_theta"] = c.rope_theta;
      j["rope_parameters"] = params;
    } else {
      j["rope_theta"] = c.rope_theta;
      j["rope_scaling"] = scaling;
    }
    if (c.family == HfFamily::llama) {
      GENESIS_CHECK(window == 0, InvalidArgument, "hf config: llama has no sliding window");
    } else if (c.family == HfFamily::mistral) {
      GENESIS_CHECK(window == 0 || std::count(c.layer_windows.begin(), c.layer_windows.end(), 0) == 0,
                    InvalidArgument, "hf config: mistral's sliding window covers every layer or none");
      j["sliding_window"] = window > 0 ? OrderedJson(window) : OrderedJson(nullptr);
    } else {
      j["use_sliding_window"] = window > 0;
      if (window > 0) {
        // layer_types for transformers >= 4.53; max_window_layers for older ones when the
        // sliding layers are the last ones, as they read it.
        OrderedJson types = OrderedJson::array();
        for (std::int64_t w : c.layer_windows) types.push_back(w > 0 ? "sliding_attention" : "full_attention");
        const auto first = std::find_if(c.layer_windows.begin(), c.layer_windows.end(), [](auto w) { return w > 0; });
        if (std::all_of(first, c.layer_windows.end(), [](auto w) { return w > 0; }))
          j["max_window_layers"] = first - c.layer_windows.begin();
        j["sliding_window"] = window;
        j["layer_types"] = types;
      }
    }
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  const auto ids = [](const std::vector<std::int64_t>& v) {
    return v.empty() ? OrderedJson(nullptr) : v.size() == 1 ? OrderedJson(v[0]) : OrderedJson(v);
  };
  j["bos_token_id"] = ids(c.bos_token_id);
  j["eos_token_id"] = ids(c.eos_token_id);
  if (c.pad_token_id >= 0) j["pad_token_id"] = c.pad_token_id;
  else if (j.contains("pad_token_id")) j["pad_token_id"] = nullptr;
  j["torch_dtype"] = c.torch_dtype;
  if (j.contains("dtype")) j["dtype"] = c.torch_dtype;
  return j;
}

std::vector<std::int64_t> hf_eos_token_ids(const fs::path& dir, const HfModelConfig& config) {
  std::error_code ec;
  const fs::path file = (fs::is_directory(dir, ec) ? dir : dir.parent_path()) / "generation_config.json";
  std::vector<std::int64_t> out = config.eos_token_id;
  if (!fs::exists(file, ec)) return out;
  const std::string where = "'" + file.string() + "'";
  const Json json = parse_json(read_text_file(file), where);
  GENESIS_CHECK(json.is_object(), ConfigError, where + ": not a JSON object");
  for (std::int64_t id : Fields(json, where).ids("eos_token_id", config.vocab_size))
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  return out;
}

}  // namespace genesis::nn
