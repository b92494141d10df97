// Tests of Hugging Face weights directories: single-file and sharded directories written by
// HfWeightsWriter (shards split as huggingface_hub splits them) read back by HfWeights bit for bit,
// dtype conversion, slice reads (also of unaligned data), every index fault, Hub cache resolution
// against a fake cache, and max_shard_size parsing.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "support/scoped_env.hpp"
#include "support/thrown_message.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ckpt::HfTensorPlan;
using ckpt::HfWeights;
using ckpt::HfWeightsWriter;
using Json = nlohmann::json;

std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw_data()), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
}

// Distinct, exactly representable values (multiples of 1/8 below 2^8 survive bf16 and f16).
Tensor ramp(Shape shape, DType dtype, float start) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + 0.125f * static_cast<float>(i % 1000);
  return Tensor::from_vector<float>(v, shape).to(dtype);
}

struct Model {
  std::vector<HfTensorPlan> plan;
  std::vector<Tensor> tensors;
};

// A small model's tensors in three dtypes, one 0-d and one empty.
Model small_model() {
  Model m;
  const auto add = [&](const std::string& name, Tensor t) {
    m.plan.push_back({name, t.dtype(), t.shape()});
    m.tensors.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", ramp({10, 4}, DType::bf16, 1.0f));
  add("model.layers.0.self_attn.q_proj.weight", ramp({4, 4}, DType::f32, -3.0f));
  add("model.layers.0.self_attn.q_proj.bias", ramp({4}, DType::f16, 0.5f));
  add("model.norm.weight", ramp({4}, DType::f32, 2.0f));
  add("scale", Tensor::scalar(0.25, DType::f32));
  add("empty", Tensor::empty({0, 4}, DType::bf16));
  add("lm_head.weight", ramp({10, 4}, DType::bf16, -7.0f));
  return m;
}

std::vector<fs::path> export_model(const fs::path& dir, const Model& m, std::uint64_t max_shard_bytes) {
  HfWeightsWriter writer(dir, m.plan, max_shard_bytes);
  for (std::size_t i = 0; i < m.plan.size(); ++i) writer.write(m.plan[i].name, m.tensors[i]);
  return writer.finish();
}

void check_reads_back(const fs::path& dir, const Model& m) {
  const HfWeights w(dir);
  std::vector<std::string> names;
  for (const HfTensorPlan& p : m.plan) names.push_back(p.name);
  std::sort(names.begin(), names.end());
  CHECK(w.names() == names);
  for (std::size_t i = 0; i < m.plan.size(); ++i) {
    INFO(m.plan[i].name);
    REQUIRE(w.contains(m.plan[i].name));
    CHECK(w.shape(m.plan[i].name) == m.plan[i].shape);
    CHECK(w.dtype(m.plan[i].name) == m.plan[i].dtype);
    const Tensor back = w.read(m.plan[i].name, m.plan[i].dtype);
    CHECK(back.shape() == m.plan[i].shape);
    CHECK(bytes_of(back) == bytes_of(m.tensors[i]));
  }
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A safetensors file written byte by byte: header text, then `data`.
void write_raw(const fs::path& path, const std::string& header, const std::string& data) {
  std::string blob(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(blob.data(), &n, 8);
  std::ofstream(path, std::ios::binary) << blob << header << data;
}

std::string io_error(const fs::path& dir) {
  return testing::thrown_message<IoError>([&] { HfWeights w(dir); });
}

TEST_CASE("hf weights: one model.safetensors read back bit for bit", "[hf_weights]") {
  testing::TempDir dir;
  const Model m = small_model();
  const auto files = export_model(dir.path(), m, 5'000'000'000ull);
  CHECK(files == std::vector<fs::path>{dir.path() / "model.safetensors"});
  CHECK_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  check_reads_back(dir.path(), m);
  // What transformers requires of the header, and the generic reader agrees with the mapped one.
  const ckpt::SafetensorsFile f = ckpt::load_safetensors(dir.path() / "model.safetensors");
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(f.tensors.front().first == "model.embed_tokens.weight");  // the plan's order
  for (const auto& entry : fs::directory_iterator(dir.path()))
    CHECK(entry.path().extension() != ".tmp");
}

TEST_CASE("hf weights: shards split as huggingface_hub splits them, with the index", "[hf_weights]") {
  testing::TempDir dir;
  Model m;
  const auto add = [&](const std::string& name, Shape shape) {
    m.plan.push_back({name, DType::f32, shape});
    m.tensors.push_back(ramp(shape, DType::f32, static_cast<float>(m.plan.size())));
  };
  add("a", {10});   // 40 bytes
  add("b", {10});   // 40: a + b fill the first 100-byte shard to 80
  add("big", {100});  // 400 bytes, over the limit: a shard of its own, listed before a + b's
  add("c", {10});   // 80 + 40 > 100: closes a + b's shard, starts another
  add("d", {5});
  const auto files = export_model(dir.path(), m, 100);
  REQUIRE(files.size() == 4);
  CHECK(files[0] == dir.path() / "model-00001-of-00003.safetensors");
  CHECK(files[2] == dir.path() / "model-00003-of-00003.safetensors");
  CHECK(files[3] == dir.path() / "model.safetensors.index.json");
  const HfWeights w(dir.path());
  CHECK(w.file_of("big").filename() == "model-00001-of-00003.safetensors");
  CHECK(w.file_of("a").filename() == "model-00002-of-00003.safetensors");
  CHECK(w.file_of("b").filename() == "model-00002-of-00003.safetensors");
  CHECK(w.file_of("c").filename() == "model-00003-of-00003.safetensors");
  CHECK(w.file_of("d").filename() == "model-00003-of-00003.safetensors");
  const Json index = Json::parse(read_file(files[3]));
  CHECK(index.at("metadata").at("total_size") == 40 + 40 + 400 + 40 + 20);
  CHECK(index.at("weight_map").at("big") == "model-00001-of-00003.safetensors");
  check_reads_back(dir.path(), m);

  // Exporting again as one file clears the shards and the index that would shadow nothing but
  // mislead; exporting sharded again clears the single file, which transformers would prefer.
  export_model(dir.path(), m, 1 << 20);
  CHECK(fs::exists(dir.path() / "model.safetensors"));
  CHECK_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  CHECK_FALSE(fs::exists(dir.path() / "model-00001-of-00003.safetensors"));
  export_model(dir.path(), m, 100);
  CHECK_FALSE(fs::exists(dir.path() / "model.safetensors"));
  check_reads_back(dir.path(), m);
}

TEST_CASE("hf weights: conversion on write and on read", "[hf_weights]") {
  testing::TempDir dir;
  const Tensor source = Tensor::from_vector<float>({1.0f, -2.5f, 3.140625f, 1e-3f, 65504.0f, 1.0f / 3}, {2, 3});
  {
    HfWeightsWriter writer(dir.path(), {{"w_bf16", DType::bf16, {2, 3}}, {"w_f16", DType::f16, {2, 3}}}, 1 << 20);
    writer.write("w_bf16", source);
    writer.write("w_f16", source);
    writer.finish();
  }
  const HfWeights w(dir.path());
  CHECK(w.dtype("w_bf16") == DType::bf16);
  CHECK(w.dtype("w_f16") == DType::f16);
  CHECK(bytes_of(w.read("w_bf16", DType::bf16)) == bytes_of(source.to(DType::bf16)));
  CHECK(bytes_of(w.read("w_f16", DType::f16)) == bytes_of(source.to(DType::f16)));
  CHECK(w.read("w_bf16", DType::f32).to_vector() == source.to(DType::bf16).to(DType::f32).to_vector());
  CHECK(w.read("w_f16", DType::f32).to_vector() == source.to(DType::f16).to(DType::f32).to_vector());
  CHECK(bytes_of(w.read("w_f16", DType::bf16)) == bytes_of(source.to(DType::f16).to(DType::f32).to(DType::bf16)));
}

TEST_CASE("hf weights: slice reads, also of data that is not aligned", "[hf_weights]") {
  testing::TempDir dir;
  const Model m = small_model();
  export_model(dir.path(), m, 1 << 20);
  const HfWeights w(dir.path());
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  const std::vector<float> all = m.tensors[1].to_vector();
  const Tensor slice = w.read(name, DType::f32, 5, 7);
  CHECK(slice.shape() == Shape{7});
  CHECK(slice.to_vector() == std::vector<float>(all.begin() + 5, all.begin() + 12));
  CHECK(w.read(name, DType::f32, 16, 0).numel() == 0);
  CHECK(w.read("model.embed_tokens.weight", DType::f32, 39, 1).to_vector() ==
        std::vector<float>{m.tensors[0].to(DType::f32).to_vector()[39]});
  CHECK_THROWS_AS(w.read(name, DType::f32, 10, 7), InvalidArgument);
  CHECK_THROWS_AS(w.read(name, DType::f32, -1, 2), InvalidArgument);
  CHECK_THROWS_AS(w.read(name, DType::f32, 0, -1), InvalidArgument);
  CHECK_THAT(testing::thrown_message<IoError>([&] { w.read("nope", DType::f32); }), Contains("no tensor 'nope'"));

  // A 3-byte header puts the data at file offset 11: every element is misaligned.
  testing::TempDir odd;
  const Tensor f32 = Tensor::from_vector<float>({1.5f, -2.0f, 4.25f}, {3});
  const Tensor bf16 = f32.to(DType::bf16);
  const std::string header = R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                             R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]}})";
  const std::string padded = header + std::string((8 - (8 + header.size()) % 8) % 8 + 3, ' ');
  write_raw(odd.path() / "model.safetensors", padded, bytes_of(f32) + bytes_of(bf16));
  const HfWeights u(odd.path());
  CHECK(u.read("a", DType::f32).to_vector() == f32.to_vector());
  CHECK(u.read("a", DType::f16, 1, 2).to_vector() == std::vector<float>{-2.0f, 4.25f});
  CHECK(u.read("b", DType::f32).to_vector() == f32.to_vector());
}

