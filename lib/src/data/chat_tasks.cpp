// The built-in tasks as conversations for a subword tokenizer: the rules of the character tasks
// applied to whole words, drawn from a fixed list of common English words (most of them one
// token of a 32k vocabulary), so a small model learns to move and transform tokens rather than
// letters, and the chat template and its end-of-turn token are part of every example.
#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/tensor/random.hpp"
#include "data_rows.hpp"
#include "task_cycle.hpp"

namespace genesis::data {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kWords[] = {
    "apple", "river", "stone", "cloud", "bread", "water", "table", "green", "house", "light",
    "music", "paper", "plant", "north", "south", "chair", "train", "phone", "glass", "heart",
    "money", "night", "ocean", "party", "queen", "sugar", "tiger", "voice", "world", "bird",
    "book",  "cake",  "door",  "fish",  "gold",  "hand",  "king",  "lamp",  "moon",  "rain",
    "ship",  "snow",  "star",  "tree",  "wind",  "wolf",  "milk",  "road"};
constexpr std::int64_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

std::int64_t draw(Generator& gen, std::int64_t lo, std::int64_t hi) {  // uniform in [lo, hi]
  return lo + static_cast<std::int64_t>(gen.next_u64() % static_cast<std::uint64_t>(hi - lo + 1));
}

std::vector<std::string> words(Generator& gen, std::int64_t lo, std::int64_t hi) {
  std::vector<std::string> out(static_cast<std::size_t>(draw(gen, lo, hi)));
  for (auto& w : out) w = kWords[draw(gen, 0, kWordCount - 1)];
  return out;
}

std::string joined(const std::vector<std::string>& ws) {
  std::string out;
  for (const auto& w : ws) out += (out.empty() ? "" : " ") + w;
  return out;
}

// The user's request and the answer expected.
std::pair<std::string, std::string> make(const std::string& task, Generator& gen) {
  if (task == "add") {
    const std::int64_t a = draw(gen, 0, 99), b = draw(gen, 0, 99);
    return {"What is " + std::to_string(a) + " plus " + std::to_string(b) + "?",
            std::to_string(a + b)};
  }
  std::vector<std::string> ws = words(gen, task == "upper" ? 1 : 2, task == "upper" ? 3 : 4);
  const std::string given = joined(ws);
  if (task == "reverse") {
    std::reverse(ws.begin(), ws.end());
    return {"Reverse the order of these words: " + given, joined(ws)};
  }
  if (task == "sort") {
    std::sort(ws.begin(), ws.end());
    return {"Sort these words alphabetically: " + given, joined(ws)};
  }
  if (task == "upper") {
    std::string answer = given;
    for (char& c : answer) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return {"Write these words in capital letters: " + given, answer};
  }
  return {"Repeat these words: " + given, given};  // copy
}

SftExample conversation(const std::string& task, const std::string& request,
                        const std::string& answer) {
  SftExample e;
  e.form = ExampleForm::conversation;
  e.messages = std::make_shared<const Json>(Json::array(
      {Json{{"role", "user"}, {"content", request}}, Json{{"role", "assistant"}, {"content", answer}}}));
  e.prompt = rows::prompt_lines(*e.messages, 1, true);  // as a conversation read from a file
  e.response = answer;
  e.origin = "the built-in chat task \"" + task + "\" (\"" + request + "\")";
  return e;
}

}  // namespace

std::vector<std::string> chat_task_names() { return {"reverse", "sort", "copy", "upper", "add"}; }

std::vector<SftExample> generate_chat_tasks(const std::vector<std::string>& tasks,
                                            std::int64_t count, std::uint64_t seed,
                                            const std::vector<std::string>& exclude) {
  return detail::cycle_tasks(tasks, chat_task_names(), "chat", count, seed, exclude,
                             [](const std::string& task, Generator& gen) {
                               const auto [request, answer] = make(task, gen);
                               return conversation(task, request, answer);
                             });
}

}  // namespace genesis::data
