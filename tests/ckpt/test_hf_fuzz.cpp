// A bounded mutation fuzzer over the parsers that meet an untrusted Hugging Face model first: the
// safetensors header checks, config.json and model.safetensors.index.json. Every mutated input
// must give a result or exactly one genesis::Error with a one-line message: never a crash, a
// hang, or another exception type. Accepted configs must also survive hf_config_json and a second
// parse unchanged. The Catch2 test runs a fixed budget (plus whole files through load_safetensors
// and HfWeights); tests/ckpt/fuzz_hf_asan.sh builds this same file with GENESIS_FUZZ_MAIN under
// AddressSanitizer and UBSan, without the tensor library, and runs it as long as asked.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ckpt/hf_weights_index.hpp"
#include "ckpt/safetensors_header.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/hf_config.hpp"

#ifndef GENESIS_FUZZ_MAIN
#include <catch2/catch.hpp>

#include <fstream>

#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "support/cli_run.hpp"
#endif

namespace genesis::fuzz {
namespace {

using Rng = std::mt19937_64;

// ---- seeds: small valid inputs of each kind, for the mutations to start from

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

// A safetensors file: length, header (padded with spaces to 8 bytes), data.
std::string safetensors(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

std::vector<std::string> safetensors_seeds() {
  return {
      safetensors(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                  R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})",
                  std::string(22, '\x01')),
      safetensors(R"({"e":{"dtype":"I64","shape":[0,5],"data_offsets":[0,0]},"s":{"dtype":"F16","shape":[],)"
                  R"("data_offsets":[0,2]},"q":{"dtype":"F4","shape":[4],"data_offsets":[2,4]}})",
                  std::string(4, '\x02')),
      safetensors(R"({"model.layers.0.mlp.up_proj.weight":{"dtype":"F8_E4M3","shape":[4,2],"data_offsets":[8,16]},)"
                  R"("model.norm.weight":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                  std::string(16, '\x7f')),
      safetensors("\t\n {\"__metadata__\":null}", ""),
      safetensors(R"({"x":{"dtype":"BOOL","shape":[1,1,1,1],"data_offsets":[0,1],"extra":[1,{"k":2}]}})", "\x01"),
  };
}

std::vector<std::string> config_seeds() {
  return {
      R"({"architectures":["LlamaForCausalLM"],"bos_token_id":128000,"eos_token_id":[128001,128008],"head_dim":64,)"
      R"("hidden_act":"silu","hidden_size":2048,"intermediate_size":8192,"max_position_embeddings":131072,)"
      R"("mlp_bias":false,"model_type":"llama","num_attention_heads":32,"num_hidden_layers":16,)"
      R"("num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_scaling":{"factor":32.0,"high_freq_factor":4.0,)"
      R"("low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},)"
      R"("rope_theta":500000.0,"tie_word_embeddings":true,"torch_dtype":"bfloat16","vocab_size":128256})",
      R"({"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,"num_attention_heads":32,)"
      R"("num_hidden_layers":32,"num_key_value_heads":8,"sliding_window":4096,"vocab_size":32000,"bos_token_id":1})",
      R"({"model_type":"qwen2","hidden_size":896,"intermediate_size":4864,"max_window_layers":21,)"
      R"("num_attention_heads":14,"num_hidden_layers":24,"num_key_value_heads":2,"sliding_window":32768,)"
      R"("use_sliding_window":true,"vocab_size":151936,"pad_token_id":null,"torch_dtype":"bfloat16"})",
      R"({"model_type":"qwen3","head_dim":128,"hidden_size":1024,"intermediate_size":3072,"num_attention_heads":16,)"
      R"("num_hidden_layers":4,"num_key_value_heads":8,"use_sliding_window":true,"sliding_window":64,)"
      R"("layer_types":["full_attention","sliding_attention","full_attention","sliding_attention"],)"
      R"("rope_parameters":{"rope_type":"default","rope_theta":1000000},"dtype":"float16","vocab_size":151936})",
      R"({"activation_function":"gelu_new","architectures":["GPT2LMHeadModel"],"layer_norm_epsilon":1e-05,)"
      R"("model_type":"gpt2","n_ctx":1024,"n_embd":768,"n_head":12,"n_inner":null,"n_layer":12,"n_positions":1024,)"
      R"("vocab_size":50257,"task_specific_params":{"text-generation":{"do_sample":true,"max_length":50}}})",
  };
}

