// Tests of config.json reading: each family's real-world config (Llama-3.2-1B, Mistral-7B-v0.1,
// Qwen2.5-0.5B, Qwen3-0.6B, gpt2, and transformers 5's rope_parameters) read into the fields the
// model code uses, written back and read again unchanged, and every refusal naming the file, the
// field and the value.
#include <catch2/catch.hpp>

#include <string>

#include "genesis/core/error.hpp"
#include "genesis/nn/hf_config.hpp"
#include "support/cli_run.hpp"
#include "support/thrown_message.hpp"

namespace genesis {
namespace {

using Catch::Matchers::Contains;
using nn::HfFamily;
using nn::HfModelConfig;
using Json = nlohmann::json;

// Trimmed from meta-llama/Llama-3.2-1B's config.json (the fields that matter and a few that do not).
const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

const char* kMistral7B = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false,
  "use_sliding_window": false, "vocab_size": 151936})";

const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

const char* kGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
  "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
  "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
  "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true,
  "max_length": 50}}, "vocab_size": 50257})";

HfModelConfig parse(const std::string& text) { return nn::parse_hf_config_text(text, "'test/config.json'"); }

// `text` with `key` set to `value` (JSON), or removed when value is empty.
std::string with(const char* text, const std::string& key, const std::string& value) {
  Json j = Json::parse(text);
  if (value.empty()) j.erase(key);
  else j[key] = Json::parse(value);
  return j.dump();
}

std::string config_error(const std::string& text) {
  return testing::thrown_message<ConfigError>([&] { parse(text); });
}

// Reads back what hf_config_json wrote and checks every field the model code uses survived.
void check_round_trip(const HfModelConfig& c) {
  const HfModelConfig back = parse(nn::hf_config_json(c).dump());
  CHECK(back.family == c.family);
  CHECK(back.architectures == c.architectures);
  CHECK(back.vocab_size == c.vocab_size);
  CHECK(back.hidden_size == c.hidden_size);
  CHECK(back.intermediate_size == c.intermediate_size);
  CHECK(back.num_hidden_layers == c.num_hidden_layers);
  CHECK(back.num_attention_heads == c.num_attention_heads);
  CHECK(back.num_key_value_heads == c.num_key_value_heads);
  CHECK(back.head_dim == c.head_dim);
  CHECK(back.max_position_embeddings == c.max_position_embeddings);
  CHECK(back.norm_eps == c.norm_eps);
  CHECK(back.rope_theta == c.rope_theta);
  CHECK(back.rope_scaling.llama3 == c.rope_scaling.llama3);
  CHECK(back.rope_scaling.factor == c.rope_scaling.factor);
  CHECK(back.rope_scaling.original_max_position_embeddings == c.rope_scaling.original_max_position_embeddings);
  CHECK(back.attention_bias == c.attention_bias);
  CHECK(back.mlp_bias == c.mlp_bias);
  CHECK(back.tie_word_embeddings == c.tie_word_embeddings);
  CHECK(back.layer_windows == c.layer_windows);
  CHECK(back.hidden_act == c.hidden_act);
  CHECK(back.bos_token_id == c.bos_token_id);
  CHECK(back.eos_token_id == c.eos_token_id);
  CHECK(back.pad_token_id == c.pad_token_id);
  CHECK(back.torch_dtype == c.torch_dtype);
}

