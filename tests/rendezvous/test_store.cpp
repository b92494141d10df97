// FileStore and PrefixStore: the file store across threads and forked processes (exact totals under
// concurrent add), timeouts that name the missing keys, and prefix isolation over both HashStore
// and FileStore. The TCP store has its own file (test_tcp_store.cpp).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/rendezvous/file_store.hpp"
#include "genesis/rendezvous/prefix_store.hpp"
#include "support/cli_run.hpp"
#include "support/store_client.hpp"

using namespace genesis;
using namespace genesis::rendezvous;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
using genesis::testing::thrown_message;

namespace {

// Runs `body` in a forked child; the child exits 0 when it returns, 1 (with the message on stderr)
// when it throws. Never returns into Catch2 in the child.
pid_t spawn(const std::function<void()>& body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child failed: %s\n", e.what());
      code = 1;
    }
    _exit(code);
  }
  return pid;
}

int exit_status(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("FileStore set/get/add/check/wait in one process", "[store]") {
  testing::TempDir dir;
  FileStore store(dir.path() / "store", 2s);
  CHECK_FALSE(store.check({"a"}));
  store.set("a", "1");
  store.set("bytes", std::string("x\0y", 3));
  CHECK(store.get("a") == "1");
  CHECK(store.get("bytes") == std::string("x\0y", 3));
  store.set("a", "overwritten");
  CHECK(store.get("a") == "overwritten");
  CHECK(store.add("n", 5) == 5);
  CHECK(store.add("n", -2) == 3);
  CHECK(store.get("n") == "3");
  CHECK(store.check({"a", "n"}));
  CHECK_FALSE(store.check({"a", "absent"}));
  CHECK_THROWS_AS(store.add("a", 1), InvalidArgument);

  // A second object on the same file sees everything the first wrote.
  FileStore other(dir.path() / "store", 2s);
  CHECK(other.get("a") == "overwritten");
  CHECK(other.add("n", 1) == 4);
  CHECK(store.get("n") == "4");
}

TEST_CASE("FileStore get on a missing key times out naming it", "[store]") {
  testing::TempDir dir;
  FileStore store(dir.path() / "store", 100ms);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_MATCHES(
      store.get("never_set"), Timeout,
      Catch::Matchers::Message("store timeout after 100 ms waiting for keys: never_set"));
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  store.set("present", "1");
  CHECK_THAT(thrown_message<Timeout>([&] {
               store.wait({"present", "gone"}, 50ms);
             }),
             Contains("keys: gone") && !Contains("present"));
}

TEST_CASE("FileStore wait wakes when another thread sets the key", "[store]") {
  testing::TempDir dir;
  FileStore store(dir.path() / "store", 5s);
  std::thread setter([&] {
    FileStore mine(dir.path() / "store", 5s);
    std::this_thread::sleep_for(50ms);
    mine.set("late", "here");
  });
  CHECK(store.get("late") == "here");
  setter.join();
}

TEST_CASE("FileStore across forked processes", "[store]") {
  testing::TempDir dir;
  const auto path = dir.path() / "store";
  const pid_t child = spawn([&] {
    FileStore store(path, 10s);
    store.set("from_child", "c");
    if (store.get("from_parent") != "p") throw std::runtime_error("wrong value from parent");
    store.set("child_done", "1");
  });
  FileStore store(path, 10s);
  CHECK(store.get("from_child") == "c");
  store.set("from_parent", "p");
  store.wait({"child_done"});
  CHECK(exit_status(child) == 0);
}

TEST_CASE("FileStore add is atomic across processes", "[store]") {
  testing::TempDir dir;
  const auto path = dir.path() / "store";
  constexpr int kProcs = 4, kAdds = 100;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcs; ++p)
    children.push_back(spawn([&] {
      FileStore store(path, 10s);
      for (int i = 0; i < kAdds; ++i) store.add("total", 1);
    }));
  FileStore store(path, 10s);
  for (int i = 0; i < kAdds; ++i) store.add("total", 1);
  for (pid_t c : children) CHECK(exit_status(c) == 0);
  CHECK(store.add("total", 0) == (kProcs + 1) * kAdds);
  CHECK(store.get("total") == std::to_string((kProcs + 1) * kAdds));
}

TEST_CASE("FileStore names the path when it cannot open the file", "[store]") {
  CHECK_THAT(thrown_message<IoError>([] { FileStore("/nonexistent-dir-genesis/store", 1s); }),
             Contains("/nonexistent-dir-genesis/store"));
}

TEST_CASE("PrefixStore isolates namespaces of one base store", "[store]") {
  auto base = std::make_shared<HashStore>();
  base->set_timeout(200ms);
  PrefixStore a("attempt0", base), b("attempt1", base);
  a.set("k", "from a");
  b.set("k", "from b");
  CHECK(a.get("k") == "from a");
  CHECK(b.get("k") == "from b");
  CHECK(base->get("attempt0/k") == "from a");
  CHECK(a.add("n", 2) == 2);
  CHECK(b.add("n", 5) == 5);
  CHECK(a.check({"k", "n"}));
  CHECK_FALSE(a.check({"only_b"}));
  b.set("only_b", "1");
  CHECK_FALSE(a.check({"only_b"}));
  CHECK_THAT(thrown_message<Timeout>([&] { a.wait({"only_b"}, 50ms); }),
             Contains("attempt0/only_b"));
  a.set_timeout(50ms);
  CHECK_THROWS_AS(a.get("only_b"), Timeout);

  // Nesting composes the prefixes.
  auto inner = std::make_shared<PrefixStore>("group1", base);
  PrefixStore nested("attempt2", inner);
  nested.set("x", "1");
  CHECK(base->check({"group1/attempt2/x"}));
}

TEST_CASE("PrefixStore over a FileStore", "[store]") {
  testing::TempDir dir;
  auto base = std::make_shared<FileStore>(dir.path() / "store", 1s);
  PrefixStore a("a", base), b("b", base);
  a.set("k", "1");
  CHECK_FALSE(b.check({"k"}));
  CHECK(a.get("k") == "1");
  CHECK(base->get("a/k") == "1");
}