std::vector<std::string> index_seeds() {
  return {
      R"({"metadata":{"total_size":1234},"weight_map":{"lm_head.weight":"model-00002-of-00002.safetensors",)"
      R"("model.embed_tokens.weight":"model-00001-of-00002.safetensors"}})",
      R"({"weight_map":{"a":"sub/shard.safetensors","b":"./shard.safetensors"},"metadata":{}})",
  };
}

// ---- mutations

const std::vector<std::string> kTokens = {
    "{", "}", "[", "]", "\"", ":", ",", "null", "true", "-", "0", "-0", "1e400", "1.5", "-1",
    "18446744073709551615", "18446744073709551616", "9223372036854775808", "4294967296", "100000001",
    "\"__metadata__\"", "\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"F64\"", "\"F4\"", "\\u0000",
    "\\ud800", "\xc3\x28", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", " ", "\t", "\x00",
    "\"model_type\"", "\"rope_scaling\"", "\"llama3\"", "\"yarn\"", "\"../x\"", "\"/abs\"",
    "\"weight_map\"", "\"layer_types\"", "\"sliding_attention\""};

std::size_t pick(Rng& rng, std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }

// One random edit of `s`; `others` supply splices.
void mutate_once(std::string& s, Rng& rng, const std::vector<std::string>& others) {
  const std::size_t at = pick(rng, s.size() + 1);
  switch (pick(rng, 11)) {
    case 0:  // flip a bit
      if (!s.empty()) s[pick(rng, s.size())] ^= static_cast<char>(1u << pick(rng, 8));
      break;
    case 1:  // overwrite a byte
      if (!s.empty()) s[pick(rng, s.size())] = static_cast<char>(pick(rng, 256));
      break;
    case 2:  // delete a range
      s.erase(at, 1 + pick(rng, 16));
      break;
    case 3: {  // duplicate a range (repeats keys, nests objects)
      const std::string piece = s.substr(at, 1 + pick(rng, 64));
      s.insert(pick(rng, s.size() + 1), piece);
      break;
    }
    case 4:  // insert a token
    case 5:
      s.insert(at, kTokens[pick(rng, kTokens.size())]);
      break;
    case 6: {  // replace a run of digits with another number
      const std::size_t d = s.find_first_of("0123456789", at);
      if (d == std::string::npos) break;
      const std::size_t e = s.find_first_not_of("0123456789.e+-", d);
      s.replace(d, (e == std::string::npos ? s.size() : e) - d, kTokens[10 + pick(rng, 10)]);
      break;
    }
    case 7:  // truncate
      s.resize(pick(rng, s.size() + 1));
      break;
    case 8: {  // splice the tail of another input
      const std::string& o = others[pick(rng, others.size())];
      s = s.substr(0, at) + o.substr(pick(rng, o.size() + 1));
      break;
    }
    case 9:  // deep nesting
      s.insert(at, std::string(1 + pick(rng, 300), pick(rng, 2) ? '[' : '{'));
      break;
    default: {  // swap two ranges
      if (s.size() < 4) break;
      const std::size_t a = pick(rng, s.size()), b = pick(rng, s.size()), n = 1 + pick(rng, 8);
      for (std::size_t i = 0; i < n && a + i < s.size() && b + i < s.size(); ++i) std::swap(s[a + i], s[b + i]);
      break;
    }
  }
}

// A safetensors file's header length rewritten: near the real one, at the limits, or random.
void mutate_length(std::string& file, Rng& rng) {
  if (file.size() < 8) return;
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  const std::uint64_t choices[] = {n + 1, n - 1, n + 8, file.size() - 8, file.size() - 7, 100'000'000, 100'000'001,
                                   ~0ull, rng()};
  n = choices[pick(rng, std::size(choices))];
  std::memcpy(file.data(), &n, 8);
}

// ---- targets: each runs one input and classifies the outcome

enum class Outcome { accepted, refused };

struct Failure {
  std::string target, what;
  std::string input;
};

struct Stats {
  std::uint64_t runs = 0, accepted = 0, refused = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_target;  // accepted, refused
  std::vector<Failure> failures;
};

