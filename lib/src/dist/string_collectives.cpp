// Strings as i64 words: lengths are all-gathered first so every rank pads to the longest. The
// words travel on the group's device (an NCCL group reduces GPU tensors only) and come back.
#include "genesis/dist/string_collectives.hpp"

#include <algorithm>
#include <cstring>

#include "genesis/core/error.hpp"
#include "genesis/dist/work.hpp"

namespace genesis::dist {
namespace {

std::int64_t words_for(std::int64_t bytes) { return (bytes + 7) / 8; }

Tensor on_group_device(const Tensor& host, ProcessGroup& group) {
  return host.to(group.device());
}

}  // namespace

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& text) {
  const int world = group.size();
  if (world == 1) return {text};
  const double size = static_cast<double>(text.size());
  Tensor length = on_group_device(Tensor::full({1}, size, DType::i64), group);
  Tensor lengths = on_group_device(Tensor::empty({world}, DType::i64), group);
  group.all_gather_tensor(lengths, length)->wait();
  lengths = lengths.to(Device::cpu());
  const std::int64_t* n = lengths.data<std::int64_t>();
  const std::int64_t words = words_for(*std::max_element(n, n + world));
  if (words == 0) return std::vector<std::string>(world);
  Tensor mine = Tensor::zeros({words}, DType::i64);
  std::memcpy(mine.raw_data(), text.data(), text.size());
  mine = on_group_device(mine, group);
  Tensor all = on_group_device(Tensor::empty({words * world}, DType::i64), group);
  group.all_gather_tensor(all, mine)->wait();
  all = all.to(Device::cpu());
  std::vector<std::string> out(world);
  const char* bytes = static_cast<const char*>(all.raw_data());
  for (int r = 0; r < world; ++r) out[r].assign(bytes + r * words * 8, static_cast<std::size_t>(n[r]));
  return out;
}

std::string broadcast_string(ProcessGroup& group, const std::string& text, int root) {
  if (group.size() == 1) return text;
  const double size = static_cast<double>(text.size());
  Tensor length = on_group_device(Tensor::full({1}, size, DType::i64), group);
  group.broadcast(length, {.root = root})->wait();
  const std::int64_t n = length.item<std::int64_t>();
  if (n == 0) return {};
  Tensor words = Tensor::zeros({words_for(n)}, DType::i64);
  if (group.rank() == root) std::memcpy(words.raw_data(), text.data(), text.size());
  words = on_group_device(words, group);
  group.broadcast(words, {.root = root})->wait();
  words = words.to(Device::cpu());
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