TEST_CASE("hf weights: a dtype genesis does not hold is listed but not read", "[hf_weights]") {
  testing::TempDir dir;
  write_raw(dir.path() / "model.safetensors",
            R"({"u":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            std::string(4, '\x07') + bytes_of(Tensor::from_vector<float>({2.0f}, {1})));
  const HfWeights w(dir.path());
  CHECK(w.names() == std::vector<std::string>{"u", "w"});
  CHECK(w.shape("u") == Shape{4});
  CHECK_THROWS_AS(w.dtype("u"), NotSupported);
  CHECK_THAT(testing::thrown_message<NotSupported>([&] { w.read("u", DType::f32); }), Contains("U8"));
  CHECK(w.read("w", DType::f32).to_vector() == std::vector<float>{2.0f});
}

TEST_CASE("hf weights: every index fault is an IoError naming it", "[hf_weights]") {
  testing::TempDir dir;
  const fs::path d = dir.path();
  const fs::path index = d / "model.safetensors.index.json";
  Model m;
  for (const char* name : {"a", "b", "c"}) {
    m.plan.push_back({name, DType::f32, {4}});
    m.tensors.push_back(ramp({4}, DType::f32, 1.0f));
  }
  export_model(d, m, 16);  // one tensor per shard
  const std::string good = read_file(index);
  const auto with_map = [&](const std::string& map) {
    std::ofstream(index) << R"({"metadata": {"total_size": 48}, "weight_map": )" + map + "}";
  };

  CHECK_THAT(io_error(d / "absent"), Contains("not a directory"));
  testing::TempDir empty;
  CHECK_THAT(io_error(empty.path()), Contains("neither model.safetensors nor model.safetensors.index.json"));

  with_map(R"({"a": "model-00001-of-00003.safetensors", "b": "model-00002-of-00003.safetensors",
               "c": "model-00009-of-00009.safetensors"})");
  CHECK_THAT(io_error(d), Contains("shard 'model-00009-of-00009.safetensors' is missing"));

  with_map(R"({"a": "model-00001-of-00003.safetensors", "b": "model-00001-of-00003.safetensors",
               "c": "model-00003-of-00003.safetensors"})");
  CHECK_THAT(io_error(d), Contains("lists tensor 'b' in 'model-00001-of-00003.safetensors', which does not hold it"));

  with_map(R"({"a": "../model-00001-of-00003.safetensors"})");
  CHECK_THAT(io_error(d), Contains("is not a relative path inside the model directory"));
  with_map(R"({"a": "/etc/passwd"})");
  CHECK_THAT(io_error(d), Contains("shard file '/etc/passwd'"));
  with_map(R"({"a": "sub/../../x.safetensors"})");
  CHECK_THAT(io_error(d), Contains("not a relative path inside"));
  with_map(R"({"a": "model-00001-of-00003.safetensors", "a": "model-00002-of-00003.safetensors"})");
  CHECK_THAT(io_error(d), Contains("duplicate key \"a\""));
  with_map(R"({"a": 3})");
  CHECK_THAT(io_error(d), Contains("the shard file is not a string"));
  with_map("{}");
  CHECK_THAT(io_error(d), Contains("lists no tensors"));
  with_map(R"({"a": "."})");
  CHECK_THAT(io_error(d), Contains("not a regular file"));
  std::ofstream(index) << "{\"weight_map\": ";
  CHECK_THAT(io_error(d), Contains("not valid JSON") && Contains(index.string()));

  // A name in two shards: the second shard rewritten to hold "a" as well.
  std::ofstream(index) << good;
  ckpt::save_safetensors(d / "model-00002-of-00003.safetensors",
                         {{"a", Tensor::zeros({4})}, {"b", Tensor::zeros({4})}}, {{"format", "pt"}});
  CHECK_THAT(io_error(d), Contains("tensor 'a' is in both"));

  // A shard whose header the safetensors checks refuse.
  ckpt::save_safetensors(d / "model-00002-of-00003.safetensors", {{"b", Tensor::zeros({4})}});
  std::ofstream(d / "model-00002-of-00003.safetensors", std::ios::app) << "trailing";
  CHECK_THAT(io_error(d), Contains("model-00002-of-00003.safetensors") && Contains("covered exactly"));
}

