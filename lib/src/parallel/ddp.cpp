// DistributedDataParallel's module side: the cross-rank shape check and rank-0 broadcast at
// construction, buffer broadcast and reducer arming in forward, and the no_sync guard. The
// gradient machinery is the reducer's (ddp_reducer.cpp).
#include "genesis/parallel/ddp.hpp"

#include "ddp_reducer.hpp"
#include "replicate.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/distributed.hpp"

namespace genesis::parallel {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<dist::ProcessGroup> group,
                                                 DDPOptions options)
    : module_(std::move(module)), group_(std::move(group)), options_(options) {
  GENESIS_CHECK(module_ != nullptr, InvalidArgument, "DistributedDataParallel: null module");
  GENESIS_CHECK(group_ != nullptr, InvalidArgument, "DistributedDataParallel: null process group");
  register_module("module", module_);
  train(module_->is_training());
  {
    NoGradGuard no_grad;  // the broadcast writes into leaves that require grad
    const nn::NamedTensors params = module_->named_parameters();
    detail::check_same_parameters(params, *group_);
    detail::broadcast_from_rank0(params, *group_);
    detail::broadcast_from_rank0(module_->named_buffers(), *group_);
  }
  reducer_ = std::make_unique<Reducer>(module_, group_, options_);
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DDPOptions options)
    : DistributedDataParallel(std::move(module), dist::default_group(), options) {}

DistributedDataParallel::~DistributedDataParallel() = default;

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (is_training() && options_.broadcast_buffers && group_->size() > 1) {
    NoGradGuard no_grad;
    detail::broadcast_from_rank0(module_->named_buffers(), *group_);
  }
  if (is_training() && autograd::grad_enabled()) {
    if (require_sync_) reducer_->arm();
    else reducer_->disarm();  // an earlier forward's arming must not make this backward reduce
  }
  return module_->forward(x);
}

std::vector<BucketTrace> DistributedDataParallel::last_backward_trace() const {
  return reducer_->trace();
}

std::size_t DistributedDataParallel::num_buckets() const { return reducer_->num_buckets(); }

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.require_sync_) {
  ddp_.require_sync_ = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.require_sync_ = previous_; }

}  // namespace genesis::parallel
