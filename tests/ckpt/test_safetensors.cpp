// Tests of the safetensors file layer and the XXH64 checksum: round trips of every dtype (0-d and
// empty tensors, metadata, non-contiguous inputs), one test per kind of corrupt file checking that
// the error names the file and the fault, and a cross-check against an independent Python reader.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "genesis/ckpt/checksum.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"

namespace genesis {
namespace {

using Catch::Matchers::Contains;

std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const char* p = static_cast<const char*>(c.raw_data());
  return std::string(p, static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
}

// Writes a hand-made file: header length (declared, or the real one), header text, data bytes.
std::filesystem::path write_raw(const testing::TempDir& dir, const std::string& name,
                                const std::string& header, const std::string& data,
                                std::uint64_t declared_length = ~0ULL) {
  std::uint64_t n = declared_length == ~0ULL ? header.size() : declared_length;
  std::string blob(8, '\0');
  std::memcpy(blob.data(), &n, 8);
  return dir.write(name, blob + header + data);
}

// The message of the IoError that loading `path` throws ("<no error>" when none is thrown).
std::string load_error(const std::filesystem::path& path) {
  try {
    ckpt::load_safetensors(path);
  } catch (const IoError& e) {
    return e.what();
  }
  return "<no error>";
}

ckpt::NamedTensors every_dtype() {
  Tensor f32 = Tensor::from_vector<float>({1.5f, -2.25f, 3.0f, 4.0f, 5.5f, -6.0f}, {2, 3});
  return {
      {"f32", f32},
      {"f32_transposed", f32.transpose(0, 1)},  // non-contiguous: must be written row-major
      {"f16", f32.to(DType::f16)},
      {"bf16", f32.to(DType::bf16)},
      {"i32", Tensor::from_vector<std::int32_t>({7, -8, 9}, {3})},
      {"i64", Tensor::from_vector<std::int64_t>({1LL << 40, -3}, {2, 1})},
      {"bool", Tensor::from_vector<bool>({true, false, true, true}, {4})},
      {"scalar", Tensor::scalar(42.0)},
      {"empty", Tensor::empty({0, 3}, DType::f32)},
      {"empty_i64", Tensor::empty({0}, DType::i64)},
  };
}

TEST_CASE("xxhash64 matches the published reference vectors", "[ckpt]") {
  auto h = [](const std::string& s) { return ckpt::xxhash64(s.data(), s.size()); };
  CHECK(h("") == 0xEF46DB3751D8E999ULL);
  CHECK(h("a") == 0xD24EC4F1A98C6E5BULL);
  CHECK(h("abc") == 0x44BC2CF5AD770999ULL);
  CHECK(h(std::string(32, 'a')) == 0x856E843298F99AD7ULL);  // exactly one stripe
  CHECK(h("Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1ULL);  // 32 + 4 + 3
  CHECK(h("The quick brown fox jumps over the lazy dog") == 0x0B242D361FDA71BCULL);   // 32 + 8 + 3
  CHECK(h("The quick brown fox jumps over the lazy dog.") == 0x44AD33705751AD73ULL);  // 32 + 8 + 4
  CHECK(ckpt::xxhash64_hex("abc", 3) == "44bc2cf5ad770999");
  CHECK(ckpt::xxhash64_hex("", 0) == "ef46db3751d8e999");
}

TEST_CASE("safetensors round-trips every dtype, 0-d and empty tensors, and metadata", "[ckpt]") {
  testing::TempDir dir;
  const auto path = dir.path() / "model.safetensors";
  const ckpt::NamedTensors saved = every_dtype();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};
  ckpt::save_safetensors(path, saved, metadata);

  ckpt::SafetensorsFile loaded = ckpt::load_safetensors(path);
  CHECK(loaded.metadata == metadata);
  REQUIRE(loaded.tensors.size() == saved.size());
  for (std::size_t i = 0; i < saved.size(); ++i) {
    INFO("tensor " << saved[i].first);
    const Tensor& a = saved[i].second;
    const Tensor& b = loaded.tensors[i].second;
    CHECK(loaded.tensors[i].first == saved[i].first);  // header order is kept
    CHECK(b.dtype() == a.dtype());
    CHECK(b.shape() == a.shape());
    CHECK(b.is_contiguous());
    CHECK(bytes_of(b) == bytes_of(a));
  }
  CHECK(loaded.tensors[7].second.dim() == 0);
  CHECK(loaded.tensors[7].second.item<float>() == 42.0f);
  CHECK(loaded.tensors[1].second.to_vector() == std::vector<float>{1.5f, 4.0f, -2.25f, 5.5f, 3.0f, -6.0f});
}

TEST_CASE("safetensors layout follows the spec: padded header, packed data", "[ckpt]") {
  testing::TempDir dir;
  const auto path = dir.path() / "layout.safetensors";
  ckpt::save_safetensors(path, {{"a", Tensor::from_vector<float>({1, 2, 3}, {3})},
                                {"b", Tensor::from_vector<std::int32_t>({4}, {1})}});
  std::ifstream in(path, std::ios::binary);
  std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  std::memcpy(&n, blob.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(blob[8] == '{');
  CHECK(blob.size() == 8 + n + 16);  // 12 bytes of f32 then 4 of i32, back to back
  auto header = nlohmann::json::parse(blob.substr(8, n));
  CHECK(header["a"]["data_offsets"] == nlohmann::json::array({0, 12}));
  CHECK(header["b"]["data_offsets"] == nlohmann::json::array({12, 16}));
  CHECK(header["b"]["dtype"] == "I32");
  CHECK_FALSE(header.contains("__metadata__"));  // omitted when there is none
}

TEST_CASE("safetensors save rejects duplicate and reserved names", "[ckpt]") {
  testing::TempDir dir;
  const auto path = dir.path() / "bad.safetensors";
  Tensor t = Tensor::zeros({2});
  CHECK_THROWS_WITH(ckpt::save_safetensors(path, {{"w", t}, {"w", t}}),
                    Contains("duplicate tensor name 'w'") && Contains(path.string()));
  CHECK_THROWS_AS(ckpt::save_safetensors(path, {{"__metadata__", t}}), InvalidArgument);
  CHECK_THROWS_AS(ckpt::save_safetensors(dir.path() / "no/such/dir.safetensors", {{"w", t}}), IoError);
}

TEST_CASE("safetensors load names the file and the fault for each kind of corruption", "[ckpt]") {
  testing::TempDir dir;
  const std::string f32x2 = R"({"dtype":"F32","shape":[2],"data_offsets":)";
  const std::string eight(8, '\0');
  struct Case {
    const char* name;
    std::filesystem::path path;
    const char* fault;
  };
  const Case cases[] = {
      {"too short", dir.write("short.st", "abc"), "truncated header"},
      {"not json", write_raw(dir, "text.st", "hello, world", ""), "not a safetensors file"},
      {"json array", write_raw(dir, "array.st", "[1,2]", ""), "not a safetensors file"},
      {"zip file", dir.write("zip.st", "PK\x03\x04 this is some other kind of file"),
       "larger than the file"},
      {"length past end", write_raw(dir, "long.st", "{}", "", 1000), "larger than the file"},
      {"huge length", write_raw(dir, "huge.st", "{}", "", ~0ULL - 1), "larger than the file"},
      {"offsets past end", write_raw(dir, "oob.st", "{\"a\":" + f32x2 + "[0,16]}}", eight),
       "out of bounds"},
      {"offsets reversed", write_raw(dir, "rev.st", "{\"a\":" + f32x2 + "[8,0]}}", eight),
       "out of bounds"},
      {"overlap",
       write_raw(dir, "overlap.st", "{\"a\":" + f32x2 + "[0,8]},\"b\":" + f32x2 + "[4,12]}}",
                 std::string(12, '\0')),
       "overlapping"},
      {"unknown dtype",
       write_raw(dir, "f64.st", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", eight),
       "unknown dtype \"F64\""},
      {"shape/bytes", write_raw(dir, "shape.st", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
       "shape/bytes mismatch"},
      {"shape overflow",
       write_raw(dir, "ovf.st",
                 R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})",
                 eight),
       "shape/bytes mismatch"},
      {"negative dim", write_raw(dir, "neg.st", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "non-negative"},
      {"duplicate", write_raw(dir, "dup.st", "{\"a\":" + f32x2 + "[0,8]},\"a\":" + f32x2 + "[0,8]}}", eight),
       "duplicate tensor name 'a'"},
      {"missing dtype", write_raw(dir, "nodtype.st", R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight),
       "dtype"},
      {"bad metadata", write_raw(dir, "meta.st", R"({"__metadata__":{"step":12}})", ""),
       "is not a string"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string message = load_error(c.path);
    CHECK_THAT(message, Contains(c.path.string()) && Contains(c.fault));
  }
  CHECK_THAT(load_error(dir.path() / "absent.st"), Contains("absent.st") && Contains("cannot read"));
}

TEST_CASE("safetensors load applies the safetensors library's own checks", "[ckpt]") {
  testing::TempDir dir;
  const std::string eight(8, '\0');
  const std::string f32x2 = R"({"dtype":"F32","shape":[2],"data_offsets":)";
  struct Case {
    const char* name;
    std::filesystem::path path;
    const char* fault;
  };
  const Case cases[] = {
      {"header over the library's limit",
       [&] {  // a sparse file long enough for the declared length
         const auto path = write_raw(dir, "limit.st", "{}", "", 100'000'001);
         std::filesystem::resize_file(path, 8 + 100'000'001 + 16);
         return path;
       }(),
       "limit of 100000000"},
      {"not UTF-8", write_raw(dir, "utf8.st", "{\"\xff\":1}", ""), "not valid UTF-8"},
      {"overlong UTF-8", write_raw(dir, "overlong.st", "{\"\xc0\xaf\":1}", ""), "not valid UTF-8"},
      {"gap between tensors",
       write_raw(dir, "gap.st", "{\"a\":" + f32x2 + "[0,8]},\"b\":" + f32x2 + "[12,20]}}", std::string(20, '\0')),
       "leave a gap after byte 8"},
      {"first tensor not at 0", write_raw(dir, "late.st", "{\"a\":" + f32x2 + "[4,12]}}", std::string(12, '\0')),
       "leave a gap after byte 0"},
      {"bytes after the last tensor", write_raw(dir, "tail.st", "{\"a\":" + f32x2 + "[0,8]}}", eight + "polyglot"),
       "covered exactly"},
      {"data but no tensors", write_raw(dir, "nodata.st", "{}", eight), "covered exactly"},
      {"duplicate field in an entry",
       write_raw(dir, "dupfield.st", R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
       "duplicate key \"dtype\""},
      {"negative zero offset",
       write_raw(dir, "negzero.st", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-0,8]}})", eight),
       "non-negative integers"},
      {"float dimension", write_raw(dir, "float.st", R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight),
       "non-negative integers"},
      {"three offsets",
       write_raw(dir, "three.st", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", eight),
       "[begin, end]"},
      {"dtype the format lacks",
       write_raw(dir, "f65.st", R"({"a":{"dtype":"F65","shape":[2],"data_offsets":[0,8]}})", eight),
       "not one the safetensors format defines"},
      {"sub-byte dtype not ending on a byte",
       write_raw(dir, "f4.st", R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", std::string(2, '\0')),
       "byte boundary"},
      {"a valid dtype genesis does not hold",
       write_raw(dir, "u8.st", R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", eight),
       "unknown dtype \"U8\" for genesis"},
      {"NUL padding (nlohmann would stop reading at it)",
       write_raw(dir, "nul.st", std::string("{}\0\0\0\0\0\0", 8), ""), "a NUL byte at offset 2"},
      {"nested past serde's limit",
       write_raw(dir, "deep.st", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":)" +
                                     std::string(200, '[') + std::string(200, ']') + "}}",
                 eight),
       "nested deeper than 127"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK_THAT(load_error(c.path), Contains(c.path.string()) && Contains(c.fault));
  }
  // What the library accepts is accepted: whitespace around the JSON as padding, entries in any
  // order of offsets, zero-sized tensors anywhere in the order, unknown fields in an entry.
  const auto ok = write_raw(dir, "ok.st",
                            "\t\n {\"b\":" + f32x2 + "[8,16]},\"e\":{\"dtype\":\"I64\",\"shape\":[0,3],"
                            "\"data_offsets\":[8,8]},\"a\":" + f32x2 + "[0,8],\"note\":\"x\"}} \r\n",
                            std::string(16, '\0'));
  const ckpt::SafetensorsFile f = ckpt::load_safetensors(ok);
  REQUIRE(f.tensors.size() == 3);
  CHECK(f.tensors[0].first == "b");  // header order, not offset order
  CHECK(f.tensors[1].second.shape() == Shape{0, 3});
  CHECK(ckpt::load_safetensors(write_raw(dir, "empty.st", "{\"__metadata__\":null}", "")).tensors.empty());
}

TEST_CASE("safetensors files written here are read by an independent Python reader", "[ckpt]") {
  if (!std::filesystem::exists("/usr/bin/python3"))
    return testing::skip_test(testing::Need::python,
                              "/usr/bin/python3 is absent: no independent reader to compare with");
  testing::TempDir dir;
  const auto path = dir.path() / "cross.safetensors";
  // Besides every dtype, sizes that break an aligned writer: a file whose data ends short of a
  // 4 KiB block by one byte, and one crossing its 16 MiB write buffer by an odd amount.
  const std::int64_t extra = GENERATE(std::int64_t{0}, std::int64_t{4095}, std::int64_t{(16 << 20) + 3});
  INFO("extra bytes " << extra);
  ckpt::NamedTensors saved = every_dtype();
  if (extra > 0) {
    Tensor odd = Tensor::zeros({extra}, DType::boolean);
    odd.slice(0, extra - 1, extra).fill_(1.0);
    saved.emplace_back("odd", odd);
  }
  ckpt::save_safetensors(path, saved, {{"who", "genesis"}});
  REQUIRE(ckpt::load_safetensors(path).tensors.size() == saved.size());
  const std::string script = std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/ckpt/read_safetensors.py";
  testing::CliResult r = testing::run_process({"/usr/bin/python3", script, path.string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto report = nlohmann::json::parse(r.out);
  CHECK(report["metadata"] == nlohmann::json({{"who", "genesis"}}));
  REQUIRE(report["tensors"].size() == saved.size());
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const auto& entry = report["tensors"][i];
    const Tensor& t = saved[i].second;
    INFO("tensor " << saved[i].first);
    CHECK(entry["name"] == saved[i].first);
    CHECK(entry["dtype"] == ckpt::safetensors_dtype_name(t.dtype()));
    CHECK(entry["shape"].get<Shape>() == t.shape());
    double sum = 0;
    for (float v : t.to_vector()) sum += v;
    CHECK(entry["sum"].get<double>() == Approx(sum).margin(1e-6));
  }
}

}  // namespace
}  // namespace genesis
