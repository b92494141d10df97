// Model constructors announce each unit-sized submodule as it is finished, to the build scope of
// their thread only (what ZeRO-3's deferred init shards as the model is built), complete and in
// the order the model runs them; without a scope, and on other threads, nothing is announced.
#include <catch2/catch.hpp>

#include <thread>

#include "genesis/nn/build_scope.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/mlp.hpp"

using namespace genesis;

namespace {

struct Announced {
  std::vector<std::string> paths;
  std::vector<std::int64_t> sizes;  // the module's parameters when it was announced
  nn::BuildListener listener() {
    return [this](const std::string& path, nn::Module& m) {
      paths.push_back(path);
      sizes.push_back(m.num_parameters());
    };
  }
};

}  // namespace

TEST_CASE("GPT announces each block and MLP each Linear, finished, by path", "[nn]") {
  Generator gen(1);
  Announced gpt, mlp;
  std::shared_ptr<nn::GPT> model;
  {
    const nn::BuildScope scope(gpt.listener());
    model = std::make_shared<nn::GPT>(nn::GPTConfig{3, 2, 16, 8, 32, 0.0}, gen);
  }
  CHECK(gpt.paths == std::vector<std::string>{"h.0", "h.1", "h.2"});
  const std::int64_t block = 12 * 16 * 16 + 13 * 16;  // 4C^2 + 8C^2 weights, 13C biases and norms
  CHECK(gpt.sizes == std::vector<std::int64_t>{block, block, block});
  {
    const nn::BuildScope scope(mlp.listener());
    nn::MLP(20, {8, 6}, 4, gen);
  }
  CHECK(mlp.paths == std::vector<std::string>{"layers.0", "layers.2", "layers.4"});
  CHECK(mlp.sizes == std::vector<std::int64_t>{20 * 8 + 8, 8 * 6 + 6, 6 * 4 + 4});
}

TEST_CASE("announcements reach only the innermost scope of the building thread", "[nn]") {
  Generator gen(1);
  Announced outer, inner, other_thread;
  {
    const nn::BuildScope outer_scope(outer.listener());
    {
      const nn::BuildScope inner_scope(inner.listener());
      nn::MLP(4, {3}, 2, gen);
    }
    std::thread([&] {
      Generator g(2);
      nn::MLP(4, {3}, 2, g);  // no scope on this thread
      const nn::BuildScope scope(other_thread.listener());
      nn::MLP(4, {}, 2, g);
    }).join();
    nn::MLP(4, {}, 2, gen);
  }
  nn::MLP(4, {}, 2, gen);  // no scope left
  CHECK(inner.paths == std::vector<std::string>{"layers.0", "layers.2"});
  CHECK(other_thread.paths == std::vector<std::string>{"layers.0"});
  CHECK(outer.paths == std::vector<std::string>{"layers.0"});
}
