// The message of an exception a test expects, for checks on its wording.
#pragma once

#include <string>

namespace genesis::testing {

// The message of the E that `f` throws; another exception type escapes and fails the test.
template <class E, class F>
std::string thrown_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<nothing thrown>";
}

}  // namespace genesis::testing
