#include "shm_mailboxes.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <string>

#include "genesis/core/error.hpp"
#include "shm_segment.hpp"

namespace genesis::dist::shm {

namespace {

constexpr std::uint32_t kSlots = 2;

// A slot's size for `world` ranks: the mailboxes (world^2 of them) stay near 16 MiB in all.
std::size_t slot_bytes_for(int world) {
  const auto pairs = static_cast<std::size_t>(world) * static_cast<std::size_t>(world);
  const std::size_t bytes = std::clamp<std::size_t>((16u << 20) / pairs / kSlots, 4u << 10, 128u << 10);
  return bytes / kCacheLine * kCacheLine;
}

struct Bell {
  std::atomic<std::uint32_t> count;
};

}  // namespace

// A mailbox's counters, then per slot a header line and the slot's bytes.
struct Mailboxes::Box {
  std::atomic<std::uint32_t> written;  // chunks the sender has put in
  std::atomic<std::uint32_t> read;     // chunks the receiver has taken out
};

struct SlotHeader {
  std::int32_t tag;
  std::uint64_t total;  // the whole message's bytes
  std::uint64_t bytes;  // this chunk's
};

std::size_t Mailboxes::region_bytes(int world) {
  const auto ranks = static_cast<std::size_t>(world);
  const std::size_t box = kCacheLine + kSlots * (kCacheLine + slot_bytes_for(world));
  return kCacheLine * ranks + box * ranks * ranks;
}

Mailboxes::Mailboxes(char* region, int rank, int world)
    : region_(region), rank_(rank), world_(world), slot_bytes_(slot_bytes_for(world)) {
  static_assert(sizeof(Box) <= kCacheLine && sizeof(SlotHeader) <= kCacheLine);
}

Mailboxes::Box& Mailboxes::box(int from, int to) const {
  const std::size_t size = kCacheLine + kSlots * (kCacheLine + slot_bytes_);
  const auto index = static_cast<std::size_t>(from * world_ + to);
  return *reinterpret_cast<Box*>(region_ + kCacheLine * static_cast<std::size_t>(world_) + size * index);
}

char* Mailboxes::slot(int from, int to, std::uint32_t index) const {
  return reinterpret_cast<char*>(&box(from, to)) + kCacheLine + (index % kSlots) * (kCacheLine + slot_bytes_);
}

bool Mailboxes::try_send(int dst, int tag, std::uint64_t total, const char* data,
                         std::size_t remaining, std::size_t& sent) {
  Box& b = box(rank_, dst);
  const std::uint32_t written = b.written.load(std::memory_order_relaxed);
  if (written - b.read.load(std::memory_order_acquire) >= kSlots) return false;
  char* s = slot(rank_, dst, written);
  sent = std::min(remaining, slot_bytes_);
  const SlotHeader header{tag, total, sent};
  std::memcpy(s, &header, sizeof(header));
  std::memcpy(s + kCacheLine, data, sent);
  b.written.store(written + 1, std::memory_order_release);
  ring(dst);
  return true;
}

bool Mailboxes::try_recv(int src, int tag, std::uint64_t total, char* out, std::size_t remaining,
                         std::size_t& got) {
  Box& b = box(src, rank_);
  const std::uint32_t read = b.read.load(std::memory_order_relaxed);
  if (b.written.load(std::memory_order_acquire) == read) return false;
  const char* s = slot(src, rank_, read);
  SlotHeader header{};
  std::memcpy(&header, s, sizeof(header));
  GENESIS_CHECK(header.tag == tag && header.total == total && header.bytes <= remaining, CommError,
                "shared memory: rank " + std::to_string(rank_) + " expects " +
                    std::to_string(total) + " bytes with tag " + std::to_string(tag) +
                    " from rank " + std::to_string(src) + ", which sent " +
                    std::to_string(header.total) + " bytes with tag " +
                    std::to_string(header.tag) +
                    " (sends and recvs between two ranks must pair up in order)");
  got = header.bytes;
  std::memcpy(out, s + kCacheLine, got);
  b.read.store(read + 1, std::memory_order_release);
  ring(src);
  return true;
}

std::uint32_t Mailboxes::bell() const {
  return reinterpret_cast<Bell*>(region_ + kCacheLine * static_cast<std::size_t>(rank_))
      ->count.load(std::memory_order_acquire);
}

void Mailboxes::wait(std::uint32_t seen, std::chrono::milliseconds slice) const {
  auto* word = &reinterpret_cast<Bell*>(region_ + kCacheLine * static_cast<std::size_t>(rank_))->count;
  timespec t{0, std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count()};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &t, nullptr, 0);
}

void Mailboxes::ring_own() { ring(rank_); }

void Mailboxes::ring(int r) {
  auto* word = &reinterpret_cast<Bell*>(region_ + kCacheLine * static_cast<std::size_t>(r))->count;
  word->fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace genesis::dist::shm
