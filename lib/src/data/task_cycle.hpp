// What the built-in task generators share (sft_tasks.cpp, chat_tasks.cpp): `count` examples
// cycling through the tasks named, each drawn again while its prompt is held out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/tensor/random.hpp"

namespace genesis::data::detail {

// make(task, gen) -> SftExample (its origin set). InvalidArgument naming `kind` ("SFT", "chat")
// for no task or one not among `known`. Every task has far more distinct prompts than a held-out
// share excludes, so the retry loop ends.
template <class Make>
std::vector<SftExample> cycle_tasks(const std::vector<std::string>& tasks,
                                    const std::vector<std::string>& known, const std::string& kind,
                                    std::int64_t count, std::uint64_t seed,
                                    const std::vector<std::string>& exclude, Make make) {
  GENESIS_CHECK(!tasks.empty(), InvalidArgument, "no " + kind + " task named");
  std::string expected;
  for (std::size_t i = 0; i < known.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == known.size() ? " or " : ", ") + known[i];
  for (const std::string& t : tasks)
    GENESIS_CHECK(std::find(known.begin(), known.end(), t) != known.end(), InvalidArgument,
                  "unknown " + kind + " task \"" + t + "\" (expected " + expected + ")");
  const std::unordered_set<std::string> excluded(exclude.begin(), exclude.end());
  Generator gen(seed);
  std::vector<SftExample> out;
  out.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::string& task = tasks[static_cast<std::size_t>(i) % tasks.size()];
    SftExample e = make(task, gen);
    while (excluded.count(e.prompt) > 0) e = make(task, gen);
    e.task = task;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace genesis::data::detail
