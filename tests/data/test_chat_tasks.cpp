// The built-in chat tasks (data.source = "chat:..."): single-turn conversations whose answers
// follow each rule over whole words, the same for a seed, held-out requests kept out; and the
// chat-llama preset that trains on them, run for a few steps as a user runs it, answering a chat
// prompt through its shipped tokenizer and template.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "genesis/data/sft.hpp"
#include "genesis/data/sft_layout.hpp"
#include "genesis/data/text_tokenizer.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("chat tasks: each answer follows its rule over the request's words", "[sft][chat]") {
  const auto a = data::generate_chat_tasks(data::chat_task_names(), 100, 7);
  const auto b = data::generate_chat_tasks(data::chat_task_names(), 100, 7);
  REQUIRE(a.size() == 100);
  std::map<std::string, int> seen;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const data::SftExample& e = a[i];
    INFO(e.origin);
    REQUIRE(e.form == data::ExampleForm::conversation);
    REQUIRE(e.messages->size() == 2);
    CHECK(*e.messages == *b[i].messages);  // deterministic for a seed
    const std::string request = e.messages->at(0).at("content");
    const std::string answer = e.messages->at(1).at("content");
    CHECK(e.messages->at(0).at("role") == "user");
    CHECK(e.messages->at(1).at("role") == "assistant");
    CHECK(e.response == answer);
    ++seen[e.task];
    const std::string given = request.substr(request.find(": ") + 2);
    std::vector<std::string> words = words_of(given);
    if (e.task == "reverse") std::reverse(words.begin(), words.end());
    if (e.task == "sort") std::sort(words.begin(), words.end());
    if (e.task == "upper")
      for (auto& w : words) std::transform(w.begin(), w.end(), w.begin(), ::toupper);
    if (e.task == "add") {
      int x = 0, y = 0;
      REQUIRE(std::sscanf(request.c_str(), "What is %d plus %d?", &x, &y) == 2);
      CHECK(answer == std::to_string(x + y));
    } else {
      CHECK(words_of(answer) == words);
      CHECK(words.size() >= 1);
    }
  }
  CHECK(seen.size() == 5);  // every task, in turn
  std::vector<std::string> held_out;
  for (const auto& e : a) held_out.push_back(e.prompt);
  for (const auto& e : data::generate_chat_tasks(data::chat_task_names(), 500, 8, held_out))
    CHECK(std::find(held_out.begin(), held_out.end(), e.prompt) == held_out.end());
  CHECK_THROWS_WITH(data::generate_chat_tasks({"translate"}, 1, 0),
                    Catch::Contains("unknown chat task \"translate\""));
}

TEST_CASE("chat tasks through the chat-llama preset's tokenizer and template train on the answer "
          "and its </s>", "[sft][chat]") {
  // The template and tokenizer are compared with jinja2 and Hugging Face tokenizers by
  // chat.exact.chat_llama and chat.tokenize.chat_llama; here, which of the tokens train.
  const auto tok = data::make_text_tokenizer(
      std::string(GENESIS_TEST_SOURCE_DIR) + "/presets/chat-llama", "data.tokenizer");
  for (const data::SftExample& e : data::generate_chat_tasks(data::chat_task_names(), 10, 3)) {
    INFO(e.origin);
    const data::ExampleTokens t = data::tokenize_example(data::example_text(e, *tok, {}), *tok);
    std::vector<std::int64_t> trained, before;
    for (std::size_t i = 0; i < t.ids.size(); ++i) {
      if (t.trained[i] != 0) trained.push_back(t.ids[i]);
      else if (trained.empty()) before.push_back(t.ids[i]);
    }
    CHECK(tok->decode(trained) == e.response + "</s>");  // one run: the answer, then end of turn
    CHECK(std::count(t.trained.begin(), t.trained.end(), 1) == static_cast<long>(trained.size()));
    // Before it, the request as the template renders it, "<s>[INST] ... [/INST]".
    const nlohmann::ordered_json request = nlohmann::ordered_json::array({e.messages->at(0)});
    const std::string rendered = tok->render_chat(request, true).text;
    CHECK(rendered == "<s>[INST] " + request[0].at("content").get<std::string>() + " [/INST]");
    CHECK(before == tok->encode_continuation(rendered));
    CHECK(trained.back() == tok->end_of_text());
  }
}

TEST_CASE("the chat-llama preset trains through its shipped tokenizer and template and answers a "
          "chat prompt", "[train][hf][chat]") {
  testing::TempDir dir;
  const std::string runs = (dir.path() / "runs").string();
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "chat-llama", "-o", runs, "--set", "training.max_steps=2", "--set",
       "training.eval_batches=1", "--set", "training.per_device_train_batch_size=4", "--set",
       "training.train_batch_size=4", "--set", "data.num_samples=200"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("vocab 32000") && Catch::Contains("exact match"));
  const std::string prompts = (dir.path() / "chat.jsonl").string();
  std::ofstream(prompts)
      << R"({"messages": [{"role": "user", "content": "Reverse the order of these words: moon river"}]})"
      << "\n";
  const testing::CliResult g = testing::run_genesis(
      {"generate", runs + "/chat-llama", "-i", prompts, "--max-new-tokens", "3", "--device", "cpu"});
  INFO(g.out << g.err);
  REQUIRE(g.exit_code == 0);
  const auto line = nlohmann::json::parse(g.out);
  // Mistral's tokenizer's ids (the untrained model's answer may be anything).
  const auto ids = line.at("ids").get<std::vector<std::int64_t>>();
  REQUIRE(!ids.empty());
  for (const std::int64_t id : ids) CHECK((id >= 0 && id < 32000));
}

}  // namespace genesis
