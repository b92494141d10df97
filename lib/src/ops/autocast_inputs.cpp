// The CPU's rounded weight for autocast (autocast_inputs.hpp): the two casts it stands for run
// through a scratch of at most kChunk half-precision values, so no whole half copy exists.
#include "autocast_inputs.hpp"

#include <algorithm>

#include "genesis/autograd/node.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis::detail {

namespace {

constexpr std::int64_t kChunk = std::int64_t{1} << 20;

}  // namespace

Tensor round_through(const Tensor& t, DType precision, bool in_place) {
  const Tensor src = in_place ? t : t.contiguous();
  Tensor out = in_place ? t : Tensor::empty(src.shape(), DType::f32, src.device());
  const std::int64_t n = src.numel();
  if (n == 0) return out;
  const Tensor scratch = Tensor::empty({std::min(n, kChunk)}, precision, src.device());
  for (std::int64_t i = 0; i < n; i += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i);
    Tensor half = make_view(scratch, {m}, {1}, scratch.offset());
    Tensor to = make_view(out, {m}, {1}, out.offset() + i);
    dispatch(OpId::copy, {make_view(src, {m}, {1}, src.offset() + i)}, {half});
    dispatch(OpId::copy, {half}, {to});
  }
  return out;
}

Tensor rounded_for_cpu_kernel(const Tensor& t) {
  const std::optional<DType> precision = amp::autocast_dtype();
  if (!precision || *precision == DType::f32 || !t.defined() || t.dtype() != DType::f32 ||
      !t.device().is_cpu())
    return Tensor();
  Tensor out = round_through(t, *precision, false);
  autograd::record("autocast_round", {t}, {out},
                   [p = *precision](const std::vector<Tensor>& g,
                                    const autograd::NeedsGrad&) -> std::vector<Tensor> {
                     return {round_through(g[0], p, g[0].is_contiguous() && g[0].owned_alone())};
                   });
  return out;
}

}  // namespace genesis::detail
