// CUDA kernels of the elementwise rows: binary ops, comparisons and where over strided views the
// front end has expanded to the output's shape; scalar and unary maps; activation backwards. All
// take any layout and f32, f16 or bf16 (one per call; comparisons write bool), computing in f32
// with CUDA's math library; contiguous operands move in 16-byte packs, others walk a StridedIndex.
// Not here: broadcasting, dtype promotion and autograd (ops/elementwise.cpp).
#include <cstdint>
#include <string>

#include "genesis/core/error.hpp"
#include "kernel_support.cuh"
#include "register.hpp"
#include "strided_index.cuh"

namespace genesis::cuda {

namespace {

// Out may alias an input (in-place updates), so no pointer here is __restrict__: every thread
// reads its elements before writing the same positions, which is safe without it.

// N elements of T moved as one 16-byte (or, for bool outputs, N-byte) access.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Elements of T per 16-byte pack: 4 for f32, 8 for f16 and bf16.
template <typename T>
inline constexpr int kPackOf = static_cast<int>(16 / sizeof(T));

bool aligned_to(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// A map's result as the output type: a float rounded to T, or a comparison's bool as 0/1.
template <typename O, typename R>
__device__ __forceinline__ O store_as(R r) {
  if constexpr (std::is_same_v<O, std::uint8_t>) return r ? 1 : 0;
  else return from_f32<O>(r);
}

// ---- the three operand shapes: y = f(x), y = f(a, b), y = cond ? a : b

template <typename T, typename F>
struct UnaryBody {
  const T* x;
  T* y;
  F f;
  __device__ void operator()(const std::int64_t (&off)[2]) const {
    y[off[0]] = from_f32<T>(f(load_f32(x + off[1])));
  }
};

template <typename Ta, typename Tb, typename O, typename F>
struct BinaryBody {
  const Ta* a;
  const Tb* b;
  O* y;
  F f;
  __device__ void operator()(const std::int64_t (&off)[3]) const {
    y[off[0]] = store_as<O>(f(load_f32(a + off[1]), load_f32(b + off[2])));
  }
};

// The chosen element is copied as stored, so where is exact in every dtype.
template <typename T>
struct WhereBody {
  const std::uint8_t* cond;
  const T* a;
  const T* b;
  T* y;
  __device__ void operator()(const std::int64_t (&off)[4]) const {
    y[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
};

// Contiguous x and y: `packs` 16-byte packs, then the n - packs * N tail element by element
// (packs is 0 when a pointer is not 16-byte aligned).
template <typename T, typename F>
__global__ void __launch_bounds__(kBlockThreads)
    unary_contiguous_kernel(const T* x, T* y, std::int64_t packs, std::int64_t n, F f) {
  constexpr int N = kPackOf<T>;
  for (std::int64_t i = thread_index(); i < packs; i += thread_count()) {
    const Pack<T, N> in = reinterpret_cast<const Pack<T, N>*>(x)[i];
    Pack<T, N> out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = from_f32<T>(f(load_f32(&in.v[e])));
    reinterpret_cast<Pack<T, N>*>(y)[i] = out;
  }
  for (std::int64_t i = packs * N + thread_index(); i < n; i += thread_count())
    y[i] = from_f32<T>(f(load_f32(x + i)));
}

// Contiguous y; a and b each contiguous or one broadcast value (its *_bcast flag: read a[0]).
// A pack holds N elements of every operand, N set by the widest type (4 for a mixed f32 + bf16).
template <typename Ta, typename Tb, typename O, typename F>
__global__ void __launch_bounds__(kBlockThreads)
    binary_contiguous_kernel(const Ta* a, const Tb* b, O* y, bool a_bcast, bool b_bcast,
                             std::int64_t packs, std::int64_t n, F f) {
  constexpr int N = kPackOf<Ta> < kPackOf<Tb> ? kPackOf<Ta> : kPackOf<Tb>;
  const float a0 = load_f32(a);
  const float b0 = load_f32(b);
  for (std::int64_t i = thread_index(); i < packs; i += thread_count()) {
    float va[N], vb[N];
    if (a_bcast) {
#pragma unroll
      for (int e = 0; e < N; ++e) va[e] = a0;
    } else {
      const Pack<Ta, N> p = reinterpret_cast<const Pack<Ta, N>*>(a)[i];
#pragma unroll
      for (int e = 0; e < N; ++e) va[e] = load_f32(&p.v[e]);
    }
    if (b_bcast) {
#pragma unroll
      for (int e = 0; e < N; ++e) vb[e] = b0;
    } else {
      const Pack<Tb, N> p = reinterpret_cast<const Pack<Tb, N>*>(b)[i];
#pragma unroll
      for (int e = 0; e < N; ++e) vb[e] = load_f32(&p.v[e]);
    }
    Pack<O, N> out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = store_as<O>(f(va[e], vb[e]));
    reinterpret_cast<Pack<O, N>*>(y)[i] = out;
  }
  for (std::int64_t i = packs * N + thread_index(); i < n; i += thread_count())
    y[i] = store_as<O>(f(a_bcast ? a0 : load_f32(a + i), b_bcast ? b0 : load_f32(b + i)));
}

// ---- host side: contract checks and launches

std::string op_name(OpId id) { return std::string(op_info(id).name); }

// t must be defined, of `dtype` and of the output's shape.
void check_operand(OpId id, const Tensor& t, const Tensor& out, DType dtype, const char* role) {
  GENESIS_CHECK(t.defined(), InvalidArgument, op_name(id) + ": " + role + " is undefined");
  GENESIS_CHECK(t.dtype() == dtype, InvalidArgument,
                op_name(id) + ": " + role + " is " + std::string(dtype_name(t.dtype())) +
                    ", expected " + std::string(dtype_name(dtype)) +
                    " (all float operands of one call share a dtype)");
  GENESIS_CHECK(t.shape() == out.shape(), InvalidArgument,
                op_name(id) + ": " + role + " of shape " + shape_str(t.shape()) +
                    " does not match output " + shape_str(out.shape()));
}

void check_output(OpId id, const Tensor& out) {
  GENESIS_CHECK(out.defined(), InvalidArgument, op_name(id) + ": output is undefined");
}

template <typename T, typename F>
void launch_unary(OpId id, const Tensor& x, const Tensor& y, F f) {
  const std::int64_t n = y.numel();
  const std::string name = op_name(id);
  const StridedIndex<2> idx =
      strided_index<2>(y.shape(), {y.strides(), x.strides()}, name.c_str());
  if (!idx.contiguous)
    return launch_strided(idx, n, UnaryBody<T, F>{ptr<const T>(x), ptr<T>(y), f});
  constexpr int N = kPackOf<T>;
  const bool vec = aligned_to(x.raw_data(), 16) && aligned_to(y.raw_data(), 16);
  const std::int64_t packs = vec ? n / N : 0;
  unary_contiguous_kernel<T, F><<<grid_for(packs + (n - packs * N)), kBlockThreads, 0,
                                  compute_stream()>>>(ptr<const T>(x), ptr<T>(y), packs, n, f);
  GENESIS_CUDA_LAUNCH_CHECK();
}

template <typename Ta, typename Tb, typename O, typename F>
void launch_binary(OpId id, const Tensor& a, const Tensor& b, const Tensor& y, F f) {
  const std::int64_t n = y.numel();
  const std::string name = op_name(id);
  const StridedIndex<3> idx =
      strided_index<3>(y.shape(), {y.strides(), a.strides(), b.strides()}, name.c_str());
  // One merged dim with a unit-stride output and inputs of stride 1 or 0 (x + scalar tensor).
  const bool flat = idx.ndim == 1 && idx.stride[0][0] == 1 && idx.stride[1][0] <= 1 &&
                    idx.stride[1][0] >= 0 && idx.stride[2][0] <= 1 && idx.stride[2][0] >= 0;
  if (!flat)
    return launch_strided(
        idx, n, BinaryBody<Ta, Tb, O, F>{ptr<const Ta>(a), ptr<const Tb>(b), ptr<O>(y), f});
  constexpr int N = kPackOf<Ta> < kPackOf<Tb> ? kPackOf<Ta> : kPackOf<Tb>;
  const bool a_bcast = idx.stride[1][0] == 0;
  const bool b_bcast = idx.stride[2][0] == 0;
  const bool vec = aligned_to(y.raw_data(), sizeof(O) * N) &&
                   (a_bcast || aligned_to(a.raw_data(), sizeof(Ta) * N)) &&
                   (b_bcast || aligned_to(b.raw_data(), sizeof(Tb) * N));
  const std::int64_t packs = vec ? n / N : 0;
  binary_contiguous_kernel<Ta, Tb, O, F><<<grid_for(packs + (n - packs * N)), kBlockThreads, 0,
                                           compute_stream()>>>(
      ptr<const Ta>(a), ptr<const Tb>(b), ptr<O>(y), a_bcast, b_bcast, packs, n, f);
  GENESIS_CUDA_LAUNCH_CHECK();
}

// out = f(a, b): a, b and out share one float dtype.
template <typename F>
void arith(OpId id, std::span<const Tensor> in, std::span<Tensor> out, F f) {
  const Tensor& y = out[0];
  check_output(id, y);
  check_operand(id, in[0], y, y.dtype(), "a");
  check_operand(id, in[1], y, y.dtype(), "b");
  if (y.numel() == 0) return;
  with_float_type(y.dtype(), op_name(id).c_str(), [&](auto tag) {
    using T = decltype(tag);
    launch_binary<T, T, T>(id, in[0], in[1], y, f);
  });
}

// out(bool) = f(a, b): a and b share one float dtype.
template <typename F>
void compare(OpId id, std::span<const Tensor> in, std::span<Tensor> out, F f) {
  const Tensor& y = out[0];
  check_output(id, y);
  check_operand(id, y, y, DType::boolean, "output");
  GENESIS_CHECK(in[0].defined(), InvalidArgument, op_name(id) + ": a is undefined");
  const DType dtype = in[0].dtype();
  check_operand(id, in[0], y, dtype, "a");
  check_operand(id, in[1], y, dtype, "b");
  if (y.numel() == 0) return;
  with_float_type(dtype, op_name(id).c_str(), [&](auto tag) {
    using T = decltype(tag);
    launch_binary<T, T, std::uint8_t>(id, in[0], in[1], y, f);
  });
}

// out = f(x): x and out share one float dtype; out may be x itself.
template <typename F>
void map_op(OpId id, std::span<const Tensor> in, std::span<Tensor> out, F f) {
  const Tensor& y = out[0];
  check_output(id, y);
  check_operand(id, in[0], y, y.dtype(), "input");
  if (y.numel() == 0) return;
  with_float_type(y.dtype(), op_name(id).c_str(), [&](auto tag) {
    using T = decltype(tag);
    launch_unary<T>(id, in[0], y, f);
  });
}

// (dy, x) -> dx = f(dy, x): the same launch as a binary op.
template <typename F>
void grad(OpId id, std::span<const Tensor> in, std::span<Tensor> out, F f) {
  const Tensor& dx = out[0];
  check_output(id, dx);
  check_operand(id, in[0], dx, dx.dtype(), "dy");
  check_operand(id, in[1], dx, dx.dtype(), "x");
  if (dx.numel() == 0) return;
  with_float_type(dx.dtype(), op_name(id).c_str(), [&](auto tag) {
    using T = decltype(tag);
    launch_binary<T, T, T>(id, in[0], in[1], dx, f);
  });
}

// ---- the functions, on f32 (the CPU's formulas, backends/cpu/elementwise*.{cpp,hpp})

struct Add { __device__ float operator()(float x, float y) const { return x + y; } };
struct Sub { __device__ float operator()(float x, float y) const { return x - y; } };
struct Mul { __device__ float operator()(float x, float y) const { return x * y; } };
struct Div { __device__ float operator()(float x, float y) const { return x / y; } };
// NaN in either operand gives NaN, as torch.maximum.
struct Maximum {
  __device__ float operator()(float x, float y) const {
    const float m = x > y ? x : y;
    return x != x ? x : (y != y ? y : m);
  }
};
struct Eq { __device__ bool operator()(float x, float y) const { return x == y; } };
struct Gt { __device__ bool operator()(float x, float y) const { return x > y; } };
struct Lt { __device__ bool operator()(float x, float y) const { return x < y; } };

struct AddScalar {
  float s;
  __device__ float operator()(float v) const { return v + s; }
};
struct MulScalar {
  float s;
  __device__ float operator()(float v) const { return v * s; }
};
// The CPU's exact forms for common exponents (mode), powf for the rest; one functor keeps the
// kernel count down, and the switch is uniform across the grid.
struct PowScalar {
  enum Mode : int { kOne, kSquare, kCube, kSqrt, kReciprocal, kZero, kGeneral };
  int mode;
  float e;
  __device__ float operator()(float v) const {
    switch (mode) {
      case kOne: return v;
      case kSquare: return v * v;
      case kCube: return v * v * v;
      case kSqrt: return sqrtf(v);
      case kReciprocal: return 1.0f / v;
      case kZero: return 1.0f;
      default: return powf(v, e);
    }
  }
};
struct Neg { __device__ float operator()(float v) const { return -v; } };
struct Exp { __device__ float operator()(float v) const { return expf(v); } };
struct Log { __device__ float operator()(float v) const { return logf(v); } };
struct Sqrt { __device__ float operator()(float v) const { return sqrtf(v); } };
struct Abs { __device__ float operator()(float v) const { return fabsf(v); } };
struct Tanh { __device__ float operator()(float v) const { return tanhf(v); } };

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

struct Sigmoid { __device__ float operator()(float v) const { return sigmoid(v); } };
// NaN passes through (NaN < 0 is false).
struct Relu { __device__ float operator()(float v) const { return v < 0.0f ? 0.0f : v; } };

// GELU, tanh approximation: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + a x^3);
// the sigmoid form avoids cancellation for very negative x.
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

struct Gelu {
  __device__ float operator()(float x) const {
    const float u = kGeluC * (x + kGeluA * x * x * x);
    return x * sigmoid(2.0f * u);
  }
};
struct Silu { __device__ float operator()(float x) const { return x * sigmoid(x); } };

struct ReluBackward {
  __device__ float operator()(float dy, float x) const { return x > 0.0f ? dy : 0.0f; }
};
// d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u), u' = sqrt(2/pi) (1 + 3a x^2).
struct GeluBackward {
  __device__ float operator()(float dy, float x) const {
    const float u = kGeluC * (x + kGeluA * x * x * x);
    const float t = tanhf(u);
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
};
// d silu / dx = s (1 + x (1 - s)), s = sigmoid(x).
struct SiluBackward {
  __device__ float operator()(float dy, float x) const {
    const float s = sigmoid(x);
    return dy * (s * (1.0f + x * (1.0f - s)));
  }
};

// out = a + b with a and out f32 and b f16 or bf16: the residual stream plus a 16-bit branch,
// without widening b in a pass of its own.
void add_widening(std::span<const Tensor> in, const Tensor& y) {
  constexpr OpId id = OpId::add;
  check_operand(id, in[0], y, DType::f32, "a");
  GENESIS_CHECK(in[1].defined() && in[1].shape() == y.shape(), InvalidArgument,
                "add: b is undefined or does not match output " + shape_str(y.shape()));
  if (y.numel() == 0) return;
  with_float_type(in[1].dtype(), "add", [&](auto tag) {
    using Tb = decltype(tag);
    launch_binary<float, Tb, float>(id, in[0], in[1], y, Add{});
  });
}

}  // namespace

// ---- kernels of the table

void add_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  if (out[0].defined() && out[0].dtype() == DType::f32 && in[1].defined() &&
      in[1].dtype() != DType::f32)
    return add_widening(in, out[0]);
  arith(OpId::add, in, out, Add{});
}
void sub_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith(OpId::sub, in, out, Sub{});
}
void mul_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith(OpId::mul, in, out, Mul{});
}
void div_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith(OpId::div, in, out, Div{});
}
void maximum_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith(OpId::maximum, in, out, Maximum{});
}
void eq_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  compare(OpId::eq, in, out, Eq{});
}
void gt_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  compare(OpId::gt, in, out, Gt{});
}
void lt_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  compare(OpId::lt, in, out, Lt{});
}

