// nn::Module: a tree of named parameters, buffers and child modules, as torch.nn.Module.
// Names are dotted paths ("h.0.attn.c_attn.weight") in registration order, which is the order
// DDP later uses to bucket gradients and checkpoints use to name tensors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  // Modules with one input and one output implement this; others (GPT) define their own call.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const {
    return children_;
  }
  // Parameters and buffers by name (tensors share storage with the module's).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values in; strict: every key must match a parameter/buffer of the same shape and
  // every parameter/buffer must be present. Errors name the key.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  std::int64_t num_parameters() const;

 protected:
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void collect(const std::string& prefix, bool params, NamedTensors& out) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace genesis::nn
