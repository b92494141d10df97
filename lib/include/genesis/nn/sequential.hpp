// Sequential: children named "0", "1", ... applied in order, as torch.nn.Sequential.
#pragma once

#include <memory>
#include <vector>

#include "genesis/nn/module.hpp"

namespace genesis::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  std::size_t size() const { return modules_.size(); }
  Module& operator[](std::size_t i) { return *modules_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace genesis::nn
