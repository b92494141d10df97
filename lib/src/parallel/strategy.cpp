// make_strategy and the DDP strategy: every rank holds the whole model, gradients and optimizer
// state; DistributedDataParallel averages gradients during backward, so clipping and the
// optimizer step are the single-process ones applied to identical gradients on every rank.
// Checkpoint state is replicated, so the ranks share the saving out tensor by tensor.
#include "genesis/parallel/strategy.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "genesis/optim/clip_grad.hpp"
#include "genesis/parallel/deferred_init.hpp"
#include "state_pieces.hpp"
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
        group_(group),
        ddp_(std::make_shared<DistributedDataParallel>(model, std::move(group), options)) {
    for (auto& [name, p] : model->named_parameters()) {
      (p.requires_grad() ? named_params_ : frozen_).emplace_back(name, p);
      if (p.requires_grad()) params_.push_back(p);
    }
    optimizer_ = make_optimizer(params_);
  }

  std::string name() const override { return "ddp"; }
  nn::Module& module() override { return *model_; }

  Tensor forward(const Tensor& input, bool sync_gradients) override {
    if (sync_gradients) return ddp_->forward(input);
    auto guard = ddp_->no_sync();
    return ddp_->forward(input);
  }

  void scale_gradients(double factor) override { optim::scale_gradients(params_, factor); }
  double clip_grad_norm(double max_norm) override {
    return optim::clip_grad_norm(params_, max_norm);
  }
  // Local, yet the same on every rank: the all-reduce left identical gradients everywhere, and
  // an inf or NaN on any rank became inf or NaN in the sum.
  double grad_norm() override { return optim::grad_norm(params_); }

  void step(double lr) override {
    optimizer_->set_lr(lr);
    optimizer_->step();
    optimizer_->zero_grad();
  }
  void zero_grad() override { optimizer_->zero_grad(); }
  optim::Optimizer& optimizer() override { return *optimizer_; }

  MemoryReport memory() const override {
    MemoryReport r;
    std::vector<Tensor> frozen;
    for (const auto& [name, p] : frozen_) frozen.push_back(p);
    r.parameter_bytes = bytes_of(params_) + bytes_of(frozen);
    // The buckets hold a full gradient; .grad is either a view into them or a second copy.
    r.gradient_bytes = bytes_of(params_) * (ddp_->options().gradient_as_bucket_view ? 1 : 2);
    std::vector<Tensor> state;
    for (auto& [name, t] : optimizer_->state_tensors()) state.push_back(t);
    r.optimizer_bytes = bytes_of(state);
    return r;
  }

  // Every rank writes about as many bytes, so that the ranks' writes end together: a tensor of
  // kSplitBytes or more is cut into one element range per rank, a smaller one goes whole to the
  // rank with the fewest bytes so far (every rank computes the same assignment). Buffers and
  // frozen tensors go to rank 0.
  std::vector<StatePiece> state_pieces() override {
    const int world = group_->size(), rank = group_->rank();
    std::vector<StatePiece> all;
    for (const auto& [name, p] : named_params_)
      all.push_back(detail::whole_piece(detail::model_name(name), p));
    for (const auto& [slot, state] : detail::state_by_slot(optimizer_->state_tensors()))
      detail::append_slot_pieces(named_params_.at(slot).first, state, all);
    std::vector<StatePiece> out = detail::balanced_pieces(std::move(all), world, rank);
    if (rank == 0) {
      for (const auto& [name, p] : frozen_)
        out.push_back(detail::whole_piece(detail::model_name(name), p));
      for (const auto& [name, b] : model_->named_buffers())
        out.push_back(detail::whole_piece(detail::model_name(name), b));
    }
    return out;
  }

  void load_state(const StateSource& source) override {
    NoGradGuard no_grad;
    detail::check_model_entries(source, model_->named_parameters());
    for (const auto& [name, p] : named_params_)
      detail::load_whole(source, detail::model_name(name), p);
    for (const auto& [name, p] : frozen_) detail::load_whole(source, detail::model_name(name), p);
    for (const auto& [name, b] : model_->named_buffers())
      detail::load_whole(source, detail::model_name(name), b);
    const detail::OptimizerLayout layout = detail::optimizer_layout(source, named_params_, optimizer_->state_names());
    optim::NamedTensors state;
    for (std::size_t i = 0; i < named_params_.size(); ++i)
      for (auto& entry : detail::read_slot(source, layout, named_params_[i].first,
                                           named_params_[i].second.shape(), i))
        state.push_back(std::move(entry));
    detail::load_optimizer(*optimizer_, state, name());
  }

 private:
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<dist::ProcessGroup> group_;
  std::shared_ptr<DistributedDataParallel> ddp_;
  nn::NamedTensors named_params_;  // params_ with their names: optimizer slot i is entry i
  nn::NamedTensors frozen_;        // no gradient, no optimizer state (a LoRA run's base)
  std::vector<Tensor> params_;
  std::unique_ptr<optim::Optimizer> optimizer_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options,
                                        std::shared_ptr<nn::Module> model,
                                        const OptimizerFactory& make_optimizer,
                                        std::shared_ptr<dist::ProcessGroup> group,
                                        DeferredInit* deferred) {
  const std::optional<StrategyKind> kind = parse_setting<StrategyKind>(options.name);
  GENESIS_CHECK(kind.has_value(), InvalidArgument,
                "unknown strategy \"" + options.name +
                    "\" (expected auto, ddp, zero1, zero2, zero3 or hsdp)");
  const bool sharded = *kind == StrategyKind::zero3 || *kind == StrategyKind::hsdp;
  GENESIS_CHECK(deferred == nullptr || sharded, InvalidArgument,
                "deferred init shards for zero3 or hsdp, not " + options.name);
  // Rather than train on the device while the user believes the state is on the host.
  GENESIS_CHECK(sharded || !options.zero.offload_param, NotSupported,
                "offload_param = cpu applies to zero3 and hsdp, not to " + options.name +
                    " (choose distributed.strategy = zero3)");
  GENESIS_CHECK(*kind != StrategyKind::ddp || !options.zero.offload_optimizer, NotSupported,
                "offload_optimizer = cpu applies to zero1, zero2, zero3 and hsdp, not to ddp "
                "(choose a ZeRO stage)");
  switch (*kind) {
    case StrategyKind::automatic:
    case StrategyKind::ddp:
      return std::make_unique<DDPStrategy>(std::move(model), make_optimizer, std::move(group),
                                           options.ddp);
    case StrategyKind::zero1:
    case StrategyKind::zero2:
      return detail::make_zero_stage12(*kind == StrategyKind::zero1 ? 1 : 2, std::move(model),
                                       make_optimizer, std::move(group), options.zero);
    case StrategyKind::zero3:
    case StrategyKind::hsdp:
      return detail::make_fully_sharded(*kind == StrategyKind::hsdp, std::move(model),
                                        make_optimizer, std::move(group), options.zero,
                                        deferred ? &deferred->sharded_build() : nullptr);
  }
  throw InvalidArgument("unknown strategy \"" + options.name + "\"");  // unreachable
}

}  // namespace genesis::parallel
