// What a user sees when a tokenizer file or an input line is wrong: one clear error naming the
// component, the file or the line, never a silent fallback; and `genesis tokenize` keeping its
// output line-aligned with its input when some lines fail.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/tokenizer/tokenizer.hpp"
#include "support/cli_run.hpp"

using genesis::tokenizer::Tokenizer;
using nlohmann::json;

namespace {

// A four-token BPE: "a" "b" merge into "ab"; anything else is <unk>.
json tiny() {
  return json::parse(R"({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3}, "merges": ["a b"],
              "unk_token": "<unk>", "fuse_unk": true},
    "added_tokens": [{"id": 4, "content": "<s>", "special": true}],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null})");
}

std::string refusal(const json& file) {
  try {
    Tokenizer::from_json(file.dump(), "tokenizer.json");
  } catch (const genesis::Error& e) {
    return e.what();
  }
  return "(loaded)";
}

using Ids = std::vector<std::int32_t>;

}  // namespace

TEST_CASE("a tiny BPE tokenizer.json: merges, fused unknown characters and an added token") {
  const Tokenizer t = Tokenizer::from_json(tiny().dump(), "tiny");
  CHECK(t.encode("ab") == Ids{2});
  CHECK(t.encode("abxyb") == Ids{2, 3, 1});  // "xy" fuse into one <unk>
  CHECK(t.encode("a<s>b") == Ids{0, 4, 1});
  CHECK(t.vocab_size() == 5);
  CHECK(t.is_special(4));
  CHECK(t.decode(Ids{2, 4}) == "ab <s>");  // no decoder: tokens joined by spaces
}

TEST_CASE("components genesis does not implement are refused by name") {
  json f = tiny();
  f["model"]["type"] = "WordPiece";
  CHECK_THAT(refusal(f), Catch::Contains("model type 'WordPiece' is not supported"));
  f = tiny();
  f["normalizer"] = {{"type", "BertNormalizer"}};
  CHECK_THAT(refusal(f), Catch::Contains("normalizer type 'BertNormalizer' is not supported"));
  f = tiny();
  f["pre_tokenizer"] = {{"type", "Whitespace"}};
  CHECK_THAT(refusal(f), Catch::Contains("pre_tokenizer type 'Whitespace' is not supported"));
  f = tiny();
  f["decoder"] = {{"type", "WordPiece"}};
  CHECK_THAT(refusal(f), Catch::Contains("decoder type 'WordPiece' is not supported"));
  f = tiny();
  f["post_processor"] = {{"type", "RobertaProcessing"}};
  CHECK_THAT(refusal(f), Catch::Contains("post_processor type 'RobertaProcessing' is not"));
  f = tiny();
  f["model"]["dropout"] = 0.1;
  CHECK_THAT(refusal(f), Catch::Contains("\"dropout\" 0.1 is not supported"));
  f = tiny();
  f["truncation"] = {{"max_length", 512}};
  CHECK_THAT(refusal(f), Catch::Contains("\"truncation\" is set"));
}

TEST_CASE("a malformed tokenizer.json says what is wrong and where") {
  json f = tiny();
  f["model"]["merges"] = {"a c"};
  CHECK_THAT(refusal(f), Catch::Contains("merge 1 ('a' 'c') names 'c', which is not in the "
                                         "vocabulary"));
  f = tiny();
  f["model"]["merges"] = {"abc"};
  CHECK_THAT(refusal(f), Catch::Contains("merge 1 'abc' is not two tokens"));
  f = tiny();
  f["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}};
  CHECK_THAT(refusal(f), Catch::Contains("tokenizer regex '(a' does not compile"));
  f = tiny();
  f["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Apart"}};
  CHECK_THAT(refusal(f), Catch::Contains("unknown behavior 'Apart'"));
  CHECK_THROWS_WITH(Tokenizer::from_json("{\"model\": ", "broken.json"),
                    Catch::Contains("broken.json: not valid JSON"));
}

TEST_CASE("invalid UTF-8 and unknown ids are errors, not guesses") {
  const Tokenizer t = Tokenizer::from_json(tiny().dump(), "tiny");
  CHECK_THROWS_WITH(t.encode("a\xC3(b"), "the text is not valid UTF-8 (byte 1)");
  CHECK_THROWS_WITH(t.decode(Ids{0, 99}), "id 99 is not a token of this tokenizer");
  genesis::testing::TempDir dir;
  CHECK_THROWS_WITH(Tokenizer::load(dir.path() / "missing.json"), Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(Tokenizer::load(dir.path()),
                    Catch::Contains("holds neither tokenizer.json nor vocab.json + merges.txt"));
}

TEST_CASE("genesis tokenize answers a failing line in its place and exits 1") {
  using namespace genesis::testing;
  TempDir dir;
  const auto file = dir.write("tokenizer.json", tiny().dump());
  const auto input = dir.write("in.jsonl", "{\"text\": \"ab\"}\nnot json\n{\"text\": \"a\xC3(\"}\n"
                                           "\n{\"text\": \"b<s>\"}\n");
  const CliResult r = run_process({GENESIS_TEST_BIN, "tokenize", file.string(), "-i",
                                   input.string(), "--threads", "2"});
  CHECK(r.exit_code == 1);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "{\"ids\":[2]}");
  CHECK_THAT(lines[1], Catch::StartsWith("{\"error\":\"the line is not JSON"));
  CHECK(lines[2] == "{\"error\":\"the line is not valid UTF-8\"}");
  CHECK(lines[3].empty());
  CHECK(lines[4] == "{\"ids\":[1,4]}");
  CHECK_THAT(r.err, Catch::Contains(input.string() + ":3: the line is not valid UTF-8"));

  const auto ids = dir.write("ids.jsonl", "{\"ids\": [0, 1, 4]}\n{\"ids\": [7]}\n");
  const CliResult d =
      run_process({GENESIS_TEST_BIN, "tokenize", file.string(), "-i", ids.string(), "--decode"});
  CHECK(d.exit_code == 1);
  CHECK(lines_of(d.out) == std::vector<std::string>{
                               "{\"text\":\"a b <s>\"}",
                               "{\"error\":\"id 7 is not a token of this tokenizer\"}"});
  const CliResult missing = run_process({GENESIS_TEST_BIN, "tokenize", "nobody/no-such-model"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("nobody/no-such-model"));
}
