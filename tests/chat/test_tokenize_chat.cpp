// `genesis tokenize` on conversation lines, as a user runs it: a {"messages": ...} line becomes
// the tokenizer's chat template's text and its ids (no special tokens added); a conversation the
// template refuses fails that line alone, with its reason on stderr; a tokenizer without a
// template says to give --chat-template, which replaces the tokenizer's own.
// tests/chat/tokenize_compare.sh checks the same against jinja2 and tokenizers on real models.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"

namespace {

using namespace genesis::testing;

// A four-token BPE ("a" "b" merge into "ab") with the added token <s>.
const char* kTokenizer = R"({
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3}, "merges": ["a b"],
            "unk_token": "<unk>", "fuse_unk": true},
  "added_tokens": [{"id": 4, "content": "<s>", "special": true}],
  "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null})";

std::string config_with(const std::string& chat_template) {
  return nlohmann::json{{"bos_token", "<s>"}, {"chat_template", chat_template}}.dump();
}

TEST_CASE("genesis tokenize renders conversation lines through the chat template", "[chat]") {
  TempDir dir;
  dir.write("tokenizer.json", kTokenizer);
  dir.write("tokenizer_config.json",
            config_with("{% for m in messages %}{% if m.role == 'bad' %}"
                        "{{ raise_exception('no bad roles, please') }}{% endif %}"
                        "{{ m.content }}{% endfor %}{% if add_generation_prompt %}{{ bos_token }}"
                        "{% endif %}{{ kwargs_seen | default('') }}"));
  const auto input = dir.write("in.jsonl",
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"ab\"}], "
                               "\"add_generation_prompt\": true}\n"
                               "{\"messages\": [{\"role\": \"bad\", \"content\": \"a\"}]}\n"
                               "{\"text\": \"ab\"}\n"
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"b\"}], "
                               "\"kwargs\": {\"kwargs_seen\": \"a\"}}\n"
                               "{\"messages\": \"not a list\"}\n");
  const CliResult r = run_process(
      {GENESIS_TEST_BIN, "tokenize", dir.path().string(), "-i", input.string(), "--threads", "2"});
  CHECK(r.exit_code == 1);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "{\"text\":\"ab<s>\",\"ids\":[2,4]}");
  CHECK_THAT(lines[1], Catch::StartsWith("{\"error\":\"chat template (") &&
                           Catch::Contains("line 1: no bad roles, please"));
  CHECK(lines[2] == "{\"ids\":[2]}");
  CHECK(lines[3] == "{\"text\":\"ba\",\"ids\":[1,0]}");
  CHECK_THAT(lines[4], Catch::Contains("\\\"messages\\\" must be a list"));
  CHECK_THAT(r.err, Catch::Contains(input.string() + ":2: chat template (") &&
                        Catch::Contains("no bad roles, please"));

  // --chat-template replaces the tokenizer's own; the special tokens stay the directory's.
  const auto other = dir.write("other.jinja", "{{ bos_token }}{{ messages[0].content }}");
  const auto one =
      dir.write("one.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"ab\"}]}\n");
  const CliResult o = run_process({GENESIS_TEST_BIN, "tokenize", dir.path().string(), "-i",
                                   one.string(), "--chat-template", other.string()});
  CHECK(o.exit_code == 0);
  CHECK(lines_of(o.out) == std::vector<std::string>{"{\"text\":\"<s>ab\",\"ids\":[4,2]}"});
}

TEST_CASE("genesis tokenize without a chat template says to give one", "[chat]") {
  TempDir dir;
  const auto file = dir.write("tokenizer.json", kTokenizer);
  const auto input = dir.write("in.jsonl",
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"ab\"}]}\n"
                               "{\"text\": \"ab\"}\n");
  const CliResult r =
      run_process({GENESIS_TEST_BIN, "tokenize", file.string(), "-i", input.string()});
  CHECK(r.exit_code == 1);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0],
             Catch::Contains("the tokenizer " + file.string() +
                             " has no chat template; give one with --chat-template FILE"));
  CHECK(lines[1] == "{\"ids\":[2]}");

  // A template that does not parse fails at once when given, naming its line.
  const auto broken = dir.write("broken.jinja", "ok\n{% for %}");
  const CliResult b = run_process({GENESIS_TEST_BIN, "tokenize", file.string(), "-i",
                                   input.string(), "--chat-template", broken.string()});
  CHECK(b.exit_code == 2);
  CHECK_THAT(b.err, Catch::Contains("broken.jinja) line 2"));
}

}  // namespace
