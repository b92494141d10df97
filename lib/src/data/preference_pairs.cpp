// Generated preference pairs (a task's answer against a near miss) and the encoding of any pairs
// into (N, 2, block_size) rows, each side tokenized as an SFT example.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

#include "genesis/core/error.hpp"
#include "genesis/data/preference.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/tensor/random.hpp"

namespace genesis::data {
namespace {

std::size_t draw(Generator& gen, std::size_t n) {  // uniform in [0, n)
  return static_cast<std::size_t>(gen.next_u64() % n);
}

// Another character of the same kind: a digit one off (9 wraps to 0), a letter of the same case.
char neighbour(char c, Generator& gen) {
  if (std::isdigit(static_cast<unsigned char>(c)))
    return static_cast<char>('0' + (c - '0' + (draw(gen, 2) == 0 ? 1 : 9)) % 10);
  const char base = std::isupper(static_cast<unsigned char>(c)) ? 'A' : 'a';
  return static_cast<char>(base + (c - base + 1 + static_cast<int>(draw(gen, 25))) % 26);
}

// A plausible wrong answer: each way that applies to `answer` is equally likely.
std::string near_miss(const std::string& answer, Generator& gen) {
  std::vector<std::function<std::string()>> ways;
  ways.emplace_back([&] {  // one character changed
    std::string s = answer;
    char& c = s[draw(gen, s.size())];
    c = neighbour(c, gen);
    return s;
  });
  std::vector<std::size_t> swappable;  // neighbours that differ
  for (std::size_t i = 0; i + 1 < answer.size(); ++i)
    if (answer[i] != answer[i + 1]) swappable.push_back(i);
  if (!swappable.empty())
    ways.emplace_back([&] {
      std::string s = answer;
      const std::size_t i = swappable[draw(gen, swappable.size())];
      std::swap(s[i], s[i + 1]);
      return s;
    });
  if (answer.size() >= 2) {
    ways.emplace_back([&] { return answer.substr(0, 1 + draw(gen, answer.size() - 1)); });
    // One character dropped and another doubled, the length kept: a small model's usual slip
    // when it sorts ("ajksssz" for "aajkssz"), and one a reward model must not miss.
    ways.emplace_back([&] {
      std::string s = answer;
      s.erase(draw(gen, s.size()), 1);
      const std::size_t i = draw(gen, s.size());
      s.insert(i, 1, s[i]);
      return s == answer ? s.substr(1) : s;
    });
  }
  // One character moved a step in the alphabet (or a digit one off), which keeps most answers
  // in order: so an order alone does not make an answer right.
  ways.emplace_back([&] {
    std::string s = answer;
    char& c = s[draw(gen, s.size())];
    const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
    const char first = digit ? '0' : std::isupper(static_cast<unsigned char>(c)) ? 'A' : 'a';
    const char last = digit ? '9' : static_cast<char>(first + 25);
    c = c == first ? static_cast<char>(c + 1)
        : c == last ? static_cast<char>(c - 1)
                    : static_cast<char>(c + (draw(gen, 2) == 0 ? 1 : -1));
    return s;
  });
  return ways[draw(gen, ways.size())]();
}

}  // namespace

std::vector<PreferencePair> generate_preference_pairs(const std::vector<std::string>& tasks,
                                                      std::int64_t count, std::uint64_t seed,
                                                      const std::vector<std::string>& exclude) {
  Generator gen(seed + 1);
  std::vector<PreferencePair> pairs;
  for (SftExample& e : generate_sft_tasks(tasks, count, seed, exclude)) {
    std::string rejected = near_miss(e.response, gen);
    pairs.push_back({.prompt = std::move(e.prompt), .chosen = std::move(e.response),
                     .rejected = std::move(rejected), .origin = std::move(e.origin),
                     .task = std::move(e.task)});
  }
  return pairs;
}

TensorDataset encode_preference_pairs(const std::vector<PreferencePair>& pairs,
                                      const TextTokenizer& tokenizer, std::int64_t block_size) {
  GENESIS_CHECK(!pairs.empty(), ConfigError, "the preference dataset is empty");
  std::vector<SftExample> chosen, rejected;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const PreferencePair& p = pairs[i];
    const std::string name = p.origin.empty() ? "pair " + std::to_string(i + 1) : p.origin;
    GENESIS_CHECK(!p.chosen.empty(), ConfigError, name + ": the chosen response is empty");
    GENESIS_CHECK(!p.rejected.empty(), ConfigError, name + ": the rejected response is empty");
    chosen.push_back(preference_side(p));
    rejected.push_back(preference_side(p, true));
    chosen.back().origin = rejected.back().origin = name;
  }
  const SftTokens chosen_tokens = tokenize_sft(chosen, tokenizer);
  const SftTokens rejected_tokens = tokenize_sft(rejected, tokenizer);
  using Side = std::pair<const char*, const SftTokens*>;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    for (const auto& [side, tokens] : {Side{"chosen", &chosen_tokens}, Side{"rejected", &rejected_tokens}}) {
      const std::int64_t length = tokens->starts[i + 1] - tokens->starts[i];
      GENESIS_CHECK(length <= block_size + 1, ConfigError,
                    chosen[i].origin + ": the prompt and " + side + " response are " +
                        std::to_string(length) + " tokens with their end, more than " +
                        "model.block_size = " + std::to_string(block_size) + " + 1 hold");
    }
  const TensorDataset c = sft_rows(chosen_tokens, chosen, tokenizer.pad(), block_size).rows;
  const TensorDataset r = sft_rows(rejected_tokens, rejected, tokenizer.pad(), block_size).rows;
  const auto n = static_cast<std::int64_t>(pairs.size());
  TensorDataset out{Tensor::empty({n, 2, block_size}, DType::i64),
                    Tensor::empty({n, 2, block_size}, DType::i64)};
  const std::size_t row = static_cast<std::size_t>(block_size) * sizeof(std::int64_t);
  using Parts = std::tuple<Tensor*, const Tensor*, const Tensor*>;
  for (const auto& [to, chosen_rows, rejected_rows] :
       {Parts{&out.inputs, &c.inputs, &r.inputs}, Parts{&out.targets, &c.targets, &r.targets}}) {
    auto* dst = static_cast<char*>(to->raw_data());
    for (std::int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + (2 * i) * row, chosen_rows->data<std::int64_t>() + i * block_size, row);
      std::memcpy(dst + (2 * i + 1) * row, rejected_rows->data<std::int64_t>() + i * block_size, row);
    }
  }
  std::vector<float> margins;
  for (const PreferencePair& p : pairs) margins.push_back(static_cast<float>(p.margin));
  if (std::any_of(margins.begin(), margins.end(), [](float m) { return m != 0; }))
    out.extra = Tensor::from_vector(margins, {n});
  return out;
}

}  // namespace genesis::data
