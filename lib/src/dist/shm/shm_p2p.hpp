// The engine behind the shm group's send and recv: its own thread drives every pending message
// through the mailboxes (shm_mailboxes.hpp) a chunk at a time, sends to and receives from each
// peer in the order they were submitted, and never waits on one message while another could
// move, so two ranks that send to each other before receiving do not deadlock whatever the
// size. A message that does not complete within its timeout, or whose peer is gone, fails with
// a CommError naming the peer; as with collectives, every later message then fails too.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/milliseconds.hpp"
#include "genesis/dist/work.hpp"
#include "genesis/tensor/tensor.hpp"
#include "shm_mailboxes.hpp"

namespace genesis::dist::shm {

class PointToPoint {
 public:
  // `alive(peer)`: whether the peer's process still runs.
  PointToPoint(Mailboxes& boxes, int rank, int world, std::function<bool(int)> alive);
  ~PointToPoint();  // fails what is pending, joins the thread
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag, Milliseconds timeout);
  std::shared_ptr<Work> recv(Tensor& tensor, int src, int tag, Milliseconds timeout);

 private:
  struct Message {
    std::shared_ptr<Work> work;
    Tensor tensor;  // kept alive until done
    int peer, tag;
    bool sending;
    std::size_t done = 0;
    std::chrono::steady_clock::time_point deadline;
  };
  std::shared_ptr<Work> submit(bool sending, const Tensor& tensor, int peer, int tag,
                               Milliseconds timeout);
  void run();
  bool advance(Message& m);
  bool pending() const;
  void check_waiting(const std::vector<Message*>& fronts);
  void fail_all(const std::string& why);

  Mailboxes& boxes_;
  int rank_, world_;
  std::function<bool(int)> alive_;
  std::mutex mutex_;
  std::condition_variable submitted_;
  std::vector<std::deque<Message>> sends_, recvs_;  // per peer, in submission order
  std::uint64_t count_ = 0;
  bool stopping_ = false;
  std::string broken_;
  std::thread thread_;  // last
};

}  // namespace genesis::dist::shm
