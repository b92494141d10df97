// nn::Module: a tree of named parameters, buffers and child modules, as torch.nn.Module.
// Names are dotted paths ("h.0.attn.c_attn.weight") in registration order, which is the order
// DDP later uses to bucket gradients and checkpoints use to name tensors. Calling a module
// (operator()) runs its forward between the forward hooks, torch's __call__, which is how ZeRO-3
// gathers a unit's parameters just before its forward and frees them after.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genesis/tensor/random.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module;

// Runs before forward with the module and its input; a defined return value replaces the input
// (later hooks and forward see the replacement), an undefined one keeps it.
using ForwardPreHook = std::function<Tensor(Module& module, const Tensor& input)>;
// Runs after forward; a defined return value replaces the output (later hooks see the
// replacement), an undefined one keeps it.
using ForwardHook =
    std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;

class Module {
 public:
  virtual ~Module() = default;

  // Modules with one input and one output implement this; others (GPT) define their own call.
  virtual Tensor forward(const Tensor& x);
  // forward(x) between the hooks, in registration order. Parents call their children this way
  // (never child->forward directly) so that hooks on any submodule fire.
  Tensor operator()(const Tensor& x);
  // The same hooks around another computation on this module's parameters: body(x) runs in
  // forward's place (ZeRO-3 gathers the parameters for it and releases them after, as for
  // forward). For what forward cannot give without changing what it returns: a language model's
  // head taking its loss instead of making the logits.
  Tensor call_hooked(const Tensor& x, const std::function<Tensor(const Tensor&)>& body);

  // Hook ids are unique per module across both kinds; remove_hook(id) of an unknown id does
  // nothing, so a hook may be removed twice (or by a destructor after a failed setup).
  int register_forward_pre_hook(ForwardPreHook hook);
  int register_forward_hook(ForwardHook hook);
  void remove_hook(int id);

  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  // The random streams the module draws from (dropout masks), by qualified name, each listed
  // once even when several submodules share it (the first name wins): a checkpoint saves and
  // restores their positions so a resumed run draws the same masks.
  std::vector<std::pair<std::string, std::shared_ptr<Generator>>> named_generators() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const {
    return children_;
  }
  // Parameters and buffers by name (tensors share storage with the module's).
  std::map<std::string, Tensor> state_dict() const;
  // Copies values in; strict: every key must match a parameter/buffer of the same shape and
  // every parameter/buffer must be present. Errors name the key.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

  // Moves every parameter and buffer to `device` in place, as torch's module.to(device): the
  // tensors keep their identity (optimizers and hooks built later see the moved ones), tensors
  // that view one storage (tied weights) still share one afterwards, and gradients are dropped.
  // Tensors already on `device` stay as they are, storage released by ZeRO-3 included; a
  // released one elsewhere (nothing to copy) is an InvalidArgument naming it.
  void to(Device device);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  std::int64_t num_parameters() const;

 protected:
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  void register_generator(const std::string& name, std::shared_ptr<Generator> generator);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void collect(const std::string& prefix, bool params, NamedTensors& out) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Generator>>> generators_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<int, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<int, ForwardHook>> post_hooks_;
  int next_hook_id_ = 0;
  bool training_ = true;
};

}  // namespace genesis::nn
