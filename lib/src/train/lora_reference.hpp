// The frozen reference of a LoRA run's dpo, grpo and ppo: the policy itself, its adapters
// switched off (PEFT's disable_adapter()), which is the base it started from, or, when
// lora.init_from gave a starting adapter, switched to the frozen copy of that adapter kept as it
// was loaded (megabytes). No second copy of the base is built, loaded or held. Its forward runs
// the policy's strategy in eval mode, without autograd; it trains nothing, so the training half
// of Strategy refuses.
#pragma once

#include "genesis/nn/lora.hpp"
#include "genesis/parallel/strategy.hpp"

namespace genesis::train {

class LoraReference : public parallel::Strategy {
 public:
  // `use`: nn::AdapterUse::none (the base) or nn::AdapterUse::starting.
  LoraReference(parallel::Strategy& policy, nn::AdapterUse use) : policy_(policy), use_(use) {}
  std::string name() const override { return policy_.name(); }
  nn::Module& module() override { return policy_.module(); }
  Tensor forward(const Tensor& input, bool sync_gradients) override;
  void scale_gradients(double) override { refuse(); }
  double clip_grad_norm(double) override { refuse(); }
  double grad_norm() override { refuse(); }
  void step(double) override { refuse(); }
  void zero_grad() override { refuse(); }
  optim::Optimizer& optimizer() override { refuse(); }
  parallel::MemoryReport memory() const override { return {}; }
  std::vector<parallel::StatePiece> state_pieces() override { return {}; }
  void load_state(const parallel::StateSource&) override {}

 private:
  [[noreturn]] static void refuse();
  parallel::Strategy& policy_;
  nn::AdapterUse use_;
};

}  // namespace genesis::train
