// Tests state a parsed setting as the text a user writes (`CHECK(c.training.optimizer == "sgd")`),
// a comparison the library itself never makes once the config layer has turned the text into an
// enum; Catch prints the value the same way.
#pragma once

#include <ostream>
#include <string_view>

#include "genesis/core/config.hpp"

namespace genesis {

template <Setting E>
bool operator==(E value, std::string_view text) {
  return to_string(value) == text;
}

template <Setting E>
std::ostream& operator<<(std::ostream& out, E value) {
  return out << to_string(value);
}

}  // namespace genesis