void where_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  constexpr OpId id = OpId::where;
  const Tensor& y = out[0];
  check_output(id, y);
  check_operand(id, in[0], y, DType::boolean, "cond");
  check_operand(id, in[1], y, y.dtype(), "a");
  check_operand(id, in[2], y, y.dtype(), "b");
  if (y.numel() == 0) return;
  with_float_type(y.dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    const StridedIndex<4> idx = strided_index<4>(
        y.shape(), {y.strides(), in[0].strides(), in[1].strides(), in[2].strides()}, "where");
    launch_strided(idx, y.numel(),
                   WhereBody<T>{ptr<const std::uint8_t>(in[0]), ptr<const T>(in[1]),
                                ptr<const T>(in[2]), ptr<T>(y)});
  });
}

void add_scalar_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  map_op(OpId::add_scalar, in, out, AddScalar{static_cast<float>(args.f[0])});
}
void mul_scalar_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  map_op(OpId::mul_scalar, in, out, MulScalar{static_cast<float>(args.f[0])});
}
void pow_scalar_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const double e = args.f[0];
  const int mode = e == 1.0    ? PowScalar::kOne
                   : e == 2.0  ? PowScalar::kSquare
                   : e == 3.0  ? PowScalar::kCube
                   : e == 0.5  ? PowScalar::kSqrt
                   : e == -1.0 ? PowScalar::kReciprocal
                   : e == 0.0  ? PowScalar::kZero
                               : PowScalar::kGeneral;
  map_op(OpId::pow_scalar, in, out, PowScalar{mode, static_cast<float>(e)});
}
void neg_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::neg, in, out, Neg{});
}
void exp_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::exp, in, out, Exp{});
}
void log_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::log, in, out, Log{});
}
void sqrt_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::sqrt, in, out, Sqrt{});
}
void abs_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::abs, in, out, Abs{});
}
void tanh_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::tanh, in, out, Tanh{});
}
void sigmoid_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::sigmoid, in, out, Sigmoid{});
}
void relu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::relu, in, out, Relu{});
}
void gelu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::gelu, in, out, Gelu{});
}
void silu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_op(OpId::silu, in, out, Silu{});
}
void relu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  grad(OpId::relu_backward, in, out, ReluBackward{});
}
void gelu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  grad(OpId::gelu_backward, in, out, GeluBackward{});
}
void silu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  grad(OpId::silu_backward, in, out, SiluBackward{});
}

}  // namespace genesis::cuda
