// Tensor-by-tensor comparison of two checkpoints. Integers are compared as i64 and everything
// else as f32 (the precision training computes in), so a bf16 and an f32 copy of the same weights
// differ only by the rounding of bf16. NaN equals NaN here: a diverged run compared with itself
// is identical.
#include "genesis/ckpt/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <type_traits>

namespace genesis::ckpt {
namespace {

// Elements compared per thread before OpenMP is worth starting.
constexpr std::int64_t kParallelElements = 1 << 16;

bool integral(const std::string& dtype) { return dtype == "I32" || dtype == "I64" || dtype == "BOOL"; }

template <typename T>
void compare_values(const T* a, const T* b, std::int64_t n, TensorDiff& d) {
  double max_abs = 0;
  std::int64_t differing = 0, nan_mismatch = 0;
#pragma omp parallel for reduction(max : max_abs) reduction(+ : differing, nan_mismatch) \
    if (n > kParallelElements)
  for (std::int64_t i = 0; i < n; ++i) {
    const T x = a[i], y = b[i];
    if (x == y) continue;
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x) && std::isnan(y)) continue;
      if (std::isnan(x) || std::isnan(y)) {
        ++differing;
        ++nan_mismatch;
        continue;
      }
    }
    ++differing;
    const double diff = std::fabs(static_cast<double>(x) - static_cast<double>(y));
    max_abs = diff > max_abs ? diff : max_abs;
  }
  d.differing = differing;
  d.max_abs = nan_mismatch > 0 ? std::numeric_limits<double>::quiet_NaN() : max_abs;
}

TensorDiff compare_tensor(const std::string& name, const Checkpoint& a, const Checkpoint& b) {
  TensorDiff d;
  d.name = name;
  const bool in_a = a.contains(name), in_b = b.contains(name);
  if (in_a) {
    d.shape_a = a.shape(name);
    d.dtype_a = a.manifest().tensors.at(name).dtype;
  }
  if (in_b) {
    d.shape_b = b.shape(name);
    d.dtype_b = b.manifest().tensors.at(name).dtype;
  }
  if (!in_a || !in_b) {
    d.kind = in_a ? DiffKind::only_a : DiffKind::only_b;
    return d;
  }
  if (d.shape_a != d.shape_b) {
    d.kind = DiffKind::shape;
    return d;
  }
  const std::int64_t n = shape_numel(d.shape_a);
  const Tensor ta = a.read(name, 0, n), tb = b.read(name, 0, n);
  if (integral(d.dtype_a) && integral(d.dtype_b)) {
    const Tensor ia = ta.to(DType::i64).contiguous(), ib = tb.to(DType::i64).contiguous();
    compare_values(ia.data<std::int64_t>(), ib.data<std::int64_t>(), n, d);
  } else {
    const Tensor fa = ta.to(DType::f32).contiguous(), fb = tb.to(DType::f32).contiguous();
    compare_values(fa.data<float>(), fb.data<float>(), n, d);
  }
  if (d.dtype_a != d.dtype_b)
    d.kind = DiffKind::dtype;
  else if (d.differing > 0)
    d.kind = DiffKind::values;
  return d;
}

std::string format_difference(const TensorDiff& d) {
  char text[96];
  std::snprintf(text, sizeof text, "max |a-b| %.3g in %lld of %lld elements", d.max_abs,
                static_cast<long long>(d.differing), static_cast<long long>(shape_numel(d.shape_a)));
  return text;
}

}  // namespace

std::vector<TensorDiff> diff_checkpoints(const Checkpoint& a, const Checkpoint& b, bool all) {
  const std::string prefix = all ? "" : "model.";
  std::set<std::string> names;
  for (const std::string& n : a.names(prefix)) names.insert(n);
  for (const std::string& n : b.names(prefix)) names.insert(n);
  std::vector<TensorDiff> diffs;
  for (const std::string& name : names) diffs.push_back(compare_tensor(name, a, b));
  return diffs;
}

bool all_same(const std::vector<TensorDiff>& diffs) {
  for (const TensorDiff& d : diffs)
    if (d.kind != DiffKind::same) return false;
  return true;
}

void write_diff(std::ostream& out, const std::vector<TensorDiff>& diffs, const std::string& a,
                const std::string& b, bool all) {
  std::size_t width = 0, differ = 0;
  for (const TensorDiff& d : diffs)
    if (d.kind != DiffKind::same) width = std::max(width, d.name.size());
  for (const TensorDiff& d : diffs) {
    std::string what;
    switch (d.kind) {
      case DiffKind::same: continue;
      case DiffKind::values: what = format_difference(d); break;
      case DiffKind::dtype: what = "dtype " + d.dtype_a + " vs " + d.dtype_b + ", " + format_difference(d); break;
      case DiffKind::shape: what = "shape " + shape_str(d.shape_a) + " vs " + shape_str(d.shape_b); break;
      case DiffKind::only_a: what = "only in A " + shape_str(d.shape_a) + " " + d.dtype_a; break;
      case DiffKind::only_b: what = "only in B " + shape_str(d.shape_b) + " " + d.dtype_b; break;
    }
    ++differ;
    out << d.name << std::string(width - d.name.size() + 2, ' ') << what << "\n";
  }
  const std::string kind = all ? " tensors" : " model tensors";
  if (differ == 0)
    out << "identical: " << diffs.size() << kind;
  else
    out << "differ: " << differ << " of " << diffs.size() << kind;
  out << " (A: " << a << ", B: " << b << ")\n";
}

}  // namespace genesis::ckpt
