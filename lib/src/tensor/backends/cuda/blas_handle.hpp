// The CUDA backend's cuBLASLt plumbing: GENESIS_CUBLAS_CHECK(call), a move-only handle with its
// own workspace (one per device, created on first use and kept for the process's life), and
// lt_matmul, which runs one column-major cuBLASLt product from a per-device cache of descriptors
// and heuristic choices so the training loop never asks the heuristic twice for one shape.
// Not here: the row-major tensor ops built on it (linalg.cpp) and legacy cuBLAS (unused).
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <source_location>

namespace genesis::cuda {

// Throws CudaError("<call> failed: <message> (<status name>) (<file:line>)").
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call,
                                     const std::source_location& loc);

// Workspace per handle: cuBLASLt's best Hopper kernels want at least 32 MiB (less on Ampere,
// where the extra is simply unused).
inline constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

class BlasHandle {
 public:
  BlasHandle() = default;  // empty: owns nothing
  // A handle and a kBlasWorkspaceBytes workspace on cuda:`device`.
  static BlasHandle create(int device);
  // The handle of the current device, created on first use (thread-safe) and never destroyed:
  // see blas_handle.cpp for why it is leaked on purpose.
  static BlasHandle& for_current_device();

  ~BlasHandle();
  BlasHandle(BlasHandle&& other) noexcept;
  BlasHandle& operator=(BlasHandle&& other) noexcept;
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;

  cublasLtHandle_t get() const { return handle_; }
  void* workspace() const { return workspace_; }
  std::size_t workspace_bytes() const { return workspace_ ? kBlasWorkspaceBytes : 0; }
  int device() const { return device_; }

 private:
  void reset() noexcept;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  int device_ = -1;
};

// One product in cuBLASLt's column-major terms, batch i of which is
//   D_i (m, n) = op(A_i) (m, k) op(B_i) (k, n) [+ bias (m), broadcast over the n columns]
//                [+ D_i, when accumulating]
// A is stored (k, m) with leading dimension lda when trans_a, else (m, k); B is (n, k) when
// trans_b, else (k, n); D is (m, n) with leading dimension ldd. Strides and leading dimensions
// are in elements; a batch stride of 0 reuses one matrix for the whole batch (never for D).
// A, B, D and the bias share `type` (CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF); accumulation is
// f32 (CUBLAS_COMPUTE_32F, no TF32).
struct LtProblem {
  cudaDataType_t type = CUDA_R_32F;
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 1, ldb = 1, ldd = 1;
  std::int32_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  friend bool operator==(const LtProblem&, const LtProblem&) = default;
};

// What the product's epilogue does besides writing D (column-major terms, D is (m, n)):
//   bias:          D += bias (m), broadcast over the n columns;
//   gelu_aux_bias: aux = D + bias, then D = gelu(aux) (tanh approximation); aux is (m, n) with
//                  leading dimension aux_ld, of D's type;
//   bgradb:        bias_grad (n) = the sums of B's (k, n) columns over k (a bias gradient).
// Vectors have D's type.
enum class LtEpilogueKind : std::uint8_t { none, bias, gelu_aux_bias, bgradb };

struct LtEpilogue {
  LtEpilogueKind kind = LtEpilogueKind::none;
  const void* bias = nullptr;  // bias and gelu_aux_bias: read; bgradb: written
  void* aux = nullptr;         // gelu_aux_bias: written
  std::int64_t aux_ld = 0;
};

// Runs `p` on the current device's compute stream with the pointers given (accumulate: D +=
// product instead of D = product). Returns false, launching nothing, when cuBLASLt has no
// algorithm for this problem and epilogue at these pointers' alignments; throws CudaError when a
// cuBLASLt call fails.
bool lt_matmul(const LtProblem& p, const void* a, const void* b, void* d, const LtEpilogue& e,
               bool accumulate);

}  // namespace genesis::cuda

#define GENESIS_CUBLAS_CHECK(call)                                                           \
  do {                                                                                       \
    const cublasStatus_t genesis_cublas_status_ = (call);                                    \
    if (genesis_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                        \
      ::genesis::cuda::throw_cublas_error(genesis_cublas_status_, #call,                     \
                                          std::source_location::current());                  \
  } while (0)
