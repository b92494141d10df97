// Helpers the op-table case builders share (declared in op_cases.hpp): random tensors in the
// layouts the cases need (transposed, column slices, unaligned, broadcast), value shaping
// (quantised ties, 16-bit rounding, single pokes) and a direct CPU kernel call for data a
// backward case derives from its forward. No TEST_CASE lives here.
#include <cmath>
#include <cstring>
#include <utility>

#include "genesis/core/error.hpp"
#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

OpCase make_case(OpId op, std::string label, std::vector<Tensor> in, std::vector<Tensor> out,
                 DType dtype) {
  OpCase c;
  c.op = op;
  c.label = std::move(label);
  c.dtype = dtype;
  c.in = std::move(in);
  c.out = std::move(out);
  return c;
}

OpArgs op_args(std::initializer_list<std::int64_t> i, std::initializer_list<double> f) {
  OpArgs a;
  GENESIS_CHECK(i.size() <= a.i.size() && f.size() <= a.f.size(), InvalidArgument,
                "op_args: too many scalars");
  std::size_t k = 0;
  for (std::int64_t v : i) a.i[k++] = v;
  k = 0;
  for (double v : f) a.f[k++] = v;
  return a;
}

Tensor randn(const Shape& shape, Generator& gen, double std) {
  return Tensor::randn(shape, gen, std);
}

Tensor uniform(const Shape& shape, Generator& gen, double lo, double hi) {
  return Tensor::rand(shape, gen, lo, hi);
}

Tensor random_indices(const Shape& shape, Generator& gen, std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape_numel(shape)));
  const auto span = static_cast<std::uint64_t>(hi - lo);
  for (auto& x : v) x = lo + static_cast<std::int64_t>(gen.next_u64() % span);
  return Tensor::from_vector(v, shape);
}

Tensor random_bools(const Shape& shape, Generator& gen) {
  std::vector<bool> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = gen.uniform() < 0.5f;
  return Tensor::from_vector(v, shape);
}

Tensor transposed(std::int64_t rows, std::int64_t cols, Generator& gen, double std) {
  return randn({cols, rows}, gen, std).transpose(0, 1);
}

Tensor column_slice(std::int64_t rows, std::int64_t cols, std::int64_t extra, Generator& gen) {
  return randn({rows, cols + extra}, gen).slice(1, 0, cols);
}

Tensor unaligned(const Shape& shape, Generator& gen) {
  return make_view(randn({shape_numel(shape) + 1}, gen), shape, contiguous_strides(shape), 1);
}

Tensor broadcast(const Tensor& t, const Shape& shape) { return t.expand(shape); }

namespace {

// A fresh contiguous f32 copy of any host tensor.
Tensor f32_copy(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  out.copy_(t);
  return out;
}

}  // namespace

Tensor quantized(const Tensor& t, double step) {
  Tensor out = f32_copy(t);
  float* p = out.data<float>();
  for (std::int64_t i = 0, n = out.numel(); i < n; ++i)
    p[i] = static_cast<float>(std::nearbyint(p[i] / step) * step);
  return out;
}

Tensor rounded(const Tensor& t, DType dtype) {
  if (dtype == DType::f32) return f32_copy(t);
  Tensor narrow = Tensor::empty(t.shape(), dtype);
  narrow.copy_(t);
  return f32_copy(narrow);
}

void poke(const Tensor& t, std::int64_t flat, float value) {
  GENESIS_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && flat >= 0 && flat < t.numel(),
                InvalidArgument, "poke: needs a contiguous f32 tensor and an index inside it");
  t.data<float>()[flat] = value;
}

void cpu_run(OpId op, std::vector<Tensor> in, std::vector<Tensor> out, const OpArgs& args) {
  cpu_kernels()[static_cast<int>(op)](std::span<const Tensor>(in.data(), in.size()),
                                      std::span<Tensor>(out.data(), out.size()), args);
}

std::string dims(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace genesis::testing::op_cases