TEST_CASE("hf weights: the writer holds callers to the plan", "[hf_weights]") {
  testing::TempDir dir;
  const std::vector<HfTensorPlan> plan = {{"a", DType::f32, {2}}, {"b", DType::bf16, {3}}};
  {
    HfWeightsWriter w(dir.path(), plan, 1 << 20);
    CHECK_THROWS_AS(w.write("b", Tensor::zeros({3})), InvalidArgument);
    CHECK_THROWS_AS(w.write("a", Tensor::zeros({3})), InvalidArgument);
    w.write("a", Tensor::zeros({2}));
    CHECK_THROWS_AS(w.finish(), InvalidArgument);
  }  // abandoned: no temporary file stays
  for (const auto& entry : fs::directory_iterator(dir.path())) FAIL("left behind: " << entry.path());
  CHECK_THROWS_AS(HfWeightsWriter(dir.path(), {{"a", DType::f32, {2}}, {"a", DType::f32, {2}}}, 100), InvalidArgument);
  CHECK_THROWS_AS(HfWeightsWriter(dir.path(), plan, 0), InvalidArgument);
  HfWeightsWriter w(dir.path(), {}, 100);  // an empty plan still writes a loadable file
  CHECK(w.finish() == std::vector<fs::path>{dir.path() / "model.safetensors"});
  CHECK(HfWeights(dir.path()).names().empty());
}

