// Formatting helpers for errors: file names are shortened to the part below lib/ so messages
// do not show where the source tree happened to live when it was built.
#include "genesis/core/error.hpp"

#include <string_view>

namespace genesis::detail {

std::string where(const std::source_location& loc) {
  std::string_view file = loc.file_name();
  if (auto pos = file.rfind("/lib/"); pos != std::string_view::npos) file.remove_prefix(pos + 1);
  return std::string(file) + ":" + std::to_string(loc.line());
}

}  // namespace genesis::detail
