// Generator: Box-Muller normals and state save/restore through the engine's stream operators.
#include "genesis/tensor/random.hpp"

#include <cmath>
#include <sstream>

#include "genesis/core/error.hpp"

namespace genesis {

float Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // u1 in (0, 1] so the log is finite.
  double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;
  double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  double r = std::sqrt(-2.0 * std::log(u1));
  double theta = 2.0 * M_PI * u2;
  spare_ = static_cast<float>(r * std::sin(theta));
  has_spare_ = true;
  return static_cast<float>(r * std::cos(theta));
}

std::string Generator::state() const {
  std::ostringstream out;
  out << engine_ << ' ' << has_spare_ << ' ' << std::hexfloat << spare_;
  return out.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream in(state);
  std::string spare;
  in >> engine_ >> has_spare_ >> spare;
  if (in.fail()) throw InvalidArgument("corrupt random generator state");
  spare_ = std::strtof(spare.c_str(), nullptr);
}

}  // namespace genesis
