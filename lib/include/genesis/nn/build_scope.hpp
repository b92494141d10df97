// Deferred initialisation's hook into model constructors (DeepSpeed's zero.Init, FSDP's deferred
// init): a constructor announces each finished submodule that a sharding strategy treats as one
// unit (GPT: each Block, MLP: each Linear), so that the listener installed around the build can
// shard it before the next one exists and the whole model is never held at once. Without an
// active scope an announcement does nothing. Not here: what a listener does (parallel/).
#pragma once

#include <functional>
#include <string>

#include "genesis/nn/module.hpp"

namespace genesis::nn {

// path: the module's dotted path in the model under construction ("h.3", "layers.2").
using BuildListener = std::function<void(const std::string& path, Module& module)>;

// Installs `listener` for the models built on this thread (ranks as threads build side by side)
// until destroyed; an inner scope hides the outer one while it lives.
class BuildScope {
 public:
  explicit BuildScope(BuildListener listener);
  ~BuildScope();
  BuildScope(const BuildScope&) = delete;
  BuildScope& operator=(const BuildScope&) = delete;

 private:
  friend void announce_unit(const std::string& path, Module& module);
  BuildListener listener_;
  BuildScope* outer_;
};

// For model constructors: `module`, complete with its parameters, will not change before the
// model is finished. An exception from the listener propagates out of the constructor.
void announce_unit(const std::string& path, Module& module);

// While it lives, each unit announced on this thread is first passed to `finish` (LoRA adds its
// adapters and freezes the unit's base), before any listener sees it: a sharding listener then
// shards the finished unit. An inner one replaces the outer while it lives.
class UnitFinish {
 public:
  explicit UnitFinish(BuildListener finish);
  ~UnitFinish();
  UnitFinish(const UnitFinish&) = delete;
  UnitFinish& operator=(const UnitFinish&) = delete;

 private:
  BuildListener outer_;
};

// While it lives, the units announced on this thread are named under `prefix` ("critic." +
// "h.0"): for a model built as a submodule of another, whose constructor names its units from
// its own root.
class UnitPrefix {
 public:
  explicit UnitPrefix(const std::string& prefix);
  ~UnitPrefix();
  UnitPrefix(const UnitPrefix&) = delete;
  UnitPrefix& operator=(const UnitPrefix&) = delete;

 private:
  std::string outer_;
};

}  // namespace genesis::nn
