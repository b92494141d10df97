// A LoRA run's checkpoint: the adapters without the base (see lora_checkpoint.hpp).
#include "lora_checkpoint.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include "genesis/ckpt/checksum.hpp"
#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/core/error.hpp"

namespace genesis::train {

std::vector<ckpt::StatePiece> without_frozen(std::vector<ckpt::StatePiece> pieces,
                                             const nn::Module& model) {
  std::set<std::string> frozen;
  for (const auto& [name, p] : model.named_parameters())
    if (!p.requires_grad()) frozen.insert("model." + name);
  std::erase_if(pieces, [&](const ckpt::StatePiece& piece) { return frozen.contains(piece.name); });
  return pieces;
}

// What identifies a base: a Hugging Face directory's config.json and tensor headers, or else the
// frozen tensors' names and shapes (a genesis run or export, or the seed's fresh weights).
nlohmann::json lora_base_identity(const Config& config, const nn::Module& model) {
  const std::string& from = config.model.init_from;
  std::string text;
  if (!from.empty() && names_hf_model(from)) {
    const auto dir = ckpt::resolve_pretrained(from, "model.init_from");
    std::ifstream in(dir / "config.json", std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    text = bytes.str();
    const ckpt::HfWeights weights(dir);
    for (const std::string& name : weights.names())
      text += "\n" + name + " " + std::string(dtype_name(weights.dtype(name))) + " " +
              shape_str(weights.shape(name));
  } else {
    for (const auto& [name, p] : model.named_parameters())
      if (!p.requires_grad()) text += "\n" + name + " " + shape_str(p.shape());
  }
  return {{"base", from.empty() ? "seed " + std::to_string(config.seed) : from},
          {"base_hash", ckpt::xxhash64_hex(text.data(), text.size())}};
}

void check_lora_base(const nlohmann::json& saved, const nlohmann::json& current,
                     const std::string& checkpoint) {
  GENESIS_CHECK(saved.is_object(), ConfigError,
                "checkpoint '" + checkpoint + "' holds a whole model, not LoRA adapters: resume it "
                "without lora.r, or start the adapters over");
  GENESIS_CHECK(saved.value("base_hash", "") == current.value("base_hash", ""), ConfigError,
                "checkpoint '" + checkpoint + "' holds LoRA adapters of the base " +
                    saved.value("base", "?") + " (hash " + saved.value("base_hash", "?") +
                    "), and this run's base is " + current.value("base", "?") + " (hash " +
                    current.value("base_hash", "?") + "): resume with the same model.init_from");
}

WithFrozenBase::WithFrozenBase(const ckpt::StateSource& checkpoint, const nn::Module& model)
    : checkpoint_(checkpoint) {
  for (const auto& [name, p] : model.named_parameters())
    if (!p.requires_grad()) frozen_.emplace("model." + name, p);
}

bool WithFrozenBase::contains(const std::string& name) const {
  return frozen_.contains(name) || checkpoint_.contains(name);
}

Shape WithFrozenBase::shape(const std::string& name) const {
  auto it = frozen_.find(name);
  return it != frozen_.end() ? it->second.shape() : checkpoint_.shape(name);
}

Tensor WithFrozenBase::read(const std::string& name, std::int64_t offset,
                            std::int64_t numel) const {
  auto it = frozen_.find(name);
  if (it == frozen_.end()) return checkpoint_.read(name, offset, numel);
  const Tensor whole = it->second.detach().to(Device::cpu()).contiguous();
  return whole.reshape({whole.numel()}).slice(0, offset, offset + numel).clone();
}

}  // namespace genesis::train
