// Joining the job: the process group from the launcher's environment, the timeout from
// GENESIS_TIMEOUT_S (genesis launch --timeout) or distributed.timeout_s, and gloo on CPU.
#include "job.hpp"

#include <cstdlib>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/dist/distributed.hpp"

namespace genesis::train {
namespace {

dist::Milliseconds job_timeout(const DistributedConfig& config) {
  double seconds = config.timeout_s;
  if (const char* env = std::getenv("GENESIS_TIMEOUT_S"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    seconds = std::strtod(env, &end);
    GENESIS_CHECK(end != env && *end == '\0' && seconds > 0, InvalidArgument,
                  "GENESIS_TIMEOUT_S must be a positive number of seconds, got '" +
                      std::string(env) + "'");
  }
  return dist::Milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

}  // namespace

Job::Job(const DistributedConfig& config) {
  // Training runs on CPU tensors until the CUDA backend lands, so its group is Gloo's.
  GENESIS_CHECK(config.backend != "nccl", ConfigError,
                "distributed.backend = \"nccl\" needs CUDA tensors (training.device = \"cuda\"), "
                "which this build cannot train on yet; use \"gloo\" or \"auto\"");
  if (dist::is_initialized()) {
    group_ = dist::default_group();  // a program that called init_process_group itself
    return;
  }
  const char* world = std::getenv("WORLD_SIZE");
  if (world == nullptr || std::string(world) == "1") {
    group_ = dist::make_single_rank_group("gloo");
    return;
  }
  dist::init_process_group("gloo", -1, -1, "env://", job_timeout(config));
  group_ = dist::default_group();
  owns_default_group_ = true;
}

Job::~Job() {
  if (owns_default_group_) dist::destroy_process_group();
}

void Job::sum(std::vector<double>& values) const {
  if (world_size() == 1 || values.empty()) return;
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())});
  for (std::size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = static_cast<float>(values[i]);
  group_->all_reduce(t, {.op = dist::ReduceOp::SUM})->wait();
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = t.data<float>()[i];
}

std::vector<double> Job::gather(double value) const {
  Tensor mine = Tensor::full({1}, value);
  Tensor all = Tensor::empty({world_size()});
  group_->all_gather_tensor(all, mine)->wait();
  std::vector<float> v = all.to_vector();
  return {v.begin(), v.end()};
}

}  // namespace genesis::train