TEST_CASE("hf config: Llama-3.2-1B with llama3 rope scaling", "[hf_config]") {
  const HfModelConfig c = parse(kLlama32);
  CHECK(c.family == HfFamily::llama);
  CHECK(c.model_type == "llama");
  CHECK(c.architectures == std::vector<std::string>{"LlamaForCausalLM"});
  CHECK(c.vocab_size == 128256);
  CHECK(c.hidden_size == 2048);
  CHECK(c.intermediate_size == 8192);
  CHECK(c.num_hidden_layers == 16);
  CHECK(c.num_attention_heads == 32);
  CHECK(c.kv_heads() == 8);
  CHECK(c.head_dim == 64);
  CHECK(c.max_position_embeddings == 131072);
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rope_scaling.llama3);
  CHECK(c.rope_scaling.factor == 32.0);
  CHECK(c.rope_scaling.low_freq_factor == 1.0);
  CHECK(c.rope_scaling.high_freq_factor == 4.0);
  CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
  CHECK_FALSE(c.attention_bias);
  CHECK_FALSE(c.mlp_bias);
  CHECK(c.tie_word_embeddings);
  CHECK(c.layer_windows == std::vector<std::int64_t>(16, 0));
  CHECK(c.hidden_act == "silu");
  CHECK(c.bos_token_id == std::vector<std::int64_t>{128000});
  CHECK(c.eos_token_id == std::vector<std::int64_t>{128001});
  CHECK(c.pad_token_id == -1);
  CHECK(c.torch_dtype == "bfloat16");
  CHECK(c.raw.at("transformers_version") == "4.45.0.dev0");
  check_round_trip(c);
}

TEST_CASE("hf config: Mistral-7B-v0.1 slides a 4096 window on every layer", "[hf_config]") {
  const HfModelConfig c = parse(kMistral7B);
  CHECK(c.family == HfFamily::mistral);
  CHECK(c.head_dim == 128);  // hidden_size / num_attention_heads
  CHECK(c.kv_heads() == 8);
  CHECK(c.layer_windows == std::vector<std::int64_t>(32, 4096));
  CHECK_FALSE(c.rope_scaling.llama3);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK_FALSE(c.attention_bias);
  check_round_trip(c);
  // null: no window; absent: MistralConfig's default 4096.
  CHECK(parse(with(kMistral7B, "sliding_window", "null")).layer_windows == std::vector<std::int64_t>(32, 0));
  CHECK(parse(with(kMistral7B, "sliding_window", "")).layer_windows == std::vector<std::int64_t>(32, 4096));
  check_round_trip(parse(with(kMistral7B, "sliding_window", "null")));
}

TEST_CASE("hf config: Qwen2.5-0.5B has q/k/v bias and no window unless use_sliding_window", "[hf_config]") {
  const HfModelConfig c = parse(kQwen25);
  CHECK(c.family == HfFamily::qwen2);
  CHECK(c.head_dim == 64);
  CHECK(c.kv_heads() == 2);
  CHECK(c.attention_bias);  // always, whatever the file says
  CHECK_FALSE(c.mlp_bias);
  CHECK(c.tie_word_embeddings);
  CHECK(c.rope_theta == 1e6);
  CHECK(c.norm_eps == 1e-6);
  CHECK(c.layer_windows == std::vector<std::int64_t>(24, 0));
  check_round_trip(c);

  SECTION("use_sliding_window: layers from max_window_layers on slide") {
    Json j = Json::parse(kQwen25);
    j["use_sliding_window"] = true;
    j["max_window_layers"] = 20;
    j["sliding_window"] = 4096;
    const HfModelConfig s = parse(j.dump());
    for (std::size_t i = 0; i < 24; ++i) CHECK(s.layer_windows[i] == (i >= 20 ? 4096 : 0));
    check_round_trip(s);
  }
  SECTION("layer_types names each layer's attention") {
    Json j = Json::parse(kQwen25);
    j["use_sliding_window"] = true;
    j["sliding_window"] = 512;
    j["layer_types"] = Json::array();
    for (int i = 0; i < 24; ++i) j["layer_types"].push_back(i % 2 ? "sliding_attention" : "full_attention");
    const HfModelConfig s = parse(j.dump());
    for (std::size_t i = 0; i < 24; ++i) CHECK(s.layer_windows[i] == (i % 2 ? 512 : 0));
    check_round_trip(s);
    j["layer_types"][3] = "chunked_attention";
    CHECK_THAT(config_error(j.dump()), Contains("layer_types = \"chunked_attention\""));
    j["layer_types"] = {"full_attention"};
    CHECK_THAT(config_error(j.dump()), Contains("not a list of 24 layer types"));
  }
}

