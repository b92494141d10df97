// UniqueFd as its owners rely on it: the descriptor is closed when the owner goes, a move hands
// it over without closing it, and close() reports what the kernel said.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "genesis/core/unique_fd.hpp"

using genesis::UniqueFd;

namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

}  // namespace

TEST_CASE("UniqueFd closes its descriptor when it goes", "[unique_fd]") {
  int raw = -1;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    raw = fd.get();
    CHECK(is_open(raw));
  }
  CHECK_FALSE(is_open(raw));
}

TEST_CASE("UniqueFd moves ownership without closing", "[unique_fd]") {
  UniqueFd first(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = first.get();
  UniqueFd second = std::move(first);
  CHECK_FALSE(first);
  CHECK(second.get() == raw);
  CHECK(is_open(raw));
  UniqueFd third(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int replaced = third.get();
  third = std::move(second);
  CHECK(third.get() == raw);
  CHECK_FALSE(is_open(replaced));
  CHECK(is_open(raw));
}

TEST_CASE("UniqueFd close and release report and give up the descriptor", "[unique_fd]") {
  UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = fd.get();
  CHECK(fd.close() == 0);
  CHECK_FALSE(fd);
  CHECK_FALSE(is_open(raw));
  CHECK(fd.close() == 0);  // nothing held: nothing to report

  UniqueFd kept(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int released = kept.release();
  CHECK_FALSE(kept);
  CHECK(is_open(released));
  ::close(released);
}
