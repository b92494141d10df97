// make_strategy and the DDP strategy: every rank holds the whole model, gradients and optimizer
// state; DistributedDataParallel averages gradients during backward, so clipping and the
// optimizer step are the single-process ones applied to identical gradients on every rank.
#include "genesis/parallel/strategy.hpp"

#include "genesis/core/error.hpp"
#include "genesis/optim/clip_grad.hpp"
#include "zero_strategies.hpp"

namespace genesis::parallel {
namespace {

std::int64_t bytes_of(const std::vector<Tensor>& tensors) {
  std::int64_t total = 0;
  for (const Tensor& t : tensors)
    if (t.defined()) total += t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
  return total;
}

class DDPStrategy : public Strategy {
 public:
  DDPStrategy(std::shared_ptr<nn::Module> model, const OptimizerFactory& make_optimizer,
              std::shared_ptr<dist::ProcessGroup> group, DDPOptions options)
      : model_(model),
        ddp_(std::make_shared<DistributedDataParallel>(model, std::move(group), options)),
        params_(model->parameters()),
        optimizer_(make_optimizer(params_)) {}

  std::string name() const override { return "ddp"; }
  nn::Module& module() override { return *model_; }

  Tensor forward(const Tensor& input, bool sync_gradients) override {
    if (sync_gradients) return ddp_->forward(input);
    auto guard = ddp_->no_sync();
    return ddp_->forward(input);
  }

  double clip_grad_norm(double max_norm) override {
    return optim::clip_grad_norm(params_, max_norm);
  }
  double grad_norm() override { return optim::grad_norm(params_); }

  void step(double lr) override {
    optimizer_->set_lr(lr);
    optimizer_->step();
    optimizer_->zero_grad();
  }
  optim::Optimizer& optimizer() override { return *optimizer_; }

  MemoryReport memory() const override {
    MemoryReport r;
    r.parameter_bytes = bytes_of(params_);
    // The buckets hold a full gradient; .grad is either a view into them or a second copy.
    r.gradient_bytes = r.parameter_bytes * (ddp_->options().gradient_as_bucket_view ? 1 : 2);
    std::vector<Tensor> state;
    for (auto& [name, t] : optimizer_->state_tensors()) state.push_back(t);
    r.optimizer_bytes = bytes_of(state);
    return r;
  }

 private:
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<DistributedDataParallel> ddp_;
  std::vector<Tensor> params_;
  std::unique_ptr<optim::Optimizer> optimizer_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options,
                                        std::shared_ptr<nn::Module> model,
                                        const OptimizerFactory& make_optimizer,
                                        std::shared_ptr<dist::ProcessGroup> group) {
  if (options.name == "ddp" || options.name == "auto")
    return std::make_unique<DDPStrategy>(std::move(model), make_optimizer, std::move(group),
                                         options.ddp);
  if (options.name == "zero1" || options.name == "zero2")
    return detail::make_zero_stage12(options.name == "zero1" ? 1 : 2, std::move(model),
                                     make_optimizer, std::move(group), options.zero);
  if (options.name == "zero3")
    return detail::make_zero3(std::move(model), make_optimizer, std::move(group), options.zero);
  if (options.name == "hsdp")
    return detail::make_hsdp(std::move(model), make_optimizer, std::move(group), options.zero);
  throw InvalidArgument("unknown strategy \"" + options.name +
                        "\" (expected auto, ddp, zero1, zero2, zero3 or hsdp)");
}

}  // namespace genesis::parallel
