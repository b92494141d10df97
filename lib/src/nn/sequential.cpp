// Sequential: registration under positional names and the chained forward.
#include "genesis/nn/sequential.hpp"

#include <string>

namespace genesis::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : modules_) h = (*m)(h);
  return h;
}

}  // namespace genesis::nn