TEST_CASE("hf weights: resolve_pretrained finds Hub ids in the local cache", "[hf_weights]") {
  testing::TempDir cache;
  const fs::path repo = cache.path() / "models--Qwen--Qwen3-0.6B";
  const fs::path snapshot = repo / "snapshots" / "c1899de289a04d12100db370d81485cdf75e47ca";
  fs::create_directories(snapshot);
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "c1899de289a04d12100db370d81485cdf75e47ca";
  std::ofstream(snapshot / "config.json") << "{}";
  testing::ScopedEnv env({{"HF_HUB_CACHE", cache.path().string()}, {"HUGGINGFACE_HUB_CACHE", std::nullopt}});

  CHECK(ckpt::resolve_pretrained("Qwen/Qwen3-0.6B", "model.init_from") == snapshot);
  CHECK(ckpt::resolve_pretrained(snapshot.string(), "model.init_from") == snapshot);  // a path as given
  const std::string missing =
      testing::thrown_message<ConfigError>([] { ckpt::resolve_pretrained("Org/Missing", "model.init_from"); });
  CHECK_THAT(missing, Contains("model.init_from = 'Org/Missing'") &&
                          Contains((cache.path() / "models--Org--Missing" / "refs" / "main").string()) &&
                          Contains("huggingface-cli download Org/Missing"));
  CHECK_THAT(testing::thrown_message<ConfigError>([] { ckpt::resolve_pretrained("./no/such/dir", "k"); }),
             Contains("no such file or directory"));
  CHECK_THROWS_AS(ckpt::resolve_pretrained("", "k"), ConfigError);

  // A ref naming a snapshot that is not there, or one that would lead outside the cache.
  std::ofstream(repo / "refs" / "main") << "../../elsewhere";
  CHECK_THROWS_AS(ckpt::resolve_pretrained("Qwen/Qwen3-0.6B", "k"), ConfigError);

  // HF_HOME/hub when HF_HUB_CACHE is unset; a canonical id without an organisation; no refs/main
  // but a single snapshot.
  testing::TempDir home;
  const fs::path gpt2 = home.path() / "hub" / "models--gpt2" / "snapshots" / "abc";
  fs::create_directories(gpt2);
  testing::ScopedEnv env2({{"HF_HUB_CACHE", std::nullopt}, {"HF_HOME", home.path().string()}});
  CHECK(ckpt::resolve_pretrained("gpt2", "k") == gpt2);
}

TEST_CASE("hf weights: max_shard_size as transformers reads it", "[hf_weights]") {
  CHECK(ckpt::parse_shard_size("5GB") == 5'000'000'000ull);
  CHECK(ckpt::parse_shard_size("500MB") == 500'000'000ull);
  CHECK(ckpt::parse_shard_size("10KB") == 10'000ull);
  CHECK(ckpt::parse_shard_size("2GiB") == 2ull << 30);
  CHECK(ckpt::parse_shard_size("3mib") == 3ull << 20);
  CHECK(ckpt::parse_shard_size("1KiB") == 1024);
  CHECK(ckpt::parse_shard_size("1000") == 1000);
  CHECK(ckpt::parse_shard_size("8Gb") == 1'000'000'000ull);  // bits
  CHECK(ckpt::parse_shard_size("5gB") == 5'000'000'000ull);
  for (const char* bad : {"", "GB", "5XB", "-5GB", "5.5GB", "0", "0GB", " 5GB", "99999999999999999999", "20000000000GB"}) {
    INFO(bad);
    CHECK_THROWS_AS(ckpt::parse_shard_size(bad), InvalidArgument);
  }
}

}  // namespace
}  // namespace genesis
