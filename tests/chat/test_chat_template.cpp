// ChatTemplate's promises that tests/chat/compare.sh (byte equality with jinja2) does not cover:
// errors name the template, its line and the construct; raise_exception's message comes out
// exactly; each limit trips with a message naming it; generation spans are byte ranges; special
// tokens come from tokenizer_config.json; templates are found as transformers finds them; and
// renders on many threads at once agree.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "genesis/chat/chat_template.hpp"
#include "support/cli_run.hpp"

namespace genesis::chat {
namespace {

using nlohmann::ordered_json;

const ordered_json kChat = ordered_json::parse(
    R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello, wörld!"}, {"role": "user", "content": "Bye"}])");

std::string render(const ChatTemplate& t, const ordered_json& kwargs = ordered_json::object(),
                   bool add_generation_prompt = false) {
  RenderInput input;
  input.messages = &kChat;
  input.kwargs = &kwargs;
  input.add_generation_prompt = add_generation_prompt;
  return t.render(input).text;
}

std::string render_source(const std::string& source) {
  return render(ChatTemplate::from_source(source, "test"));
}

// The message a load of `source` fails with.
std::string load_error(const std::string& source) {
  try {
    ChatTemplate::from_source(source, "my template");
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("the template loaded: " << source);
  return {};
}

// The ChatTemplateError a render of `source` fails with.
ChatTemplateError render_error(const std::string& source, const ChatTemplateLimits& limits = {}) {
  ChatTemplate t = ChatTemplate::from_source(source, "my template");
  t.set_limits(limits);
  try {
    render(t);
  } catch (const ChatTemplateError& e) {
    return e;
  }
  FAIL("the template rendered: " << source);
  return ChatTemplateError("", "", 0, false);
}

using testing::TempDir;

TEST_CASE("a chat template's load errors name the template, the line and the construct", "[chat]") {
  CHECK_THAT(load_error("line 1\n{{ messages | wordwrap }}"),
             Catch::Contains("chat template (my template) line 2: unsupported filter 'wordwrap'"));
  CHECK_THAT(load_error("{{ x | frobnicate(1) }}"),
             Catch::Contains("line 1: unknown filter 'frobnicate'"));
  CHECK_THAT(load_error("\n\n{% if x is frobnicated %}{% endif %}"),
             Catch::Contains("line 3: unknown test 'frobnicated'"));
  CHECK_THAT(load_error("a\n{% for m in messages %}\n{{ 1 + }}\n{% endfor %}"),
             Catch::Contains("line 3: unexpected 'end of print statement'"));
  CHECK_THAT(load_error("{% for m in messages %}\n{{ m }}"),
             Catch::Contains("line 2: unexpected end of template, expected 'endfor' or 'else'"));
  CHECK_THAT(load_error("{% include 'other.jinja' %}"),
             Catch::Contains("unsupported tag 'include'"));
  CHECK_THAT(load_error("{% extends 'base' %}"), Catch::Contains("unsupported tag 'extends'"));
  CHECK_THAT(load_error("{% do x.append(1) %}"), Catch::Contains("unknown tag 'do'"));
  CHECK_THAT(load_error("{% for x in y recursive %}{% endfor %}"),
             Catch::Contains("unsupported: recursive for loops"));
  CHECK_THAT(load_error("{{ f(*args) }}"), Catch::Contains("unsupported: *args"));
  CHECK_THAT(load_error("{% break %}"), Catch::Contains("'break' outside a for loop"));
  CHECK_THAT(load_error("{# never closed"), Catch::Contains("line 1: missing end of comment tag"));
  CHECK_THAT(load_error("{{ (1 }}"), Catch::Contains("unexpected '}', expected ')'"));
  CHECK_THAT(load_error("{{ 'bad \\x4 escape' }}"), Catch::Contains("truncated \\x escape"));
  CHECK_THAT(load_error("ok\xff"), Catch::Contains("is not valid UTF-8"));
  CHECK_THAT(load_error("{{ 99999999999999999999 }}"), Catch::Contains("does not fit in 64 bits"));
}

TEST_CASE("raise_exception's message comes out exactly, with the template's line", "[chat]") {
  const std::string message = "Conversation roles must alternate — 交互に 😀 {{ not a tag }}";
  const ChatTemplateError e =
      render_error("{% for m in messages %}\n{% if m.role == 'user' %}{{ raise_exception('" +
                   message + "') }}{% endif %}{% endfor %}");
  CHECK(e.raised());
  CHECK(e.reason() == message);
  CHECK(e.line() == 2);
  CHECK(std::string(e.what()) == "chat template (my template) line 2: " + message);
  CHECK(e.exit_code() == kUsageExitCode);
}

TEST_CASE("a chat template's render errors say what jinja2 would", "[chat]") {
  CHECK(std::string(render_error("{{ messages[0].content.x.y }}").what()) ==
        "chat template (my template) line 1: 'str object' has no attribute 'x'");
  CHECK_THAT(render_error("{{ missing.attribute }}").reason(),
             Catch::Equals("'missing' is undefined"));
  CHECK_THAT(render_error("\n{{ 'a' + 1 }}").what(),
             Catch::Contains("line 2: can only concatenate str (not \"int\") to str"));
  CHECK_THAT(render_error("{{ messages.append(1) }}").reason(),
             Catch::Equals("access to attribute 'append' of 'list' object is unsafe."));
  CHECK_FALSE(render_error("{{ 1 // 0 }}").raised());
  CHECK_THAT(render_error("{{ x | tojson }}").reason(),
             Catch::Contains("Object of type Undefined is not JSON serializable"));
}

TEST_CASE("each limit on a chat template trips with a message naming it", "[chat]") {
  ChatTemplateLimits limits;
  limits.max_call_depth = 20;
  CHECK_THAT(
      render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", limits).reason(),
      Catch::Contains("ChatTemplateLimits::max_call_depth"));
  // Two macro calls per level: without a budget, 2^depth calls.
  limits = {};
  limits.max_steps = 100000;
  CHECK_THAT(render_error("{% macro f(n) %}{% if n < 90 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}"
                          "{% endmacro %}{{ f(0) }}",
                          limits)
                 .reason(),
             Catch::Contains("ChatTemplateLimits::max_steps"));
  CHECK_THAT(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                          "{% endfor %}")
                 .reason(),
             Catch::Contains("ChatTemplateLimits::max_steps"));
  CHECK_THAT(render_error("{{ 'a' * 10**9 }}").reason(),
             Catch::Contains("ChatTemplateLimits::max_output_bytes"));
  CHECK_THAT(render_error("{{ ['a'] * 10**9 }}").reason(),
             Catch::Contains("ChatTemplateLimits::max_steps"));
  limits = {};
  limits.max_output_bytes = 1000;
  CHECK_THAT(render_error("{% for i in range(1000) %}xx{% endfor %}", limits).reason(),
             Catch::Contains("ChatTemplateLimits::max_output_bytes"));
  CHECK_THAT(render_error("{{ range(1000000) }}").reason(), Catch::Contains("Range too big"));
  CHECK_THAT(render_error("{{ 2 ** 64 }}").reason(), Catch::Contains("64-bit"));
  CHECK_THAT(load_error("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
             Catch::Contains("nesting deeper than 200"));
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "{% if true %}";
  for (int i = 0; i < 300; ++i) deep += "{% endif %}";
  CHECK_THAT(load_error(deep), Catch::Contains("nesting deeper than 200"));
}

TEST_CASE("generation blocks give the byte ranges of what they wrote", "[chat]") {
  const ChatTemplate t = ChatTemplate::from_source(
      "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}"
      "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
      "{% generation %}{% endgeneration %}",
      "spans");
  RenderInput input;
  input.messages = &kChat;
  const Rendered out = t.render(input);
  REQUIRE(out.generation.size() == 2);
  const auto [begin, end] = out.generation[0];
  CHECK(out.text.substr(begin, end - begin) == "Hello, wörld!");
  CHECK(end - begin == std::string("Hello, wörld!").size());
  CHECK(out.generation[1] == std::make_pair(out.text.size(), out.text.size()));
}

TEST_CASE("a chat template gets the special tokens of tokenizer_config.json", "[chat]") {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "special": true},
    "eos_token": "</s>", "pad_token": null, "add_bos_token": true, "image_token": "<img>",
    "additional_special_tokens": ["<a>", {"content": "<b>"}],
    "chat_template": "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ image_token }}|{{ additional_special_tokens | join(',') }}|{{ add_bos_token is defined }}"
  })");
  const ChatTemplate t = ChatTemplate::load(dir.path());
  CHECK(render(t) == "<s>|</s>|False|<img>|<a>,<b>|False");
  CHECK(t.special_tokens()["bos_token"] == "<s>");
  // kwargs override them, as in transformers ({**special_tokens_map, **kwargs}).
  CHECK(render(t, {{"eos_token", "<end>"}}) == "<s>|<end>|False|<img>|<a>,<b>|False");
  CHECK_THROWS_WITH(render(t, {{"messages", ordered_json::array()}}),
                    Catch::Contains("kwargs may not set 'messages'"));
}

