// The cases of the CUDA-versus-CPU op-table test (test_op_table_cuda.cpp): one OpCase is one
// kernel call described on the host (inputs, possibly strided views; output templates giving
// each output's shape, dtype and geometry; OpArgs; the dtype its float data takes on the GPU).
// The builders live in test_op_cases_*.cpp, one per family of rows; the harness that runs a case
// on both backends and compares them is in test_op_table_cuda.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"

namespace genesis::testing::op_cases {

// |gpu - cpu| <= atol + rtol * |cpu|; NaN matches only NaN.
struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};
inline constexpr Tolerance kExact{0.0, 0.0};

// One call of row `op`. Tensors sharing a host Storage share one device buffer, so a view into
// a packed tensor stays a view on the GPU. An output may be the very tensor of an input (same
// storage and geometry): an in-place call on both backends.
// dtype: the type every f32 host tensor takes on the GPU (and is rounded through for the CPU),
// except the storages listed in keep_f32 (those the contract keeps f32: attention's lse,
// layer_norm's mean and rstd). Host tensors of any other dtype (i64 indices, bool conditions,
// copy's bf16 sources) are the same dtype on both backends.
struct OpCase {
  OpId op = OpId::add;
  std::string label;
  DType dtype = DType::f32;
  std::vector<Tensor> in;   // undefined entries allowed (linear without bias)
  std::vector<Tensor> out;  // templates; their values are never read
  OpArgs args;
  std::vector<int> written_inputs;  // inputs the row updates in place (adamw_step)
  std::vector<Tensor> keep_f32;
  std::optional<Tolerance> tol;  // unset: each result's dtype sets it (see the harness)
};

using CaseList = std::vector<OpCase>;
using CaseBuilder = void (*)(CaseList& cases, Generator& gen);

// ---- builders, one per family (test_op_cases_<family>.cpp)
void binary_cases(CaseList& cases, Generator& gen);         // add .. lt, where
void map_cases(CaseList& cases, Generator& gen);            // scalar and unary maps, backwards
void reduce_linalg_cases(CaseList& cases, Generator& gen);  // sum/max/argmax_dim, matmul, linear
void nn_cases(CaseList& cases, Generator& gen);             // softmax .. dropout
void attention_cases(CaseList& cases, Generator& gen);      // attention and its backward
void data_movement_cases(CaseList& cases, Generator& gen);  // copy, fill, concat, adamw_step
void decoder_cases(CaseList& cases, Generator& gen);        // rms_norm, rotary, swiglu, gqa

inline constexpr CaseBuilder kCaseBuilders[] = {binary_cases,        map_cases,    reduce_linalg_cases,
                                                nn_cases,            attention_cases,
                                                data_movement_cases, decoder_cases};

// ---- helpers for the builders (test_op_cases_common.cpp). Every random tensor is f32, drawn
// from the one Generator of the test in row-major order.
OpCase make_case(OpId op, std::string label, std::vector<Tensor> in, std::vector<Tensor> out,
                 DType dtype = DType::f32);
OpArgs op_args(std::initializer_list<std::int64_t> i, std::initializer_list<double> f = {});

Tensor randn(const Shape& shape, Generator& gen, double std = 1.0);
Tensor uniform(const Shape& shape, Generator& gen, double lo, double hi);
// Uniform i64 in [lo, hi).
Tensor random_indices(const Shape& shape, Generator& gen, std::int64_t lo, std::int64_t hi);
Tensor random_bools(const Shape& shape, Generator& gen);
// An f32 tensor of shape (rows, cols) viewing a (cols, rows) one transposed: column-major.
Tensor transposed(std::int64_t rows, std::int64_t cols, Generator& gen, double std = 1.0);
// A (rows, cols) view of the first cols columns of a (rows, cols + extra) tensor: a row stride
// larger than the row.
Tensor column_slice(std::int64_t rows, std::int64_t cols, std::int64_t extra, Generator& gen);
// A contiguous view of `shape` starting one element into its storage, so its data pointer is not
// 16-byte aligned (the kernels' vector paths must fall back).
Tensor unaligned(const Shape& shape, Generator& gen);
// 0-d or any shape -> `shape` by stride 0 (a broadcast scalar or row).
Tensor broadcast(const Tensor& t, const Shape& shape);

// A contiguous f32 copy with every value rounded to a multiple of `step` (ties for comparisons).
Tensor quantized(const Tensor& t, double step);
// A contiguous f32 copy with values rounded through `dtype` (itself for f32), so data derived
// on the CPU (a forward's output fed to a backward case) sees what the 16-bit case sees.
Tensor rounded(const Tensor& t, DType dtype);
// Sets element `flat` (row-major) of a contiguous f32 tensor.
void poke(const Tensor& t, std::int64_t flat, float value);
// Runs the CPU kernel of `op` directly (builders use it for a backward's forward data).
void cpu_run(OpId op, std::vector<Tensor> in, std::vector<Tensor> out, const OpArgs& args = {});

// "(37, 129)" for labels.
std::string dims(const Shape& shape);

}  // namespace genesis::testing::op_cases
