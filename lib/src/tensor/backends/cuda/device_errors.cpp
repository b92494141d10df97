// The index error slot (see device_errors.hpp): one IndexErrorSlot of mapped pinned memory per
// process, created on first use and never freed (kernels may hold its address until exit).
#include "device_errors.hpp"

#include <climits>
#include <mutex>
#include <string>

#include "cuda_check.hpp"

namespace genesis::cuda {
namespace {

struct Slot {
  IndexErrorSlot* host = nullptr;
  IndexErrorSlot* device = nullptr;
};

const Slot& slot() {
  static const Slot s = [] {
    Slot made;
    GENESIS_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&made.host), sizeof(IndexErrorSlot),
                                     cudaHostAllocMapped | cudaHostAllocPortable));
    *made.host = IndexErrorSlot{};
    GENESIS_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&made.device),
                                                made.host, 0));
    return made;
  }();
  return s;
}

}  // namespace

IndexErrorSlot* index_error_slot() { return slot().device; }

void raise_index_errors() {
  volatile IndexErrorSlot* s = slot().host;
  if (s->reported != 2) return;
  const IndexErrorSlot r{s->reported, s->op, s->value, s->position, s->bound, s->ignore};
  s->reported = 0;
  const std::string op(op_info(static_cast<OpId>(r.op)).name);
  const bool target = r.ignore != LLONG_MIN;
  throw InvalidArgument(op + " on cuda: " + (target ? "target " : "index ") +
                        std::to_string(r.value) + " at position " + std::to_string(r.position) +
                        " is outside [0, " + std::to_string(r.bound) + ")" +
                        (target ? " and is not ignore_index " + std::to_string(r.ignore) : ""));
}

}  // namespace genesis::cuda