// Runs f on `input`: a genesis::Error with a one-line message is a refusal; anything else fails.
void classify(const std::string& target, const std::string& input, const std::function<void()>& f, Stats& stats) {
  ++stats.runs;
  std::string what;
  try {
    f();
    ++stats.accepted;
    ++stats.by_target[target].first;
    return;
  } catch (const Error& e) {
    if (std::strchr(e.what(), '\n') == nullptr && std::strlen(e.what()) > 0) {
      ++stats.refused;
      ++stats.by_target[target].second;
      return;
    }
    what = std::string("genesis error with a multi-line or empty message: ") + e.what();
  } catch (const std::exception& e) {
    what = std::string("non-genesis exception: ") + e.what();
  } catch (...) {
    what = "unknown exception";
  }
  stats.failures.push_back({target, what, input});
}

void run_safetensors_header(const std::string& input) {
  const ckpt::detail::SafetensorsHeader h = ckpt::detail::check_safetensors_file(input, "fuzz.safetensors");
  // What an accepted header promises its readers: every range inside the data section.
  for (const auto& e : h.entries)
    if (e.begin > e.end || h.data_start + e.end > input.size()) throw std::logic_error("accepted an out-of-bounds range");
}

void run_config(const std::string& input) {
  const nn::HfModelConfig c = nn::parse_hf_config_text(input, "'fuzz/config.json'");
  if (c.layer_windows.size() != static_cast<std::size_t>(c.num_hidden_layers) || c.head_dim <= 0 ||
      c.num_attention_heads % c.num_key_value_heads != 0)
    throw std::logic_error("accepted an inconsistent config");
  // Whatever is accepted is written back in a form that reads the same.
  const nn::HfModelConfig back = nn::parse_hf_config_text(nn::hf_config_json(c).dump(), "'fuzz/written.json'");
  if (back.layer_windows != c.layer_windows || back.hidden_size != c.hidden_size || back.head_dim != c.head_dim ||
      back.rope_scaling.llama3 != c.rope_scaling.llama3 || back.eos_token_id != c.eos_token_id ||
      back.tie_word_embeddings != c.tie_word_embeddings || back.intermediate_size != c.intermediate_size)
    throw std::logic_error("hf_config_json did not round-trip");
}

void run_index(const std::string& input) { ckpt::detail::parse_hf_index(input, "fuzz/model.safetensors.index.json"); }

struct Target {
  const char* name;
  std::vector<std::string> seeds;
  void (*run)(const std::string&);
  bool binary;  // a safetensors file: also mutate its length field
};

std::vector<Target> targets() {
  return {{"safetensors header", safetensors_seeds(), run_safetensors_header, true},
          {"config.json", config_seeds(), run_config, false},
          {"weights index", index_seeds(), run_index, false}};
}

// `iterations` mutated inputs per target, each 1-4 edits away from a seed (or from an earlier
// input that was accepted, so the corpus drifts towards deeper valid structure).
Stats fuzz(std::uint64_t iterations, std::uint64_t seed) {
  Stats stats;
  Rng rng(seed);
  for (const Target& t : targets()) {
    std::vector<std::string> corpus = t.seeds;
    for (const std::string& s : t.seeds) classify(t.name, s, [&] { t.run(s); }, stats);
    for (std::uint64_t i = 0; i < iterations; ++i) {
      std::string input = corpus[pick(rng, corpus.size())];
      const std::size_t edits = 1 + pick(rng, 4);
      for (std::size_t k = 0; k < edits; ++k) {
        if (t.binary && pick(rng, 8) == 0) mutate_length(input, rng);
        else if (t.binary && input.size() > 8) {
          // Edit the header text and keep the length field consistent half the time.
          std::string rest = input.substr(8);
          mutate_once(rest, rng, corpus);
          std::uint64_t n = 0;
          std::memcpy(&n, input.data(), 8);
          const std::int64_t grew = static_cast<std::int64_t>(rest.size()) - static_cast<std::int64_t>(input.size() - 8);
          if (pick(rng, 2) == 0) n += static_cast<std::uint64_t>(grew);
          input = le64(n) + rest;
        } else {
          mutate_once(input, rng, corpus);
        }
      }
      const std::uint64_t before = stats.accepted;
      classify(t.name, input, [&] { t.run(input); }, stats);
      if (stats.accepted > before && corpus.size() < 256 && input.size() < 4096) corpus.push_back(input);
    }
  }
  return stats;
}

