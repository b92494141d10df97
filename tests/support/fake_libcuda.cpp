// A stand-in for the NVIDIA driver library (libcuda.so.1) that the CUDA runtime loads, so tests
// can show genesis a GPU that is present but unusable on machines without one. It reports the
// driver version FAKE_CUDA_DRIVER_VERSION (default 13000) and makes cuInit return
// FAKE_CUDA_INIT_RESULT (a CUresult; default 0). The runtime resolves every other entry point
// through cuGetProcAddress, which finds only these, so it fails at once instead of using them.
// Used only through LD_LIBRARY_PATH by tests/tensor/test_gpu_status.cpp.
#include <dlfcn.h>

#include <cstdlib>

namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

}  // namespace

extern "C" {

int cuDriverGetVersion(int* version) {
  *version = env_int("FAKE_CUDA_DRIVER_VERSION", 13000);
  return 0;
}

int cuInit(unsigned) { return env_int("FAKE_CUDA_INIT_RESULT", 0); }

int cuGetProcAddress_v2(const char* symbol, void** fn, int, unsigned long long, int* found) {
  *fn = dlsym(RTLD_DEFAULT, symbol);
  if (found != nullptr) *found = *fn != nullptr ? 1 : 0;
  return *fn != nullptr ? 0 : 500;  // CUDA_ERROR_NOT_FOUND
}

int cuGetProcAddress(const char* symbol, void** fn, int version, unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, fn, version, flags, nullptr);
}

int cuGetExportTable(const void**, const void*) { return 999; }  // CUDA_ERROR_UNKNOWN

}  // extern "C"
