// The words every process-group backend uses when an op fails, so a Gloo and an NCCL failure read
// the same: "all_reduce #3 on rank 1 timed out after 5000 ms; ranks that never arrived: 0".
// Also the arrival records behind that report: a rank whose collective is slow writes the op's
// sequence number under its arrival key, and a rank that gives up reads everyone else's.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "genesis/rendezvous/store.hpp"

namespace genesis::dist::detail {

// "all_reduce #3 on rank 1"; seq 0 (send, recv: not numbered) leaves the number out.
inline std::string op_description(std::string_view op, std::uint64_t seq, int rank) {
  return std::string(op) + (seq != 0 ? " #" + std::to_string(seq) : std::string()) +
         " on rank " + std::to_string(rank);
}

inline std::string timed_out_message(const std::string& description, Milliseconds timeout) {
  return description + " timed out after " + std::to_string(timeout.count()) + " ms";
}

inline std::string failed_message(const std::string& description, std::string_view what) {
  return description + " failed: " + std::string(what);
}

// An op submitted after an earlier one broke the group (its message is `broken`).
inline std::string broken_message(const std::string& description, const std::string& broken) {
  return description + " cannot run: the group is broken since " + broken;
}

inline std::string destroyed_message(const std::string& description) {
  return description + " never ran: its process group was destroyed first";
}

// One key per rank and backend, overwritten, so a long job does not grow the store.
inline std::string arrival_key(std::string_view backend, int rank) {
  return std::string(backend) + "_arrived/" + std::to_string(rank);
}

// Which ranks never reached collective `seq`, from their arrival keys (seq 0: never joined the
// group at all, i.e. no key). Never throws: a store that cannot answer is said so.
inline std::string arrival_report(rendezvous::Store& store, std::string_view backend, int rank,
                                  int size, std::uint64_t seq) {
  std::string missing;
  try {
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      const std::string key = arrival_key(backend, r);
      const bool arrived = store.check({key}) && std::stoull(store.get(key)) >= seq;
      if (!arrived) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
  } catch (const std::exception& e) {
    return std::string("the store could not tell which ranks arrived: ") + e.what();
  }
  return missing.empty() ? "every rank arrived (a peer failed or the connection broke)"
                         : "ranks that never arrived: " + missing;
}

}  // namespace genesis::dist::detail
