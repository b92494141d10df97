// Seed 000's first example in C++: a model wrapped in DistributedDataParallel, Adam and a
// training loop, run by `genesis launch --nproc 2 -- seed000_ddp` in the test suite. It checks
// what the seed promises and exits non-zero otherwise: the loss falls, and every rank ends with
// the same parameters because gradients were synchronised in backward.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "genesis/dist/distributed.hpp"
#include "genesis/nn/layers.hpp"
#include "genesis/nn/loss.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/optim/adam.hpp"
#include "genesis/parallel/ddp.hpp"

namespace dist = genesis::dist;
namespace nn = genesis::nn;
using genesis::Generator;
using genesis::Tensor;

class MyModel : public nn::Module {
 public:
  explicit MyModel(Generator& gen) {
    linear_ = register_module("linear", std::make_shared<nn::Linear>(512, 256, gen));
    relu_ = register_module("relu", std::make_shared<nn::ReLU>());
    output_ = register_module("output", std::make_shared<nn::Linear>(256, 10, gen));
  }
  Tensor forward(const Tensor& x) override { return output_->forward(relu_->forward(linear_->forward(x))); }

 private:
  std::shared_ptr<nn::Linear> linear_, output_;
  std::shared_ptr<nn::ReLU> relu_;
};

int main() {
  // RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from `genesis launch`.
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), world = dist::get_world_size();

  Generator init(1234 + static_cast<std::uint64_t>(rank));  // DDP makes rank 0's weights win
  auto model = std::make_shared<MyModel>(init);
  dist::DistributedDataParallel ddp_model(model);
  genesis::optim::Adam optimizer(ddp_model.parameters(), {.lr = 1e-3});
  nn::CrossEntropyLoss criterion;

  // Each rank's own shard of a fixed, learnable task: the class is the argmax of 10 features.
  Generator data_gen(99 + static_cast<std::uint64_t>(rank));
  double first_loss = 0, last_loss = 0;
  ddp_model.train();
  for (int batch_idx = 0; batch_idx < 200; ++batch_idx) {
    Tensor data = Tensor::randn({32, 512}, data_gen);
    Tensor targets = genesis::argmax(data.slice(1, 0, 10), -1);
    Tensor outputs = ddp_model(data);
    Tensor loss = criterion(outputs, targets);
    optimizer.zero_grad();
    loss.backward();  // gradients are averaged across ranks here
    optimizer.step();
    if (batch_idx == 0) first_loss = loss.item<double>();
    last_loss = loss.item<double>();
    if (batch_idx % 50 == 0 && rank == 0)
      std::printf("Batch %d, Loss: %.4f\n", batch_idx, loss.item<double>());
  }

  // Identical parameters on every rank: max - min over ranks is zero for every element.
  double spread = 0;
  for (const Tensor& p : ddp_model.parameters()) {
    Tensor hi = p.detach().clone(), lo = p.detach().clone();
    dist::all_reduce(hi, dist::ReduceOp::MAX);
    dist::all_reduce(lo, dist::ReduceOp::MIN);
    for (float d : (hi - lo).to_vector()) spread = std::max(spread, static_cast<double>(d));
  }
  dist::barrier();
  dist::destroy_process_group();
  std::printf("rank %d of %d: loss %.4f -> %.4f, parameter spread across ranks %g\n", rank, world,
              first_loss, last_loss, spread);
  return (last_loss < 0.75 * first_loss && spread == 0.0) ? 0 : 1;
}