TEST_CASE("hf config: Qwen3-0.6B's head_dim is its own", "[hf_config]") {
  const HfModelConfig c = parse(kQwen3);
  CHECK(c.family == HfFamily::qwen3);
  CHECK(c.head_dim == 128);  // not hidden_size / num_attention_heads = 64
  CHECK(c.kv_heads() == 8);
  CHECK_FALSE(c.attention_bias);
  CHECK(c.rope_theta == 1e6);
  CHECK_FALSE(c.rope_scaling.llama3);
  CHECK(c.layer_windows == std::vector<std::int64_t>(28, 0));
  CHECK(c.eos_token_id == std::vector<std::int64_t>{151645});
  check_round_trip(c);
  CHECK(parse(with(kQwen3, "head_dim", "")).head_dim == 128);  // Qwen3Config's default
  CHECK(parse(with(kQwen3, "attention_bias", "true")).attention_bias);
}

TEST_CASE("hf config: gpt2 reads its own field names", "[hf_config]") {
  const HfModelConfig c = parse(kGpt2);
  CHECK(c.is_gpt2());
  CHECK(c.vocab_size == 50257);
  CHECK(c.hidden_size == 768);
  CHECK(c.num_hidden_layers == 12);
  CHECK(c.num_attention_heads == 12);
  CHECK(c.kv_heads() == 12);
  CHECK(c.head_dim == 64);
  CHECK(c.intermediate_size == 3072);  // n_inner absent: 4 * n_embd
  CHECK(c.max_position_embeddings == 1024);
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.hidden_act == "gelu_new");
  CHECK(c.tie_word_embeddings);  // GPT2Config's default
  CHECK(c.attention_bias);
  CHECK(c.mlp_bias);
  CHECK(c.torch_dtype == "float32");  // absent
  CHECK(c.eos_token_id == std::vector<std::int64_t>{50256});
  check_round_trip(c);
  const Json written = Json::parse(nn::hf_config_json(c).dump());
  CHECK(written.at("architectures") == Json::array({"GPT2LMHeadModel"}));
  CHECK(written.at("n_embd") == 768);
  CHECK_FALSE(written.contains("hidden_size"));
  CHECK(parse(with(kGpt2, "n_inner", "1000")).intermediate_size == 1000);
  CHECK(parse(with(kGpt2, "n_inner", "null")).intermediate_size == 3072);
  CHECK(parse(with(kGpt2, "activation_function", "\"gelu_pytorch_tanh\"")).hidden_act == "gelu_pytorch_tanh");
  CHECK(parse(with(with(kGpt2, "n_positions", "").c_str(), "n_ctx", "512")).max_position_embeddings == 512);
}

TEST_CASE("hf config: transformers 5's rope_parameters and dtype", "[hf_config]") {
  Json j = Json::parse(kLlama32);
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  const HfModelConfig c = parse(j.dump());
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rope_scaling.llama3);
  CHECK(c.rope_scaling.factor == 8.0);
  CHECK(c.torch_dtype == "float16");
  check_round_trip(c);
  const Json written = Json::parse(nn::hf_config_json(c).dump());
  CHECK(written.at("rope_parameters").at("rope_theta") == 500000.0);
  CHECK(written.at("dtype") == "float16");

  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1234.0}};
  const HfModelConfig d = parse(j.dump());
  CHECK(d.rope_theta == 1234.0);
  CHECK_FALSE(d.rope_scaling.llama3);
  check_round_trip(d);
  // The legacy "type" key, and "default" written out.
  CHECK_FALSE(parse(with(kLlama32, "rope_scaling", R"({"type": "default"})")).rope_scaling.llama3);
}

