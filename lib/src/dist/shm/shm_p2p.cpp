#include "shm_p2p.hpp"

#include <cstring>

#include "genesis/core/error.hpp"

namespace genesis::dist::shm {

namespace {

constexpr int kSpins = 2000;                       // polls before sleeping on the bell
constexpr auto kWaitSlice = std::chrono::milliseconds(20);  // deadline and liveness checks

std::size_t bytes_of(const Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
}

char* data_of(const Tensor& t) { return static_cast<char*>(const_cast<Tensor&>(t).raw_data()); }

}  // namespace

PointToPoint::PointToPoint(Mailboxes& boxes, int rank, int world, std::function<bool(int)> alive)
    : boxes_(boxes),
      rank_(rank),
      world_(world),
      alive_(std::move(alive)),
      sends_(static_cast<std::size_t>(world)),
      recvs_(static_cast<std::size_t>(world)),
      thread_([this] { run(); }) {}

PointToPoint::~PointToPoint() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  submitted_.notify_all();
  boxes_.ring_own();
  thread_.join();
}

std::shared_ptr<Work> PointToPoint::send(const Tensor& tensor, int dst, int tag,
                                         Milliseconds timeout) {
  return submit(true, tensor, dst, tag, timeout);
}

std::shared_ptr<Work> PointToPoint::recv(Tensor& tensor, int src, int tag, Milliseconds timeout) {
  return submit(false, tensor, src, tag, timeout);
}

std::shared_ptr<Work> PointToPoint::submit(bool sending, const Tensor& tensor, int peer, int tag,
                                           Milliseconds timeout) {
  const std::string what = (sending ? "send to rank " : "recv from rank ") + std::to_string(peer);
  auto& lists = sending ? sends_ : recvs_;
  std::shared_ptr<Work> work;
  {
    std::lock_guard lock(mutex_);
    work = std::make_shared<Work>(what + " (tag " + std::to_string(tag) + ") #" +
                                  std::to_string(++count_) + " on rank " + std::to_string(rank_) +
                                  " (shm)");
    if (!broken_.empty()) {
      work->mark_completed(std::make_exception_ptr(
          CommError(work->description() + ": the group failed earlier: " + broken_)));
      return work;
    }
    lists[static_cast<std::size_t>(peer)].push_back(
        {work, tensor, peer, tag, sending, 0, std::chrono::steady_clock::now() + timeout});
  }
  submitted_.notify_one();
  boxes_.ring_own();
  return work;
}

// Moves every chunk it can; true when it moved one (a message of 0 bytes is one empty chunk).
bool PointToPoint::advance(Message& m) {
  const std::size_t total = bytes_of(m.tensor);
  bool moved = false;
  std::size_t n = 0;
  while (m.done < total || (total == 0 && !moved)) {
    char* at = data_of(m.tensor) + m.done;
    const bool ok = m.sending ? boxes_.try_send(m.peer, m.tag, total, at, total - m.done, n)
                            : boxes_.try_recv(m.peer, m.tag, total, at, total - m.done, n);
    if (!ok) break;
    m.done += n;
    moved = true;
  }
  return moved;
}

bool PointToPoint::pending() const {
  for (int q = 0; q < world_; ++q)
    if (!sends_[static_cast<std::size_t>(q)].empty() || !recvs_[static_cast<std::size_t>(q)].empty())
      return true;
  return false;
}

void PointToPoint::check_waiting(const std::vector<Message*>& fronts) {
  const auto now = std::chrono::steady_clock::now();
  for (const Message* m : fronts) {
    const std::string who = "rank " + std::to_string(m->peer);
    if (!alive_(m->peer))
      throw CommError(m->work->description() + ": " + who + " exited before the message was through");
    if (now > m->deadline)
      throw CommError(m->work->description() + ": not through within the timeout (" + who +
                      " did not post the matching " +
                      (m->sending ? "recv" : "send") +
                      ")");
  }
}

void PointToPoint::fail_all(const std::string& why) {
  broken_ = why;
  for (auto* lists : {&sends_, &recvs_})
    for (auto& list : *lists) {
      for (Message& m : list)
        m.work->mark_completed(std::make_exception_ptr(CommError(m.work->description() + ": " + why)));
      list.clear();
    }
}

void PointToPoint::run() {
  int idle_polls = 0;
  for (;;) {
    const std::uint32_t seen = boxes_.bell();
    std::vector<Message*> fronts;
    {
      std::unique_lock lock(mutex_);
      submitted_.wait(lock, [this] { return stopping_ || pending(); });
      if (stopping_) return fail_all("the group was destroyed");
      // References stay valid while submit() appends; only this thread removes.
      for (auto* lists : {&sends_, &recvs_})
        for (auto& list : *lists)
          if (!list.empty()) fronts.push_back(&list.front());
    }
    bool moved = false;
    try {
      for (Message* m : fronts) {
        const bool this_moved = advance(*m);
        moved = moved || this_moved;
        const std::size_t total = bytes_of(m->tensor);
        if (total > 0 ? m->done < total : !this_moved) continue;
        auto work = m->work;
        {
          std::lock_guard lock(mutex_);
          (m->sending ? sends_ : recvs_)[static_cast<std::size_t>(m->peer)].pop_front();
        }
        work->mark_completed();
      }
      if (!moved && ++idle_polls > kSpins) {
        check_waiting(fronts);
        boxes_.wait(seen, kWaitSlice);
      }
      if (moved) idle_polls = 0;
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      fail_all(e.what());
    }
  }
}

}  // namespace genesis::dist::shm
