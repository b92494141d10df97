// The built-in instruction tasks: small string and arithmetic transformations a tiny GPT learns
// in minutes on a CPU, with answers checkable by exact match. Words are random lowercase letter
// strings, so the model must learn the rule rather than memorise a vocabulary.
#include <algorithm>
#include <cctype>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/tensor/random.hpp"
#include "task_cycle.hpp"

namespace genesis::data {
namespace {

constexpr std::int64_t kMinWord = 3, kMaxWord = 7;

std::int64_t draw(Generator& gen, std::int64_t lo, std::int64_t hi) {  // uniform in [lo, hi]
  return lo + static_cast<std::int64_t>(gen.next_u64() % static_cast<std::uint64_t>(hi - lo + 1));
}

std::string word(Generator& gen) {
  std::string w(static_cast<std::size_t>(draw(gen, kMinWord, kMaxWord)), 'a');
  for (char& c : w) c = static_cast<char>('a' + draw(gen, 0, 25));
  return w;
}

SftExample make(const std::string& task, Generator& gen) {
  if (task == "add") {
    const std::int64_t a = draw(gen, 0, 999), b = draw(gen, 0, 999);
    return {"add: " + std::to_string(a) + "+" + std::to_string(b) + "\n", std::to_string(a + b)};
  }
  const std::string w = word(gen);
  std::string answer = w;
  if (task == "reverse") std::reverse(answer.begin(), answer.end());
  if (task == "sort") std::sort(answer.begin(), answer.end());
  if (task == "upper")
    for (char& c : answer) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (task == "first") answer = w.substr(0, 1);
  if (task == "last") answer = w.substr(w.size() - 1);
  return {task + ": " + w + "\n", answer};
}

// "reverse: kitten\n" as it would be typed, so an error about a prompt stays on one line.
std::string as_typed(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "\"";
}

}  // namespace

std::vector<std::string> sft_task_names() {
  return {"reverse", "sort", "copy", "upper", "add", "first", "last"};
}

std::vector<SftExample> generate_sft_tasks(const std::vector<std::string>& tasks, std::int64_t count,
                                           std::uint64_t seed, const std::vector<std::string>& exclude) {
  return detail::cycle_tasks(tasks, sft_task_names(), "SFT", count, seed, exclude,
                             [](const std::string& task, Generator& gen) {
                               SftExample e = make(task, gen);
                               e.origin = "the built-in SFT task \"" + task + "\" (prompt " +
                                          as_typed(e.prompt) + ")";
                               return e;
                             });
}

}  // namespace genesis::data
