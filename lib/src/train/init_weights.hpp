// model.init_from: the weights a run starts from, read from a run directory (its latest
// checkpoint), a checkpoint directory, a .safetensors file `genesis ckpt export` wrote, or a
// Hugging Face model directory (or cached Hub id), and checked against the model before anything
// of the run is written. A Hugging Face model is read lazily from its memory-mapped shards, slice
// by slice as each rank asks, so no rank holds more of it than it keeps. It is a model-only state
// source, so every strategy loads it as it loads a checkpoint (ZeRO-3 keeping only its shards),
// and the optimizer starts empty.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/ckpt/state_piece.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::train {

// Tensors named under `prefix` that come from a source of their own, where they are named without
// it: a PPO policy's critic model ("critic.") from the reward model.
struct InitPart {
  std::string prefix;
  std::string path;
  std::string key;  // names the setting in errors
};

class InitWeights : public ckpt::StateSource {
 public:
  // Reads `path` (every checksum of a checkpoint's model pieces checked) and checks it against
  // `model`'s parameters and buffers by name and shape. A tensor the model has and the source
  // lacks is an error, except a value head, which starts from the model's own initialisation;
  // one the source has and the model lacks (a value head again) is left out. ConfigError naming
  // the path and the tensor.
  // `key` names the setting in errors; `parts` are read from their own sources, checked alike.
  InitWeights(const std::string& path, nn::Module& model,
              const std::string& key = "model.init_from", const std::vector<InitPart>& parts = {});

  // "runs/sft/checkpoints/step-5000 (checkpoint, 26 tensors)", what starts fresh, and the parts.
  const std::string& description() const { return description_; }
  // The same of `path` alone: what a frozen reference of the policy starts from.
  const std::string& path_description() const { return path_description_; }
  const std::vector<std::string>& fresh() const { return fresh_; }
  // Copies the model's current values of the fresh tensors into the source: call it with the
  // whole model present (after Strategy::gather_full_parameters, which ZeRO-3 needs).
  void take_fresh_from(nn::Module& model);
  // Frees the tensors once every model that starts from them has loaded them.
  void release_tensors() {
    tensors_.clear();
    hf_tensors_.clear();
  }

  bool contains(const std::string& name) const override;
  Shape shape(const std::string& name) const override;
  Tensor read(const std::string& name, std::int64_t offset, std::int64_t numel) const override;

 private:
  // Reads the tensors of `wanted` (named under `prefix` in the model, without it in the source)
  // from `path`; its description.
  std::string read_part(const std::string& path, const std::string& key, const std::string& prefix,
                        const nn::NamedTensors& wanted);

  // A tensor read from a Hugging Face directory when asked: its file, its name there, whether it
  // is stored transposed (GPT-2's Conv1D), and the model's shape and dtype.
  struct HfTensor {
    std::shared_ptr<const ckpt::HfWeights> weights;
    std::string name;
    bool transposed = false;
    Shape shape;
    DType dtype = DType::f32;
  };
  // read_part for a Hugging Face model directory.
  std::string read_hf_part(const std::string& path, const std::string& key,
                           const std::string& prefix, const nn::NamedTensors& wanted);

  std::map<std::string, Tensor> tensors_;  // "model.<name>" -> the whole tensor, on the host
  std::map<std::string, HfTensor> hf_tensors_;  // "model.<name>" -> where to read it
  std::vector<std::string> fresh_;         // model names
  std::string description_, path_description_;
};

}  // namespace genesis::train
