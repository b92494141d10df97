#include "shm_communicator.hpp"

#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "genesis/core/cpus.hpp"
#include "genesis/core/error.hpp"

namespace genesis::dist::shm {

namespace {

// How long a wait polls before it sleeps on the futex. With a CPU for every rank, polling takes
// nothing another rank needs, and the peer of a training step arrives some hundred microseconds
// late (ranks drift apart by that much in a step): met by polling, not by a futex round trip,
// which on a virtual machine also wakes a halted vCPU. With more ranks than CPUs the poller
// holds the CPU the awaited rank needs: poll briefly.
constexpr auto kPollWithCores = std::chrono::microseconds(500);
constexpr auto kPollShared = std::chrono::microseconds(20);
constexpr int kPollsPerClockRead = 64;
constexpr std::size_t kSmallBytes = 64 << 10;  // messages up to this take the one-sync path
constexpr std::size_t kPieceBytes = 256 << 10;  // a large all-reduce's step: fits in L2
constexpr auto kSleepSlice = std::chrono::milliseconds(50);  // liveness checks while asleep

// The segment's first line.
struct Header {
  std::atomic<std::uint32_t> ready;
  std::uint32_t world;
  std::uint64_t buffer_bytes;
};

bool reached(std::uint32_t value, std::uint32_t count) {
  return static_cast<std::int32_t>(value - count) >= 0;
}

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) {
  timespec slice{0, std::chrono::duration_cast<std::chrono::nanoseconds>(kSleepSlice).count()};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &slice,
          nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// ---- reductions: slice i of `world` buffers combined in rank order into out

template <typename T>
struct Plain {
  using Acc = T;
  static Acc load(const char* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }
  static void store(char* p, Acc v) { T t = static_cast<T>(v); std::memcpy(p, &t, sizeof(T)); }
};
struct Bf16 {
  using Acc = float;
  static Acc load(const char* p) { std::uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
  static void store(char* p, Acc v) { const std::uint16_t h = f32_to_bf16(v); std::memcpy(p, &h, 2); }
};
struct F16 {
  using Acc = float;
  static Acc load(const char* p) { std::uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
  static void store(char* p, Acc v) { const std::uint16_t h = f32_to_f16(v); std::memcpy(p, &h, 2); }
};
// Integers add and multiply modulo 2^bits, as torch's do, without signed overflow.
template <typename T>
struct Wrapping {
  using Acc = T;
  static Acc load(const char* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }
  static void store(char* p, Acc v) { std::memcpy(p, &v, sizeof(T)); }
};

template <typename A>
A combine(A a, A b, ReduceOp op) {
  using U = std::make_unsigned_t<
      std::conditional_t<std::is_integral_v<A> && !std::is_same_v<A, bool>, A, int>>;
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>)
        return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
      else if constexpr (std::is_same_v<A, bool>) return a || b;
      else return a + b;
    case ReduceOp::PROD:
      if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>)
        return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
      else if constexpr (std::is_same_v<A, bool>) return a && b;
      else return a * b;
    case ReduceOp::MAX: return b > a || (b != b) ? b : a;  // NaN wins, as torch.maximum
    case ReduceOp::MIN: return b < a || (b != b) ? b : a;
  }
  return a;
}

template <typename Codec>
void reduce_typed(const std::vector<const char*>& in, char* out, std::size_t n, ReduceOp op,
                  std::size_t elem) {
  using A = typename Codec::Acc;
  const auto world = in.size();
  for (std::size_t i = 0; i < n; ++i) {
    A acc = Codec::load(in[0] + i * elem);
    for (std::size_t q = 1; q < world; ++q) acc = combine(acc, Codec::load(in[q] + i * elem), op);
    if constexpr (std::is_floating_point_v<A>)
      if (op == ReduceOp::AVG) acc /= static_cast<A>(world);
    Codec::store(out + i * elem, acc);
  }
}

// f32 sums, DDP's case, a block at a time so the adds vectorise; every output gets the sums, and
// an output may be one of the inputs (each block is read whole before any is written).
void sum_f32(const std::vector<const char*>& in, const std::vector<char*>& outs, std::size_t n,
             bool average) {
  constexpr std::size_t kBlock = 1024;
  alignas(64) float acc[kBlock];
  for (std::size_t first = 0; first < n; first += kBlock) {
    const std::size_t m = std::min(kBlock, n - first);
    std::memcpy(acc, in[0] + first * 4, m * 4);
    for (std::size_t q = 1; q < in.size(); ++q) {
      const char* part = in[q] + first * 4;
      for (std::size_t i = 0; i < m; ++i) {
        float v;  // a 4-byte copy: an unaligned load the adds vectorise around
        std::memcpy(&v, part + i * 4, 4);
        acc[i] += v;
      }
    }
    if (average)
      for (std::size_t i = 0; i < m; ++i) acc[i] /= static_cast<float>(in.size());
    for (char* out : outs) std::memcpy(out + first * 4, acc, m * 4);
  }
}

// n elements of slices `in` combined in rank order into every one of `outs` (the first may be
// one of the inputs; the others are written after every input has been read).
void reduce_slices(const std::vector<const char*>& in, const std::vector<char*>& outs,
                   std::size_t n, DType dtype, ReduceOp op) {
  if (dtype == DType::f32 && (op == ReduceOp::SUM || op == ReduceOp::AVG))
    return sum_f32(in, outs, n, op == ReduceOp::AVG);
  const std::size_t elem = dtype_size(dtype);
  char* out = outs.front();
  switch (dtype) {
    case DType::f32: reduce_typed<Plain<float>>(in, out, n, op, elem); break;
    case DType::bf16: reduce_typed<Bf16>(in, out, n, op, elem); break;
    case DType::f16: reduce_typed<F16>(in, out, n, op, elem); break;
    case DType::i32: reduce_typed<Wrapping<std::int32_t>>(in, out, n, op, elem); break;
    case DType::i64: reduce_typed<Wrapping<std::int64_t>>(in, out, n, op, elem); break;
    case DType::boolean: reduce_typed<Plain<bool>>(in, out, n, op, elem); break;
  }
  for (std::size_t i = 1; i < outs.size(); ++i) std::memcpy(outs[i], out, n * elem);
}

void check_op(DType dtype, ReduceOp op) {
  const bool floating = dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
  GENESIS_CHECK(floating || op != ReduceOp::AVG, InvalidArgument,
                "shared memory: AVG needs a floating tensor, got " +
                    std::string(dtype_name(dtype)));
}

}  // namespace

