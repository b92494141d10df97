// The active build scope of each thread (see build_scope.hpp).
#include "genesis/nn/build_scope.hpp"

#include "genesis/core/error.hpp"

namespace genesis::nn {
namespace {
thread_local BuildScope* active = nullptr;
}  // namespace

BuildScope::BuildScope(BuildListener listener) : listener_(std::move(listener)), outer_(active) {
  GENESIS_CHECK(listener_ != nullptr, InvalidArgument, "BuildScope: empty listener");
  active = this;
}

BuildScope::~BuildScope() { active = outer_; }

void announce_unit(const std::string& path, Module& module) {
  if (active != nullptr) active->listener_(path, module);
}

}  // namespace genesis::nn
