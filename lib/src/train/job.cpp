// Joining the job: the process group from the launcher's environment, the timeout from
// GENESIS_TIMEOUT_S (genesis launch --timeout) or distributed.timeout_s, nccl on a GPU and on the
// CPU the configured backend (auto: shm within a host, gloo across).
#include "job.hpp"

#include <cstdlib>
#include <string>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/distributed.hpp"

namespace genesis::train {
namespace {

Milliseconds job_timeout(const DistributedConfig& config) {
  const double seconds = env::timeout_s().value_or(config.timeout_s);
  return Milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

// auto on the CPU: shared memory within each host, Gloo across.
std::string cpu_backend(BackendKind kind) {
  switch (kind) {
    case BackendKind::gloo: return "gloo";
    case BackendKind::shm: return "shm";
    default: return "shm+gloo";
  }
}

}  // namespace

Job::Job(const DistributedConfig& config, Device device) : device_(device) {
  if (device.is_cpu())
    GENESIS_CHECK(config.backend != BackendKind::nccl, ConfigError,
                  "distributed.backend = \"nccl\" reduces GPU tensors, but this run trains on "
                  "the CPU: set training.device = \"cuda\" on a machine with a GPU, or use "
                  "\"gloo\" or \"auto\"");
  else
    GENESIS_CHECK(config.backend != BackendKind::gloo && config.backend != BackendKind::shm,
                  ConfigError,
                  "distributed.backend = \"" + std::string(to_string(config.backend)) +
                      "\" reduces host tensors, but this run trains on " + device.str() +
                      ": use \"nccl\" or \"auto\", or set training.device = \"cpu\"");
  const std::string backend = device.is_cuda() ? "nccl" : cpu_backend(config.backend);
  if (dist::is_initialized()) {
    group_ = dist::default_group();  // a program that called init_process_group itself
    return;
  }
  if (env::world_size().value_or(1) == 1) {
    group_ = dist::make_single_rank_group(backend, device);
    return;
  }
  dist::init_process_group(backend, -1, -1, "env://", job_timeout(config));
  group_ = dist::default_group();
  owns_default_group_ = true;
}

Job::~Job() {
  if (owns_default_group_) dist::destroy_process_group();
}

void Job::sum(std::vector<double>& values) const {
  if (world_size() == 1 || values.empty()) return;
  const std::vector<float> mine(values.begin(), values.end());
  Tensor t = Tensor::from_vector(mine, {static_cast<std::int64_t>(mine.size())}, device_);
  group_->all_reduce(t, {.op = dist::ReduceOp::SUM})->wait();
  const std::vector<float> total = t.to_vector();
  values.assign(total.begin(), total.end());
}

std::vector<double> Job::gather(double value) const {
  Tensor mine = Tensor::full({1}, value, DType::f32, device_);
  Tensor all = Tensor::empty({world_size()}, DType::f32, device_);
  group_->all_gather_tensor(all, mine)->wait();
  std::vector<float> v = all.to_vector();
  return {v.begin(), v.end()};
}

}  // namespace genesis::train
