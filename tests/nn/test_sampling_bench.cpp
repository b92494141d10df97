// Not a test (hidden from ctest): sampling throughput for bench/sampling.sh. The sft preset's GPT
// shape completes 64 prompts x 8 generations once one prompt at a time, as evaluation decoded
// before batching, and once as one batch, and prints both rates (the median of three rounds) and their ratio. Random weights
// and no stop token: every completion is max_new_tokens long in both, so the work is the same.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "genesis/nn/gpt.hpp"

namespace genesis {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_CASE("sampling throughput: one prompt at a time against one batch", "[.][bench-sampling]") {
  const char* device_env = std::getenv("GENESIS_BENCH_DEVICE");
  const Device device = device_env != nullptr && std::string(device_env) == "cuda" ? Device::cuda(0)
                                                                                  : Device::cpu();
  const nn::GPTConfig config{.n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = 24,
                             .vocab_size = 258, .dropout = 0.0};
  Generator init(1), gen(2);
  nn::GPT gpt(config, init);
  gpt.to(device);
  gpt.eval();
  const int prompts = 64, generations = 8;
  const nn::SamplingOptions options{.max_new_tokens = 12, .temperature = 1.0};
  std::vector<std::vector<std::int64_t>> batch;
  for (int p = 0; p < prompts; ++p) {
    std::vector<std::int64_t> prompt;
    for (int t = 0; t < 6 + p % 7; ++t) prompt.push_back(97 + (p * 7 + t * 3) % 26);
    for (int g = 0; g < generations; ++g) batch.push_back(prompt);
  }
  // Rounds alternate the two ways and each reports its median: a shared machine's slow spell
  // then lands on both, not on one.
  auto rate = [&](bool batched) {
    const auto start = std::chrono::steady_clock::now();
    double tokens = 0;
    if (batched) {
      for (const auto& completion : gpt.generate(batch, options, gen)) tokens += completion.size();
    } else {
      for (const auto& prompt : batch) tokens += gpt.generate({prompt}, options, gen)[0].size();
    }
    return tokens / seconds_since(start);
  };
  std::vector<double> singles, batches;
  for (int round = 0; round < 3; ++round) {
    singles.push_back(rate(false));
    batches.push_back(rate(true));
  }
  std::sort(singles.begin(), singles.end());
  std::sort(batches.begin(), batches.end());
  const double single = singles[1], batched = batches[1];
  std::printf("device %s, %d prompts x %d generations, %d new tokens each\n", device.str().c_str(),
              prompts, generations, static_cast<int>(options.max_new_tokens));
  std::printf("one prompt at a time  %10.0f tokens/s\n", single);
  std::printf("one batch of %4zu     %10.0f tokens/s  (%.1fx)\n", batch.size(), batched,
              batched / single);
  CHECK(batched > 0);
}

}  // namespace
}  // namespace genesis
