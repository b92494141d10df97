// The active build scope of each thread (see build_scope.hpp).
#include "genesis/nn/build_scope.hpp"

#include "genesis/core/error.hpp"

namespace genesis::nn {
namespace {
thread_local BuildScope* active = nullptr;
thread_local std::string unit_prefix;
thread_local BuildListener finisher;
}  // namespace

BuildScope::BuildScope(BuildListener listener) : listener_(std::move(listener)), outer_(active) {
  GENESIS_CHECK(listener_ != nullptr, InvalidArgument, "BuildScope: empty listener");
  active = this;
}

BuildScope::~BuildScope() { active = outer_; }

void announce_unit(const std::string& path, Module& module) {
  if (finisher) finisher(unit_prefix + path, module);
  if (active != nullptr) active->listener_(unit_prefix + path, module);
}

UnitFinish::UnitFinish(BuildListener finish) : outer_(std::move(finisher)) {
  finisher = std::move(finish);
}

UnitFinish::~UnitFinish() { finisher = std::move(outer_); }

UnitPrefix::UnitPrefix(const std::string& prefix) : outer_(unit_prefix) { unit_prefix += prefix; }

UnitPrefix::~UnitPrefix() { unit_prefix = outer_; }

}  // namespace genesis::nn
