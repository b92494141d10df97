// cuBLASLt handles (one per device, leaked on purpose) and the per-device plan cache behind
// lt_matmul: a plan is the matmul descriptor, the three matrix layouts and the algorithm the
// heuristic picked, keyed by everything the heuristic looks at (problem, epilogue, pointer
// alignments). Not here: autotuning over several algorithms (the heuristic's first is used).
#include "blas_handle.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda_check.hpp"
#include "device_memory.hpp"
#include "genesis/core/error.hpp"
#include "stream.hpp"

namespace genesis::cuda {

void throw_cublas_error(cublasStatus_t status, const char* call, const std::source_location& loc) {
  cudaGetLastError();  // a failed launch inside cuBLASLt must not resurface at an unrelated check
  throw CudaError(std::string(call) + " failed: " + cublasGetStatusString(status) + " (" +
                  cublasGetStatusName(status) + ") (" + ::genesis::detail::where(loc) + ")");
}

// ---- BlasHandle

BlasHandle BlasHandle::create(int device) {
  DeviceGuard guard(device);
  BlasHandle h;
  h.device_ = device;
  GENESIS_CUBLAS_CHECK(cublasLtCreate(&h.handle_));
  // On a throw, h's destructor releases the handle.
  GENESIS_CUDA_CHECK(cudaMalloc(&h.workspace_, kBlasWorkspaceBytes));
  return h;
}

BlasHandle::~BlasHandle() { reset(); }

BlasHandle::BlasHandle(BlasHandle&& other) noexcept
    : handle_(other.handle_), workspace_(other.workspace_), device_(other.device_) {
  other.handle_ = nullptr;
  other.workspace_ = nullptr;
  other.device_ = -1;
}

BlasHandle& BlasHandle::operator=(BlasHandle&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = other.handle_;
    workspace_ = other.workspace_;
    device_ = other.device_;
    other.handle_ = nullptr;
    other.workspace_ = nullptr;
    other.device_ = -1;
  }
  return *this;
}

void BlasHandle::reset() noexcept {
  if (workspace_ != nullptr) {
    // Free on the workspace's own device without DeviceGuard, whose constructor may throw.
    int actual = -1;
    const bool switched = cudaGetDevice(&actual) == cudaSuccess && actual != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    cudaFree(workspace_);
    if (switched) cudaSetDevice(cuda::device_to_return_to(actual));
    cudaGetLastError();
    workspace_ = nullptr;
  }
  if (handle_ != nullptr) {
    cublasLtDestroy(handle_);
    handle_ = nullptr;
  }
  device_ = -1;
}

// ---- per-device state

namespace {

// Everything the heuristic's choice depends on. Alignments are in bytes (powers of two, at most
// 256): an algorithm chosen for 256-byte aligned operands may fault on less aligned ones.
struct MatmulKey {
  LtProblem p;
  LtEpilogueKind epilogue = LtEpilogueKind::none;
  std::int64_t aux_ld = 0;
  std::uint32_t align_a = 0, align_b = 0, align_d = 0, align_bias = 0, align_aux = 0;
  friend bool operator==(const MatmulKey&, const MatmulKey&) = default;
};

struct MatmulKeyHash {
  std::size_t operator()(const MatmulKey& k) const noexcept {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    auto mix = [&h](std::uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    mix(static_cast<std::uint64_t>(k.p.type));
    mix((k.p.trans_a ? 1u : 0u) | (k.p.trans_b ? 2u : 0u) |
        (static_cast<std::uint64_t>(k.epilogue) << 2));
    for (std::int64_t v : {k.p.m, k.p.n, k.p.k, k.p.lda, k.p.ldb, k.p.ldd, k.aux_ld,
                           static_cast<std::int64_t>(k.p.batch), k.p.stride_a, k.p.stride_b,
                           k.p.stride_d})
      mix(static_cast<std::uint64_t>(v));
    mix((std::uint64_t{k.align_a} << 48) | (std::uint64_t{k.align_b} << 32) |
        (std::uint64_t{k.align_d} << 16) | k.align_bias);
    mix(k.align_aux);
    return static_cast<std::size_t>(h);
  }
};

// Descriptors of one cached product; `found` false records that the heuristic had nothing, so a
// failing shape is not asked about again either.
struct MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;

