// OpenBLAS built with DYNAMIC_ARCH (as Debian's is) picks its kernel set once, in its load-time
// constructor, from OPENBLAS_CORETYPE or the CPU's model number. Its exported
// gotoblas_dynamic_quit/init pair forgets the pick and makes it again, reading OPENBLAS_CORETYPE
// anew; that is how a pick is corrected in-process, before any product runs. The variable is set
// only for that call, so the programs genesis starts (a user's PyTorch script under launch) see
// the environment the user gave.
#include "genesis/tensor/blas_kernels.hpp"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <sstream>

namespace genesis::cpu {
namespace {

using VoidFn = void (*)();

// From the widest: the feature a level needs, the kernel set OpenBLAS runs there, its name.
struct Level {
  bool CpuFeatures::*has;
  const char* kernels;
  const char* name;
};
constexpr std::array<Level, 4> kLevels = {{
    {&CpuFeatures::avx512_bf16, "Cooperlake", "AVX-512 BF16"},
    {&CpuFeatures::avx512, "SkylakeX", "AVX-512"},
    {&CpuFeatures::avx2, "Haswell", "AVX2"},
    {&CpuFeatures::avx, "Sandybridge", "AVX"},
}};

const Level* widest(const CpuFeatures& features) {
  for (const Level& level : kLevels)
    if (features.*level.has) return &level;
  return nullptr;
}

// Looks `name` up in the library that holds OpenBLAS, whether or not it is in the global scope.
VoidFn openblas_function(const char* name) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&openblas_get_corename), &info) == 0) return nullptr;
  void* library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (library == nullptr) return nullptr;
  auto function = reinterpret_cast<VoidFn>(dlsym(library, name));
  dlclose(library);  // RTLD_NOLOAD only counted one more reference
  return function;
}

// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21".
std::string library_name(const char* config) {
  std::istringstream words(config != nullptr ? config : "");
  std::string name, version;
  words >> name >> version;
  return version.empty() ? name : name + " " + version;
}

BlasKernels pick_kernels() {
  BlasKernels k;
  k.library = library_name(openblas_get_config());
  k.core = openblas_get_corename();
  k.user_chose = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  if (k.user_chose || !sse_only_kernels(k.core)) return k;
  const std::string better = kernels_for(cpu_features());
  if (better.empty()) return k;  // no AVX: nothing wider to run
  const VoidFn forget = openblas_function("gotoblas_dynamic_quit");
  const VoidFn pick = openblas_function("gotoblas_dynamic_init");
  if (forget == nullptr || pick == nullptr) return k;  // built for one CPU
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  forget();
  pick();
  unsetenv("OPENBLAS_CORETYPE");
  k.detected = k.core;
  k.core = openblas_get_corename();
  return k;
}

// At load, before anything can call a BLAS routine through genesis.
[[maybe_unused]] const bool picked_at_load = (blas_kernels(), true);

}  // namespace

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();  // may run before the constructor that fills in what the CPU supports
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

std::string kernels_for(const CpuFeatures& features) {
  const Level* level = widest(features);
  return level != nullptr ? level->kernels : "";
}

std::string widest_features(const CpuFeatures& features) {
  const Level* level = widest(features);
  return level != nullptr ? level->name : "";
}

bool sse_only_kernels(std::string_view core) {
  // OpenBLAS's x86-64 kernel sets that use AVX or more; every other x86 name is older.
  static constexpr std::array<std::string_view, 10> kWithAvx = {
      "Sandybridge", "Haswell",    "SkylakeX",    "Cooperlake", "SapphireRapids",
      "Zen",         "Bulldozer", "Piledriver", "Steamroller", "Excavator"};
  return std::find(kWithAvx.begin(), kWithAvx.end(), core) == kWithAvx.end();
}

const BlasKernels& blas_kernels() {
  static const BlasKernels kernels = pick_kernels();
  return kernels;
}

}  // namespace genesis::cpu