TEST_CASE("chat templates are found as transformers finds them", "[chat]") {
  SECTION("a string in tokenizer_config.json") {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"chat_template": "A{{ messages | length }}"})");
    CHECK(render(ChatTemplate::load(dir.path())) == "A4");
    CHECK_THAT(ChatTemplate::load(dir.path()).name(), Catch::EndsWith("tokenizer_config.json"));
    CHECK_THROWS_WITH(ChatTemplate::load(dir.path(), "tool_use"),
                      Catch::Contains("has one chat template, not one named 'tool_use'"));
  }
  SECTION("a list of named templates") {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"chat_template": [
      {"name": "default", "template": "D"}, {"name": "tool_use", "template": "T{{ tools }}"}]})");
    CHECK(render(ChatTemplate::load(dir.path())) == "D");
    CHECK(render(ChatTemplate::load(dir.path(), "tool_use")) == "TNone");
    CHECK_THROWS_WITH(
        ChatTemplate::load(dir.path(), "rag"),
        Catch::Contains("no chat template named 'rag' (it has 'default', 'tool_use')"));
  }
  SECTION("chat_template.jinja wins over tokenizer_config.json") {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": "</s>"})");
    dir.write("chat_template.jinja", "file {{ eos_token }}\n");
    CHECK(render(ChatTemplate::load(dir.path())) == "file </s>");
    std::filesystem::create_directory(dir.path() / "additional_chat_templates");
    dir.write("additional_chat_templates/rag.jinja", "rag");
    CHECK(render(ChatTemplate::load(dir.path(), "rag")) == "rag");
  }
  SECTION("a template file given in place of the directory's") {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"chat_template": "config", "bos_token": "<s>"})");
    dir.write("other.jinja", "{{ bos_token }}other");
    CHECK(render(ChatTemplate::from_file(dir.path() / "other.jinja", dir.path())) == "<s>other");
    CHECK_THROWS_AS(ChatTemplate::from_file(dir.path() / "missing.jinja", dir.path()), IoError);
  }
  SECTION("none") {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": null})");
    CHECK_FALSE(ChatTemplate::find(dir.path()).has_value());
    CHECK_THROWS_WITH(ChatTemplate::load(dir.path()),
                      Catch::Contains(dir.path().string() + " has no chat template"));
    TempDir empty;
    CHECK_FALSE(ChatTemplate::find(empty.path()).has_value());
  }
  SECTION("a broken tokenizer_config.json is named") {
    TempDir dir;
    dir.write("tokenizer_config.json", "{\"chat_template\": ");
    CHECK_THROWS_AS(ChatTemplate::find(dir.path()), ConfigError);
    CHECK_THROWS_WITH(ChatTemplate::find(dir.path()),
                      Catch::Contains("tokenizer_config.json is not valid JSON"));
  }
}