  MatmulPlan() = default;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter>;

// A device's handle and plans. `mutex` guards the plan map and, per call, the window between
// writing a plan's bias pointer and launching with it. One workspace serves every call: all of
// them run on the one compute stream, so they never overlap on the GPU.
struct DeviceBlas {
  BlasHandle handle;
  std::mutex mutex;
  std::unordered_map<MatmulKey, std::unique_ptr<MatmulPlan>, MatmulKeyHash> plans;
};

// Varying shapes (evaluation at many lengths) would grow the cache without bound; past this many
// plans it starts over.
constexpr std::size_t kMaxPlans = 4096;

// The handles live until the process exits and are never destroyed: static destructors run after
// the CUDA runtime may have begun tearing itself down, and cublasLtDestroy / cudaFree then can
// fail or crash. The driver reclaims everything with the process.
DeviceBlas& device_blas(int device) {
  static std::array<std::atomic<DeviceBlas*>, kMaxDevices> states{};
  static std::mutex create_mutex;
  GENESIS_CHECK(device >= 0 && device < kMaxDevices, InvalidArgument,
                "cuBLASLt: device ordinal " + std::to_string(device) + " is out of range");
  DeviceBlas* s = states[device].load(std::memory_order_acquire);
  if (s != nullptr) return *s;
  std::lock_guard lock(create_mutex);
  s = states[device].load(std::memory_order_relaxed);
  if (s == nullptr) {
    auto fresh = std::make_unique<DeviceBlas>();
    fresh->handle = BlasHandle::create(device);
    s = fresh.release();  // leaked on purpose (see above)
    states[device].store(s, std::memory_order_release);
  }
  return *s;
}

int current_device() {
  int device = 0;
  GENESIS_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

std::size_t element_bytes(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: throw InvalidArgument("cuBLASLt: unsupported data type " + std::to_string(type));
  }
}

// The largest power of two (at most 256) dividing the address of every matrix of the batch.
std::uint32_t alignment_of(const void* ptr, std::int64_t stride, std::int32_t batch,
                           std::size_t elem) {
  std::uint64_t bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr)) | 256u;
  if (batch > 1 && stride != 0) bits |= static_cast<std::uint64_t>(stride) * elem;
  return static_cast<std::uint32_t>(bits & (~bits + 1));  // lowest set bit
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  GENESIS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
              const T& value) {
  GENESIS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

// Creates `layout` in place, so that the plan owning it destroys it should a later call throw.
void make_layout(cublasLtMatrixLayout_t& layout, cudaDataType_t type, std::int64_t rows,
                 std::int64_t cols, std::int64_t ld, std::int32_t batch, std::int64_t stride) {
  GENESIS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                                  static_cast<std::uint64_t>(cols), ld));
  if (batch > 1) {
    GENESIS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
    GENESIS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
}

cublasLtEpilogue_t lt_epilogue(LtEpilogueKind kind) {
  switch (kind) {
    case LtEpilogueKind::bias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogueKind::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogueKind::bgradb: return CUBLASLT_EPILOGUE_BGRADB;
    case LtEpilogueKind::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The epilogue and its pointers. The heuristic reads the pointers' alignments; each launch
// rewrites them (set_pointers).
void set_pointers(cublasLtMatmulDesc_t desc, const LtEpilogue& e) {
  if (e.kind == LtEpilogueKind::none) return;
  set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, e.bias);
  if (e.kind == LtEpilogueKind::gelu_aux_bias)
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, e.aux);
}

void set_epilogue(cublasLtMatmulDesc_t desc, const MatmulKey& key, cudaDataType_t type,
                  const LtEpilogue& e) {
  if (key.epilogue == LtEpilogueKind::none) return;
  set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(key.epilogue));
  // Vectors have D's type (the default for these types too; stated so it cannot drift).
  set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<std::int32_t>(type));
  if (key.epilogue == LtEpilogueKind::gelu_aux_bias)
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.aux_ld);
  set_pointers(desc, e);
}

