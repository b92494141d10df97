// The gradient reducer behind DistributedDataParallel: the bucket engine's policy that
// all-reduces each bucket (the order and the hook plumbing are bucket_engine.hpp's).
//
// A reducer is armed by a synchronised forward. Each gradient is copied into its bucket's flat
// buffer (or already is there: under gradient_as_bucket_view the bucket is offered as each
// parameter's gradient destination, autograd/grad_destination.hpp, and linear's backward
// computes its gradients straight into it); at the end of backward the averages go
// back into .grad (or .grad is left as a view into the bucket). With find_unused_parameters a
// parameter without a gradient contributes zeros, and one no rank used keeps no .grad, as in a
// single process; without it such a parameter is an error naming it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bucket_engine.hpp"
#include "genesis/dist/process_group.hpp"
#include "genesis/parallel/ddp.hpp"

namespace genesis::parallel {

struct DistributedDataParallel::Reducer : detail::BucketPolicy {
  Reducer(std::shared_ptr<nn::Module> module, std::shared_ptr<dist::ProcessGroup> group,
          const DDPOptions& options);
  ~Reducer() override;

  // Called by a synchronised training forward: the next backward reduces.
  void arm();
  void disarm();
  std::vector<BucketTrace> trace() const;
  std::size_t num_buckets() const { return buckets_.size(); }

  void take_gradient(std::size_t variable, bool armed) override;
  void missing_gradients(const std::vector<std::size_t>& variables) override;
  std::shared_ptr<dist::Work> launch(std::size_t bucket, bool waited_at_once) override;
  void finish() override;

 private:
  struct Bucket {
    Tensor flat;  // 1-D, every variable's gradient back to back
    BucketTrace trace;
  };

  Tensor bucket_view(std::size_t variable) const;
  void withdraw_destinations();

  std::shared_ptr<dist::ProcessGroup> group_;
  DDPOptions options_;
  std::vector<std::string> names_;
  std::vector<std::int64_t> offsets_;  // each variable's offset in its bucket, in elements
  std::vector<Bucket> buckets_;
  // find_unused_parameters: 1 per variable that got a gradient here, kept on the host and
  // reduced (MAX) on the group's device at the end of backward.
  std::vector<float> local_used_;
  std::unique_ptr<detail::BucketEngine> engine_;  // last: its hooks call into everything above
};

}  // namespace genesis::parallel