TEST_CASE("a chat template's variables are those transformers passes", "[chat]") {
  const ChatTemplate t = ChatTemplate::from_source(
      "{{ tools }}|{{ tools is defined }}|{{ documents }}|{{ add_generation_prompt }}|"
      "{{ enable_thinking is defined }}|{{ strftime_now('%Y-%m-%d %H:%M') }}",
      "variables");
  RenderInput input;
  input.messages = &kChat;
  input.now = 1721736000;  // 2024-07-23 12:00 UTC
  const std::string text = t.render(input).text;
  CHECK_THAT(text, Catch::StartsWith("None|True|None|False|False|2024-07-2"));
  const ordered_json tools = ordered_json::parse(R"([{"name": "f"}])");
  const ordered_json kwargs = {{"enable_thinking", false}};
  input.tools = &tools;
  input.kwargs = &kwargs;
  input.add_generation_prompt = true;
  CHECK_THAT(t.render(input).text, Catch::StartsWith("[{'name': 'f'}]|True|None|True|True|"));
}

TEST_CASE("a chat template renders the same on many threads at once", "[chat]") {
  const ChatTemplate t = ChatTemplate::from_source(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ m.role | upper }}:{{ m.content | tojson }}{% endfor %}{{ ns.n }}{{ range(50) | sum }}",
      "threads");
  const std::string expected = render(t);
  std::vector<std::string> results(8);
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < results.size(); ++i)
      threads.emplace_back([&, i] {
        for (int k = 0; k < 200; ++k) results[i] = render(t);
      });
  }
  for (const std::string& r : results) CHECK(r == expected);
}

}  // namespace
}  // namespace genesis::chat
