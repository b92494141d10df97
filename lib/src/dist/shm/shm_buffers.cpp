#include "shm_buffers.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include <spdlog/spdlog.h>

#include "genesis/core/error.hpp"

namespace genesis::dist::shm {

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kNameBytes = 64;

// A place in the segments: the buffer in the high bits, the byte offset in its region below.
constexpr int kOffsetBits = 44;

}  // namespace

Tensor SharedBuffers::make(Communicator& comm, std::int64_t numel, DType dtype,
                           Milliseconds timeout) {
  const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(dtype);
  const std::size_t region = std::max<std::size_t>(kPage, (bytes + kPage - 1) / kPage * kPage);
  const std::size_t total = region * static_cast<std::size_t>(comm.world());
  char name[kNameBytes] = {};  // empty: rank 0 could not make it
  auto segment = std::make_shared<Segment>();
  if (comm.rank() == 0) {
    std::random_device rd;
    const std::string fresh =
        segment_name(static_cast<unsigned long long>(rd()) << 32 | rd(), getpid());
    try {
      *segment = Segment::create(fresh, total);
      std::strncpy(name, fresh.c_str(), kNameBytes - 1);
    } catch (const CommError& e) {
      if (!warned_)
        spdlog::warn("{}; a buffer of {:.1f} MiB, and any later one without room, stays in each "
                     "rank's own memory, which costs a copy in and out at every all-reduce",
                     e.what(), static_cast<double>(bytes) / (1 << 20));
      warned_ = true;
    }
  }
  comm.broadcast(name, kNameBytes, 0);
  const std::uint64_t id = made_++;
  if (name[0] == '\0') return Tensor::zeros({numel}, dtype);
  if (comm.rank() != 0) *segment = Segment::open(name, total, timeout);
  comm.barrier();  // every rank has it mapped: the name can go
  if (comm.rank() == 0) Segment::unlink(name);
  GENESIS_CHECK(region < (std::size_t{1} << kOffsetBits), InvalidArgument,
                "zeros_shared: " + std::to_string(bytes) + " bytes is too large a buffer");
  char* mine = segment->data() + region * static_cast<std::size_t>(comm.rank());
  {
    std::lock_guard lock(mutex_);
    rank_ = comm.rank();
    world_ = comm.world();
    std::erase_if(buffers_, [](const Buffer& b) { return b.mapping.expired(); });
    buffers_.push_back({segment, segment->data(), region, id});
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(mine, bytes, segment);
  impl->shape = {numel};
  impl->strides = {1};
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

std::optional<SharedBuffers::InPlace> SharedBuffers::locate(const Tensor& t) const {
  if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous()) return std::nullopt;
  const char* data = static_cast<const char*>(t.storage()->data()) +
                     t.offset() * static_cast<std::int64_t>(dtype_size(t.dtype()));
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
  std::lock_guard lock(mutex_);
  for (const Buffer& b : buffers_) {
    if (b.mapping.expired()) continue;
    const char* mine = b.base + b.region * static_cast<std::size_t>(rank_);
    if (data < mine || data + bytes > mine + b.region) continue;
    const auto offset = static_cast<std::size_t>(data - mine);
    InPlace found{{}, b.id << kOffsetBits | offset};
    for (int q = 0; q < world_; ++q)
      found.copies.push_back(b.base + b.region * static_cast<std::size_t>(q) + offset);
    return found;
  }
  return std::nullopt;
}

}  // namespace genesis::dist::shm