std::unique_ptr<MatmulPlan> make_plan(cublasLtHandle_t handle, const MatmulKey& key,
                                      const LtEpilogue& e) {
  const LtProblem& p = key.p;
  auto plan = std::make_unique<MatmulPlan>();
  // f32 accumulation and f32 alpha/beta for every storage type; CUBLAS_COMPUTE_32F never
  // rounds f32 inputs to TF32, so f32 results match the CPU's sgemm.
  GENESIS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_epilogue(plan->desc, key, p.type, e);
  // Stored shapes: A (k, m) when transposed, else (m, k); B (n, k) when transposed, else (k, n).
  make_layout(plan->a, p.type, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda, p.batch,
              p.stride_a);
  make_layout(plan->b, p.type, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb, p.batch,
              p.stride_b);
  make_layout(plan->d, p.type, p.m, p.n, p.ldd, p.batch, p.stride_d);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  GENESIS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Preference pref(raw_pref);
  set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
           static_cast<std::uint64_t>(kBlasWorkspaceBytes));
  set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
  set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
  set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
  set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
  if (p.type != CUDA_R_32F) {
    // Split-K partial sums are added in f32 (or not split at all), never in the 16-bit output
    // type, which would round every partial sum of a long K.
    set_pref(raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  }

  constexpr int kRequested = 4;
  std::array<cublasLtMatmulHeuristicResult_t, kRequested> results{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d, plan->d,
                                     raw_pref, kRequested, results.data(), &returned);
  // found = false. An epilogue this cuBLASLt cannot pair with the types or layouts may be
  // refused as an invalid value; the caller then runs the plain product.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      (key.epilogue != LtEpilogueKind::none && status == CUBLAS_STATUS_INVALID_VALUE))
    return plan;
  GENESIS_CUBLAS_CHECK(status);
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS &&
        results[i].workspaceSize <= kBlasWorkspaceBytes) {
      plan->algo = results[i].algo;
      plan->found = true;
      break;
    }
  }
  return plan;
}

}  // namespace

BlasHandle& BlasHandle::for_current_device() { return device_blas(current_device()).handle; }

bool lt_matmul(const LtProblem& p, const void* a, const void* b, void* d, const LtEpilogue& e,
               bool accumulate) {
  DeviceBlas& s = device_blas(current_device());
  const std::size_t elem = element_bytes(p.type);
  MatmulKey key;
  key.p = p;
  key.epilogue = e.kind;
  key.aux_ld = e.kind == LtEpilogueKind::gelu_aux_bias ? e.aux_ld : 0;
  key.align_a = alignment_of(a, p.stride_a, p.batch, elem);
  key.align_b = alignment_of(b, p.stride_b, p.batch, elem);
  key.align_d = alignment_of(d, p.stride_d, p.batch, elem);
  key.align_bias = e.kind != LtEpilogueKind::none ? alignment_of(e.bias, 0, 1, elem) : 0;
  key.align_aux = e.kind == LtEpilogueKind::gelu_aux_bias ? alignment_of(e.aux, 0, 1, elem) : 0;

  std::lock_guard lock(s.mutex);
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    auto plan = make_plan(s.handle.get(), key, e);
    if (s.plans.size() >= kMaxPlans) s.plans.clear();
    it = s.plans.emplace(key, std::move(plan)).first;
  }
  MatmulPlan& plan = *it->second;
  if (!plan.found) return false;
  set_pointers(plan.desc, e);
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;  // 0: D's old contents are never read
  GENESIS_CUBLAS_CHECK(cublasLtMatmul(s.handle.get(), plan.desc, &alpha, a, plan.a, b, plan.b,
                                      &beta, d, plan.d, d, plan.d, &plan.algo,
                                      s.handle.workspace(), s.handle.workspace_bytes(),
                                      compute_stream()));
  return true;
}

}  // namespace genesis::cuda