std::string hex(const std::string& s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s.substr(0, 512)) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

}  // namespace
}  // namespace genesis::fuzz

#ifdef GENESIS_FUZZ_MAIN

// fuzz_hf ITERATIONS [SEED]: ITERATIONS mutated inputs per target; exit 1 on any failure, each
// failing input saved as fuzz-failure-N.bin in the working directory.
int main(int argc, char** argv) {
  using namespace genesis::fuzz;
  const std::uint64_t iterations = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const auto start = std::chrono::steady_clock::now();
  const Stats stats = fuzz(iterations, seed);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz_hf: %llu inputs (%llu per target, seed %llu) in %.1f s: %llu accepted, %llu refused with a "
              "genesis error, %zu failures\n",
              static_cast<unsigned long long>(stats.runs), static_cast<unsigned long long>(iterations),
              static_cast<unsigned long long>(seed), seconds, static_cast<unsigned long long>(stats.accepted),
              static_cast<unsigned long long>(stats.refused), stats.failures.size());
  for (const auto& [target, counts] : stats.by_target)
    std::printf("  %-20s %llu accepted, %llu refused\n", target.c_str(), static_cast<unsigned long long>(counts.first),
                static_cast<unsigned long long>(counts.second));
  for (std::size_t i = 0; i < stats.failures.size() && i < 20; ++i) {
    const Failure& f = stats.failures[i];
    std::printf("FAIL [%s] %s\n  input (hex, first 512 bytes): %s\n", f.target.c_str(), f.what.c_str(),
                hex(f.input).c_str());
    const std::string file = "fuzz-failure-" + std::to_string(i) + ".bin";
    if (std::FILE* out = std::fopen(file.c_str(), "wb")) {
      std::fwrite(f.input.data(), 1, f.input.size(), out);
      std::fclose(out);
    }
  }
  return stats.failures.empty() ? 0 : 1;
}

#else

namespace genesis::fuzz {
namespace {

void report(const Stats& stats) {
  for (const Failure& f : stats.failures) {
    UNSCOPED_INFO("[" << f.target << "] " << f.what << "\n  input (hex): " << hex(f.input));
  }
  CHECK(stats.failures.empty());
}

TEST_CASE("hf fuzz: mutated headers, configs and indexes give a result or one genesis error", "[hf_fuzz]") {
  const Stats stats = fuzz(20000, 20260112);
  INFO(stats.runs << " inputs: " << stats.accepted << " accepted, " << stats.refused << " refused");
  report(stats);
  // The mutations reach both sides: some inputs stay valid, most are refused.
  CHECK(stats.accepted > 100);
  CHECK(stats.refused > stats.runs / 2);
}

// Whole files through the two readers that use the checks: load_safetensors and the mapped
// HfWeights (which then reads every tensor it accepted, through the mapping).
TEST_CASE("hf fuzz: mutated files through load_safetensors and HfWeights", "[hf_fuzz]") {
  testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "model.safetensors";
  Rng rng(7);
  const std::vector<std::string> seeds = safetensors_seeds();
  Stats stats;
  for (int i = 0; i < 1500; ++i) {
    std::string input = seeds[pick(rng, seeds.size())];
    for (std::size_t k = 0, n = 1 + pick(rng, 3); k < n; ++k) {
      if (pick(rng, 4) == 0) mutate_length(input, rng);
      else mutate_once(input, rng, seeds);
    }
    std::ofstream(file, std::ios::binary | std::ios::trunc) << input;
    classify("load_safetensors", input, [&] { ckpt::load_safetensors(file); }, stats);
    classify("HfWeights", input, [&] {
      const ckpt::HfWeights w(dir.path());
      for (const std::string& name : w.names()) {
        if (!w.contains(name)) throw std::logic_error("names() and contains() disagree");
        (void)w.shape(name);
        try {
          w.read(name, DType::f32);
        } catch (const NotSupported&) {  // a dtype genesis does not hold: listed, not read
        }
      }
    }, stats);
  }
  INFO(stats.runs << " reads: " << stats.accepted << " accepted, " << stats.refused << " refused");
  report(stats);
  CHECK(stats.accepted > 10);
}

}  // namespace
}  // namespace genesis::fuzz

#endif