// What an all-reduce works on, published before its first arrival so that every rank can check
// that its peers reduce the same thing: bytes, and where (kPrivate, or a shared buffer's place).
struct Descriptor {
  std::uint64_t bytes;
  std::uint64_t where;
};

struct Communicator::Line {
  std::atomic<std::uint32_t> arrivals;
  std::atomic<std::uint32_t> sleepers;  // ranks asleep on `arrivals`
  std::int32_t pid;
  Descriptor described[2];  // by the parity of the op's first step, as the buffers' halves
};

std::size_t Communicator::segment_bytes(int world, std::size_t buffer_bytes) {
  const std::size_t buffer = (buffer_bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
  const auto ranks = static_cast<std::size_t>(world);
  return kCacheLine * (1 + ranks) + buffer * ranks + Mailboxes::region_bytes(world);
}

char* Communicator::mailbox_region() const {
  return segment_.data() + kCacheLine * (1 + world_) + buffer_bytes_ * static_cast<std::size_t>(world_);
}

bool Communicator::peer_alive(int r) const {
  const std::int32_t pid = line(r).pid;
  return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH;
}

Communicator::Communicator(const std::string& name, int rank, int world,
                           std::size_t buffer_bytes, Milliseconds timeout)
    : rank_(rank),
      world_(world),
      buffer_bytes_((buffer_bytes + kCacheLine - 1) / kCacheLine * kCacheLine),
      timeout_(timeout),
      poll_(world <= usable_cores() ? kPollWithCores : kPollShared) {
  static_assert(sizeof(Line) <= kCacheLine);
  GENESIS_CHECK(world >= 1 && rank >= 0 && rank < world &&
                    buffer_bytes >= 16 * static_cast<std::size_t>(world),
                InvalidArgument,
                "shared memory: rank " + std::to_string(rank) + " of " + std::to_string(world) +
                    " with " + std::to_string(buffer_bytes) + "-byte buffers");
  const std::size_t bytes = segment_bytes(world, buffer_bytes);
  segment_ = rank == 0 ? Segment::create(name, bytes) : Segment::open(name, bytes, timeout);
  auto* header = reinterpret_cast<Header*>(segment_.data());
  if (rank == 0) {
    header->world = static_cast<std::uint32_t>(world);
    header->buffer_bytes = buffer_bytes_;
    header->ready.store(1, std::memory_order_release);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (header->ready.load(std::memory_order_acquire) == 0) {
      if (std::chrono::steady_clock::now() > deadline)
        throw CommError("shared memory: /dev/shm/" + name + " was never initialised by rank 0");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    GENESIS_CHECK(header->world == static_cast<std::uint32_t>(world) &&
                      header->buffer_bytes == buffer_bytes_,
                  CommError,
                  "shared memory: /dev/shm/" + name + " was made for " +
                      std::to_string(header->world) + " ranks, this rank expects " +
                      std::to_string(world));
  }
  line(rank).pid = static_cast<std::int32_t>(getpid());
  sync();  // everyone has mapped it: the name can go
  if (rank == 0) Segment::unlink(name);
}

Communicator::Line& Communicator::line(int r) const {
  return *reinterpret_cast<Line*>(segment_.data() + kCacheLine * (1 + r));
}

char* Communicator::buffer(int r) const {
  return segment_.data() + kCacheLine * (1 + world_) + buffer_bytes_ * r;
}

void Communicator::arrive() {
  Line& mine = line(rank_);
  mine.arrivals.store(++arrivals_, std::memory_order_seq_cst);
  if (mine.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(&mine.arrivals);
}

void Communicator::wait_for(int peer, std::uint32_t count) {
  Line& theirs = line(peer);
  const auto poll_until = std::chrono::steady_clock::now() + poll_;
  do {
    for (int i = 0; i < kPollsPerClockRead; ++i) {
      if (reached(theirs.arrivals.load(std::memory_order_acquire), count)) return;
      cpu_relax();
    }
  } while (std::chrono::steady_clock::now() < poll_until);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  theirs.sleepers.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    const std::uint32_t seen = theirs.arrivals.load(std::memory_order_seq_cst);
    if (reached(seen, count)) break;
    const std::string who = "rank " + std::to_string(peer) + " (pid " + std::to_string(theirs.pid) + ")";
    if (theirs.pid > 0 && kill(theirs.pid, 0) != 0 && errno == ESRCH) {
      theirs.sleepers.fetch_sub(1);
      throw CommError("shared memory: " + who + " exited in the middle of a collective");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      theirs.sleepers.fetch_sub(1);
      throw CommError("shared memory: " + who + " did not reach the collective within " +
                      std::to_string(timeout_.count()) + " ms");
    }
    futex_wait(&theirs.arrivals, seen);
  }
  theirs.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void Communicator::barrier() { sync(); }

bool Communicator::small(std::size_t bytes) const { return bytes <= std::min(kSmallBytes, piece_bytes()); }

std::size_t Communicator::piece_bytes() const { return std::min(kPieceBytes, buffer_bytes_ / 2); }

char* Communicator::half(int r) const {
  return buffer(r) + (parity_ ? buffer_bytes_ / 2 : 0);
}

// Every op moves its data in steps through one half of the buffers, the next step through the
// other: a rank writes a half only after its peers arrived for the step in between, which they
// do once done reading that half, so a step needs no sync after its reads.
void Communicator::next_half() { parity_ ^= 1; }

// A peer's half stays untouched until this rank arrives once more, and so does its descriptor
// of the same parity: read after the op's first arrival, it is the peer's for this op.
void Communicator::describe(std::uint64_t bytes, std::uint64_t where) {
  line(rank_).described[parity_] = {bytes, where};
}

void Communicator::check_described(const char* op) const {
  const Descriptor mine = line(rank_).described[parity_];
  for (int q = 0; q < world_; ++q) {
    const Descriptor theirs = line(q).described[parity_];
    if (theirs.bytes == mine.bytes && theirs.where == mine.where) continue;
    const auto what = [](const Descriptor& d) {
      return std::to_string(d.bytes) + " bytes " +
             (d.where == kPrivate ? std::string("of its own memory") : "of a shared buffer");
    };
    throw CommError("shared memory: " + std::string(op) + " of " + what(mine) + " on rank " +
                    std::to_string(rank_) + ", of " + what(theirs) + " on rank " +
                    std::to_string(q) + ": every rank must pass the same tensor of a buffer "
                    "every rank made with zeros_shared, or each its own");
  }
}

// One copy and one sync: every rank reduces the whole message from every buffer's current
// half, in rank order (the same bits everywhere).
void Communicator::small_all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  const std::size_t bytes = count * dtype_size(dtype);
  std::memcpy(half(rank_), data, bytes);
  sync();
  check_described("all_reduce");
  std::vector<const char*> all(static_cast<std::size_t>(world_));
  for (int q = 0; q < world_; ++q) all[static_cast<std::size_t>(q)] = half(q);
  reduce_slices(all, {static_cast<char*>(data)}, count, dtype, op);
  next_half();
}

void Communicator::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  check_op(dtype, op);
  const std::size_t elem = dtype_size(dtype);
  describe(count * elem, kPrivate);
  if (small(count * elem)) return small_all_reduce(data, count, dtype, op);
  const std::size_t piece = piece_bytes() / elem;
  auto* bytes = static_cast<char*>(data);
  for (std::size_t first = 0; first < count; first += piece)
    all_reduce_piece(bytes + first * elem, std::min(piece, count - first), dtype, op, first == 0);
}

// Every rank's copy is in memory this process maps: rank r reduces slice r of every copy in rank
// order and writes the result into every copy, reading and writing each byte once, with no
// staging; one arrival before (every copy holds its rank's data) and one after (every slice is
// everywhere).
void Communicator::all_reduce_in_place(const std::vector<char*>& copies, std::size_t count,
                                       DType dtype, ReduceOp op, std::uint64_t where) {
  check_op(dtype, op);
  const std::size_t elem = dtype_size(dtype);
  describe(count * elem, where);
  sync();
  check_described("all_reduce");
  const auto world = static_cast<std::size_t>(world_), rank = static_cast<std::size_t>(rank_);
  const std::size_t lo = count * rank / world, n = count * (rank + 1) / world - lo;
  std::vector<const char*> slices(world);
  std::vector<char*> outs(world);
  for (std::size_t q = 0; q < world; ++q) {
    slices[q] = copies[q] + lo * elem;
    outs[q] = copies[(rank + q) % world] + lo * elem;  // its own first: the in-place output
  }
  reduce_slices(slices, outs, n, dtype, op);
  sync();
  next_half();
}

// A piece small enough to stay in cache, in two syncs: each rank publishes the slices its peers
// reduce; rank r reduces slice r of every rank in rank order, in place in its own data, and
// publishes the result; each copies the others' results.
void Communicator::all_reduce_piece(char* data, std::size_t n, DType dtype, ReduceOp op,
                                    bool first) {
  const std::size_t elem = dtype_size(dtype);
  const auto lo = [&](int r) { return n * static_cast<std::size_t>(r) / static_cast<std::size_t>(world_) * elem; };
  const auto length = [&](int r) { return lo(r + 1) - lo(r); };
  for (int q = 0; q < world_; ++q)
    if (q != rank_) std::memcpy(half(rank_) + lo(q), data + lo(q), length(q));
  sync();
  if (first) check_described("all_reduce");
  std::vector<const char*> slices(static_cast<std::size_t>(world_));
  for (int q = 0; q < world_; ++q)
    slices[static_cast<std::size_t>(q)] = (q == rank_ ? data : half(q)) + lo(rank_);
  reduce_slices(slices, {data + lo(rank_), half(rank_) + lo(rank_)}, length(rank_) / elem, dtype,
                op);
  sync();
  for (int q = 0; q < world_; ++q)
    if (q != rank_) std::memcpy(data + lo(q), half(q) + lo(q), length(q));
  next_half();
}

void Communicator::broadcast(void* data, std::size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (std::size_t first = 0; first < bytes; first += piece_bytes()) {
    const std::size_t n = std::min(piece_bytes(), bytes - first);
    if (rank_ == root) std::memcpy(half(root), p + first, n);
    sync();
    if (rank_ != root) std::memcpy(p + first, half(root), n);
    next_half();
  }
}

void Communicator::all_gather(const void* in, void* out, std::size_t bytes) {
  const auto* src = static_cast<const char*>(in);
  auto* dst = static_cast<char*>(out);
  describe(bytes, kPrivate);
  for (std::size_t first = 0; first < bytes; first += piece_bytes()) {
    const std::size_t n = std::min(piece_bytes(), bytes - first);
    std::memcpy(half(rank_), src + first, n);
    sync();
    if (first == 0) check_described("all_gather");
    for (int q = 0; q < world_; ++q) std::memcpy(dst + q * bytes + first, half(q), n);
    next_half();
  }
}

void Communicator::reduce_scatter(const void* in, void* out, std::size_t count, DType dtype,
                                  ReduceOp op) {
  check_op(dtype, op);
  const std::size_t elem = dtype_size(dtype);
  const auto world = static_cast<std::size_t>(world_);
  // A step holds a piece of every rank's chunk: world pieces of `piece` elements.
  const std::size_t piece = std::max<std::size_t>(1, piece_bytes() / elem / world);
  const auto* src = static_cast<const char*>(in);
  auto* dst = static_cast<char*>(out);
  std::vector<const char*> slices(world);
  describe(count * elem, kPrivate);
  for (std::size_t first = 0; first < count; first += piece) {
    const std::size_t n = std::min(piece, count - first);
    for (std::size_t q = 0; q < world; ++q)
      std::memcpy(half(rank_) + q * n * elem, src + (q * count + first) * elem, n * elem);
    sync();
    if (first == 0) check_described("reduce_scatter");
    for (std::size_t q = 0; q < world; ++q)
      slices[q] = half(static_cast<int>(q)) + static_cast<std::size_t>(rank_) * n * elem;
    reduce_slices(slices, {dst + first * elem}, n, dtype, op);
    next_half();
  }
}

// Every rank's input lies where this process maps it: rank r reduces chunk r of every copy in
// rank order straight into `out` (which may be its own copy's chunk); the second arrival keeps
// each input unchanged until every peer has read its chunk.
void Communicator::reduce_scatter_in_place(const std::vector<char*>& copies, void* out,
                                           std::size_t count, DType dtype, ReduceOp op,
                                           std::uint64_t where) {
  check_op(dtype, op);
  const std::size_t elem = dtype_size(dtype);
  describe(count * elem, where);
  sync();
  check_described("reduce_scatter");
  std::vector<const char*> chunks(copies.size());
  for (std::size_t q = 0; q < copies.size(); ++q)
    chunks[q] = copies[q] + static_cast<std::size_t>(rank_) * count * elem;
  reduce_slices(chunks, {static_cast<char*>(out)}, count, dtype, op);
  sync();
  next_half();
}

// inputs[q] is rank q's input, in memory this process maps: each rank copies every peer's
// straight into `out` (its own too, unless it is already there).
void Communicator::all_gather_in_place(const std::vector<const char*>& inputs, void* out,
                                       std::size_t bytes, std::uint64_t where) {
  describe(bytes, where);
  sync();
  check_described("all_gather");
  auto* dst = static_cast<char*>(out);
  for (std::size_t q = 0; q < inputs.size(); ++q)
    if (dst + q * bytes != inputs[q]) std::memcpy(dst + q * bytes, inputs[q], bytes);
  sync();
  next_half();
}

}  // namespace genesis::dist::shm
