// Strings as i64 words: lengths are all-gathered first so every rank pads to the longest.
#include "genesis/dist/string_collectives.hpp"

#include <algorithm>
#include <cstring>

#include "genesis/core/error.hpp"
#include "genesis/dist/work.hpp"

namespace genesis::dist {
namespace {

std::int64_t words_for(std::int64_t bytes) { return (bytes + 7) / 8; }

}  // namespace

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text) {
  const int world = group.size();
  if (world == 1) return {text};
  Tensor length = Tensor::full({1}, static_cast<double>(text.size()), DType::i64);
  Tensor lengths = Tensor::empty({world}, DType::i64);
  group.all_gather_tensor(lengths, length)->wait();
  const std::int64_t* n = lengths.data<std::int64_t>();
  const std::int64_t words = words_for(*std::max_element(n, n + world));
  if (words == 0) return std::vector<std::string>(world);
  Tensor mine = Tensor::zeros({words}, DType::i64);
  std::memcpy(mine.raw_data(), text.data(), text.size());
  Tensor all = Tensor::empty({words * world}, DType::i64);
  group.all_gather_tensor(all, mine)->wait();
  std::vector<std::string> out(world);
  const char* bytes = static_cast<const char*>(all.raw_data());
  for (int r = 0; r < world; ++r) out[r].assign(bytes + r * words * 8, static_cast<std::size_t>(n[r]));
  return out;
}

std::string broadcast_string(ProcessGroup& group, const std::string& text, int root) {
  if (group.size() == 1) return text;
  Tensor length = Tensor::full({1}, static_cast<double>(text.size()), DType::i64);
  group.broadcast(length, {.root = root})->wait();
  const std::int64_t n = length.item<std::int64_t>();
  if (n == 0) return {};
  Tensor words = Tensor::zeros({words_for(n)}, DType::i64);
  if (group.rank() == root) std::memcpy(words.raw_data(), text.data(), text.size());
  group.broadcast(words, {.root = root})->wait();
  return std::string(static_cast<const char*>(words.raw_data()), static_cast<std::size_t>(n));
}

void agree_or_throw(ProcessGroup& group, const std::string& error, const std::string& what) {
  const std::vector<std::string> errors = all_gather_strings(group, error);
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty()) continue;
    throw IoError(what + ": " + (group.size() > 1 ? "rank " + std::to_string(r) + ": " : "") +
                  errors[r]);
  }
}

}  // namespace genesis::dist