TEST_CASE("hf config: ids as lists, defaults and what a config built in code writes", "[hf_config]") {
  const HfModelConfig c = parse(with(kLlama32, "eos_token_id", "[128001, 128008, 128009]"));
  CHECK(c.eos_token_id == std::vector<std::int64_t>{128001, 128008, 128009});
  check_round_trip(c);
  CHECK(parse(with(kLlama32, "pad_token_id", "-1")).pad_token_id == -1);
  CHECK(parse(with(kLlama32, "pad_token_id", "0")).pad_token_id == 0);
  const HfModelConfig no_kv = parse(with(kLlama32, "num_key_value_heads", ""));
  CHECK(no_kv.kv_heads() == 32);
  CHECK(parse(with(kLlama32, "head_dim", "null")).head_dim == 64);

  HfModelConfig fresh = parse(kQwen3);
  fresh.raw = nullptr;  // as if built in code: hf_config_json writes every field itself
  const Json written = Json::parse(nn::hf_config_json(fresh).dump());
  CHECK(written.at("model_type") == "qwen3");
  CHECK(written.at("architectures") == Json::array({"Qwen3ForCausalLM"}));
  CHECK(written.at("torch_dtype") == "bfloat16");
  fresh.architectures.clear();
  check_round_trip(parse(nn::hf_config_json(fresh).dump()));
}

TEST_CASE("hf config: read_hf_config and generation_config.json's eos ids", "[hf_config]") {
  testing::TempDir dir;
  dir.write("config.json", kLlama32);
  const HfModelConfig c = nn::read_hf_config(dir.path());
  CHECK(c.vocab_size == 128256);
  CHECK(nn::read_hf_config(dir.path() / "config.json").hidden_size == 2048);
  CHECK(nn::hf_eos_token_ids(dir.path(), c) == std::vector<std::int64_t>{128001});
  dir.write("generation_config.json", R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})");
  CHECK(nn::hf_eos_token_ids(dir.path(), c) == std::vector<std::int64_t>{128001, 128008, 128009});
  dir.write("generation_config.json", R"({"eos_token_id": 999999999})");
  CHECK_THAT(testing::thrown_message<ConfigError>([&] { nn::hf_eos_token_ids(dir.path(), c); }),
             Contains("generation_config.json") && Contains("eos_token_id = 999999999"));
  dir.write("config.json", "{\"model_type\": ");
  CHECK_THAT(testing::thrown_message<ConfigError>([&] { nn::read_hf_config(dir.path()); }),
             Contains("config.json") && Contains("not valid JSON"));
  CHECK_THROWS_AS(nn::read_hf_config(dir.path() / "absent"), IoError);
}

