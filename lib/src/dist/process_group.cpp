// Work's completion state (with the per-thread clock of time blocked in wait() and the trace
// span of each op) and the argument checks shared by the process-group backends.
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/core/trace.hpp"
#include "genesis/dist/work.hpp"
#include "process_group_checks.hpp"

namespace genesis::dist {

namespace {
thread_local double t_comm_wait_s = 0;
}  // namespace

double thread_comm_wait_seconds() { return t_comm_wait_s; }
void detail::add_thread_comm_wait(double seconds) { t_comm_wait_s += seconds; }

void Work::wait() {
  std::unique_lock lock(mutex_);
  if (!done_) {  // only a wait that blocks reads the clock
    const auto blocked = std::chrono::steady_clock::now();
    done_cv_.wait(lock, [&] { return done_; });
    t_comm_wait_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - blocked).count();
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::is_completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void Work::mark_completed(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (done_) return;
    done_ = true;
    error_ = std::move(error);
  }
  // Before the waiters wake: one of them may drop the last reference to this Work.
  if (trace::enabled())
    trace::record({description_, "collective", submitted_, std::chrono::steady_clock::now(), 0});
  done_cv_.notify_all();
}

std::shared_ptr<Work> Work::completed(std::string description) {
  auto work = std::make_shared<Work>(std::move(description));
  work->mark_completed();
  return work;
}

namespace detail {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "Tensor(undefined)";
  return "Tensor(shape=" + shape_str(t.shape()) + ", dtype=" + std::string(dtype_name(t.dtype())) +
         ", device=" + t.device().str() + ")";
}

void check_tensor(const Tensor& t, std::string_view op, std::string_view which, Device on) {
  std::string where = std::string(op) + " " + std::string(which);
  GENESIS_CHECK(t.defined(), InvalidArgument, where + " is an undefined tensor");
  const std::string hint = t.device().is_cpu() != on.is_cpu()
                               ? "; move it with .to(" + on.str() + ")"
                               : std::string();
  GENESIS_CHECK(t.device() == on, InvalidArgument,
                where + " must be a " + (on.is_cpu() ? "CPU" : "CUDA") +
                    " tensor for this process group: it must be on " + on.str() + ", got " +
                    describe(t) + hint);
  GENESIS_CHECK(t.is_contiguous(), InvalidArgument,
                where + " must be contiguous, got a strided view " + describe(t));
  GENESIS_CHECK(t.dtype() != DType::boolean, InvalidArgument,
                where + " has dtype bool; collectives take f32, f16, bf16, i32 or i64");
}

void check_reduce_op(ReduceOp reduce, DType dtype, std::string_view op) {
  GENESIS_CHECK(reduce != ReduceOp::AVG || is_floating(dtype), InvalidArgument,
                std::string(op) + " with AVG needs a floating tensor, got " +
                    std::string(dtype_name(dtype)));
}

void check_rank(int r, int size, std::string_view op, std::string_view which) {
  GENESIS_CHECK(r >= 0 && r < size, InvalidArgument,
                std::string(op) + " " + std::string(which) + " " + std::to_string(r) +
                    " is not a rank of this group of size " + std::to_string(size));
}

void check_list(const std::vector<Tensor>& list, std::size_t count, const Tensor& like,
                std::string_view op, std::string_view which, Device on) {
  GENESIS_CHECK(list.size() == count, InvalidArgument,
                std::string(op) + " needs " + std::to_string(count) + " " + std::string(which) +
                    " (one per rank), got " + std::to_string(list.size()));
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string name = std::string(which) + "[" + std::to_string(i) + "]";
    check_tensor(list[i], op, name, on);
    GENESIS_CHECK(list[i].dtype() == like.dtype() && list[i].numel() == like.numel(),
                  InvalidArgument,
                  std::string(op) + " " + name + " is " + describe(list[i]) + " but must match " +
                      describe(like));
  }
}

void check_numel(const Tensor& t, std::int64_t numel, std::string_view op, std::string_view which) {
  GENESIS_CHECK(t.numel() == numel, InvalidArgument,
                std::string(op) + " " + std::string(which) + " must hold " +
                    std::to_string(numel) + " elements, got " + describe(t));
}

}  // namespace detail
}  // namespace genesis::dist