TEST_CASE("hf config: refusals name the file, the field and the value", "[hf_config]") {
  SECTION("model_type") {
    const std::string e = config_error(with(kLlama32, "model_type", "\"bert\""));
    CHECK_THAT(e, Contains("'test/config.json'") && Contains("model_type = \"bert\"") &&
                      Contains("supported: llama, mistral, qwen2, qwen3, gpt2"));
    CHECK_THAT(config_error(with(kLlama32, "model_type", "")), Contains("model_type is missing"));
    CHECK_THAT(config_error("[1, 2]"), Contains("not a JSON object"));
  }
  SECTION("rope_scaling") {
    CHECK_THAT(config_error(with(kLlama32, "rope_scaling", R"({"rope_type": "yarn", "factor": 4.0})")),
               Contains("rope_scaling.rope_type = \"yarn\" is not supported (supported: default, llama3)"));
    CHECK_THAT(config_error(with(kLlama32, "rope_scaling", R"({"type": "linear", "factor": 2.0})")),
               Contains("rope_scaling.type = \"linear\""));
    CHECK_THAT(config_error(with(kLlama32, "rope_scaling", R"({"factor": 2.0})")), Contains("has no rope_type"));
    CHECK_THAT(config_error(with(kLlama32, "rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})")),
               Contains("rope_scaling.low_freq_factor is missing"));
    CHECK_THAT(config_error(with(kLlama32, "rope_scaling",
                                 R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})")),
               Contains("must exceed low_freq_factor"));
    CHECK_THAT(config_error(with(kLlama32, "rope_scaling", "\"llama3\"")), Contains("is not an object"));
  }
  SECTION("activations") {
    CHECK_THAT(config_error(with(kLlama32, "hidden_act", "\"gelu\"")),
               Contains("hidden_act = \"gelu\" is not supported (supported: silu)"));
    CHECK_THAT(config_error(with(kGpt2, "activation_function", "\"relu\"")),
               Contains("activation_function = \"relu\" is not supported"));
    CHECK_THAT(config_error(with(kGpt2, "scale_attn_by_inverse_layer_idx", "true")),
               Contains("scale_attn_by_inverse_layer_idx = true"));
  }
  SECTION("head counts that do not divide") {
    CHECK_THAT(config_error(with(kLlama32, "num_key_value_heads", "5")),
               Contains("num_key_value_heads = 5 does not divide num_attention_heads = 32"));
    CHECK_THAT(config_error(with(with(kMistral7B, "num_attention_heads", "24").c_str(), "num_key_value_heads", "")),
               Contains("num_attention_heads = 24 does not divide hidden_size = 4096"));
    CHECK_THAT(config_error(with(kGpt2, "n_head", "7")), Contains("n_head = 7 does not divide n_embd = 768"));
    CHECK_THAT(config_error(with(kLlama32, "head_dim", "63")), Contains("head_dim = 63 is odd"));
  }
  SECTION("values out of bounds or of the wrong type") {
    CHECK_THAT(config_error(with(kLlama32, "vocab_size", "100000000")),
               Contains("vocab_size = 100000000 is out of range [1, 4194304]"));
    CHECK_THAT(config_error(with(kLlama32, "hidden_size", "0")), Contains("hidden_size = 0 is out of range"));
    CHECK_THAT(config_error(with(kLlama32, "num_hidden_layers", "-3")), Contains("num_hidden_layers = -3"));
    CHECK_THAT(config_error(with(kLlama32, "num_attention_heads", "18446744073709551615")),
               Contains("num_attention_heads = 18446744073709551615 is out of range"));
    CHECK_THAT(config_error(with(kLlama32, "intermediate_size", "8192.5")),
               Contains("intermediate_size = 8192.5 is not an integer"));
    CHECK_THAT(config_error(with(kLlama32, "max_position_embeddings", "33554432")),
               Contains("max_position_embeddings = 33554432 is out of range"));
    CHECK_THAT(config_error(with(kGpt2, "n_embd", "131072")), Contains("n_embd = 131072 is out of range"));
    CHECK_THAT(config_error(with(kGpt2, "n_inner", "2000000")), Contains("n_inner = 2000000"));
    CHECK_THAT(config_error(with(kLlama32, "rms_norm_eps", "0")), Contains("rms_norm_eps = 0 is out of range"));
    CHECK_THAT(config_error(with(kLlama32, "rope_theta", "\"big\"")), Contains("rope_theta = \"big\" is not a number"));
    CHECK_THAT(config_error(with(kMistral7B, "sliding_window", "0")), Contains("sliding_window = 0"));
    CHECK_THAT(config_error(with(kLlama32, "eos_token_id", "[128001, 200000]")),
               Contains("eos_token_id = 200000 is out of range [0, 128255]"));
    CHECK_THAT(config_error(with(kLlama32, "eos_token_id", "\"</s>\"")), Contains("not a token id"));
    CHECK_THAT(config_error(with(kLlama32, "tie_word_embeddings", "1")), Contains("tie_word_embeddings = 1 is not true"));
    CHECK_THAT(config_error(with(kLlama32, "torch_dtype", "\"float8_e4m3fn\"")),
               Contains("torch_dtype = \"float8_e4m3fn\" is not supported"));
    CHECK_THAT(config_error(with(kLlama32, "hidden_size", "")), Contains("hidden_size is missing"));
  }
  SECTION("nesting and size") {
    std::string deep = R"({"model_type": "llama", "x": )" + std::string(100, '[') + std::string(100, ']') + "}";
    CHECK_THAT(config_error(deep), Contains("nested deeper than 64"));
    CHECK_THAT(config_error(std::string(5 << 20, ' ')), Contains("too large"));
    // nlohmann would stop reading at the NUL and accept the text before it.
    CHECK_THAT(config_error(std::string(kGpt2) + std::string("\0junk", 5)), Contains("NUL byte"));
  }
}

}  // namespace
}  // namespace genesis
