// ProcessGroupGloo's ops on gloo's option-struct API (gloo::allreduce, broadcast, allgather,
// reduce, gather, scatter, barrier; unbound buffers for send/recv). Arguments are checked on the
// caller's thread; the communication runs on the group's thread. Reductions use our own element
// functions, so f16/bf16 reduce in f32 and every ReduceOp works on every dtype (AVG: floats only).
// reduce_scatter is all_reduce on a copy plus this rank's chunk: correct, not bandwidth-optimal.
#include <cstring>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>
#include <gloo/types.h>

#include "genesis/core/error.hpp"
#include "process_group_checks.hpp"
#include "process_group_gloo_impl.hpp"

namespace genesis::dist {
namespace {

using ReduceFn = gloo::AllreduceOptions::Func;

// Slot prefix of send/recv; gloo's collectives use 0x01..0x08.
constexpr std::uint8_t kSendRecvSlotPrefix = 0x10;

struct Sum { template <typename T> T operator()(T a, T b) const { return a + b; } };
struct Prod { template <typename T> T operator()(T a, T b) const { return a * b; } };
struct Max { template <typename T> T operator()(T a, T b) const { return a < b ? b : a; } };
struct Min { template <typename T> T operator()(T a, T b) const { return b < a ? b : a; } };

// out may alias a (gloo reduces into its own buffer).
template <typename T, typename Op>
void reduce_typed(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  Op op;
  for (std::size_t i = 0; i < n; ++i) o[i] = op(x[i], y[i]);
}

template <float (*Load)(std::uint16_t), std::uint16_t (*Save)(float), typename Op>
void reduce_half(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<std::uint16_t*>(out);
  auto* x = static_cast<const std::uint16_t*>(a);
  auto* y = static_cast<const std::uint16_t*>(b);
  Op op;
  for (std::size_t i = 0; i < n; ++i) o[i] = Save(op(Load(x[i]), Load(y[i])));
}

template <typename Op>
ReduceFn reduce_for_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return &reduce_typed<float, Op>;
    case DType::i32: return &reduce_typed<std::int32_t, Op>;
    case DType::i64: return &reduce_typed<std::int64_t, Op>;
    case DType::f16: return &reduce_half<&f16_to_f32, &f32_to_f16, Op>;
    case DType::bf16: return &reduce_half<&bf16_to_f32, &f32_to_bf16, Op>;
    case DType::boolean: break;
  }
  throw InvalidArgument("no gloo reduction for dtype " + std::string(dtype_name(dtype)));
}

ReduceFn reduce_function(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return reduce_for_dtype<Sum>(dtype);
    case ReduceOp::PROD: return reduce_for_dtype<Prod>(dtype);
    case ReduceOp::MAX: return reduce_for_dtype<Max>(dtype);
    case ReduceOp::MIN: return reduce_for_dtype<Min>(dtype);
  }
  throw InvalidArgument("unknown ReduceOp");
}

// Calls f(T{}) with the C++ type gloo should see for `dtype` (16-bit floats travel as uint16_t).
template <typename F>
void with_element_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f16:
    case DType::bf16: f(std::uint16_t{}); return;
    case DType::i32: f(std::int32_t{}); return;
    case DType::i64: f(std::int64_t{}); return;
    case DType::boolean: break;
  }
  throw InvalidArgument("gloo cannot move dtype " + std::string(dtype_name(dtype)));
}

// AVG's second half: the sum divided by the group size (floating dtypes only; checked earlier).
void divide_in_place(void* data, DType dtype, std::size_t n, int size) {
  float inv = 1.0f / static_cast<float>(size);
  if (dtype == DType::f32) {
    auto* p = static_cast<float*>(data);
    for (std::size_t i = 0; i < n; ++i) p[i] *= inv;
    return;
  }
  auto* p = static_cast<std::uint16_t*>(data);
  for (std::size_t i = 0; i < n; ++i)
    p[i] = dtype == DType::f16 ? f32_to_f16(f16_to_f32(p[i]) * inv)
                               : f32_to_bf16(bf16_to_f32(p[i]) * inv);
}

// All-reduces n elements at `data` in place (shared by all_reduce and reduce_scatter).
void all_reduce_raw(const std::shared_ptr<gloo::Context>& ctx, void* data, DType dtype,
                    std::size_t n, ReduceOp op, std::uint32_t tag, Milliseconds timeout) {
  if (n == 0) return;
  gloo::AllreduceOptions opts(ctx);
  with_element_type(dtype, [&](auto t) {
    opts.setOutput(static_cast<decltype(t)*>(data), n);
  });
  opts.setReduceFunction(reduce_function(op, dtype));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
  if (op == ReduceOp::AVG) divide_in_place(data, dtype, n, ctx->size);
}

void copy_bytes(const Tensor& dst, const void* src) {
  if (dst.raw_data() != src) std::memcpy(dst.raw_data(), src, detail::nbytes(dst));  // in place
}

using detail::count;

}  // namespace

std::shared_ptr<Work> ProcessGroupGloo::all_reduce(Tensor& tensor, AllReduceOptions options) {
  detail::check_tensor(tensor, "all_reduce", "tensor");
  detail::check_reduce_op(options.op, tensor.dtype(), "all_reduce");
  auto ctx = impl_->context;
  return impl_->submit("all_reduce", options.timeout, true, [ctx, tensor, options](Milliseconds t) {
    all_reduce_raw(ctx, tensor.raw_data(), tensor.dtype(), count(tensor), options.op, 0, t);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::broadcast(Tensor& tensor, BroadcastOptions options) {
  detail::check_tensor(tensor, "broadcast", "tensor");
  detail::check_rank(options.root, size(), "broadcast", "root");
  auto ctx = impl_->context;
  return impl_->submit("broadcast", options.timeout, true, [ctx, tensor, options](Milliseconds t) {
    if (tensor.numel() == 0) return;
    gloo::BroadcastOptions opts(ctx);
    with_element_type(tensor.dtype(), [&](auto e) {
      opts.setOutput(static_cast<decltype(e)*>(tensor.raw_data()), count(tensor));
    });
    opts.setRoot(options.root);
    opts.setTimeout(t);
    gloo::broadcast(opts);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::all_gather_tensor(Tensor& output, const Tensor& input,
                                                          AllGatherOptions options) {
  detail::check_tensor(input, "all_gather_tensor", "input");
  detail::check_tensor(output, "all_gather_tensor", "output");
  GENESIS_CHECK(output.dtype() == input.dtype(), InvalidArgument,
                "all_gather_tensor output " + output.str() + " and input " + input.str() +
                    " differ in dtype");
  detail::check_numel(output, input.numel() * size(), "all_gather_tensor", "output");
  auto ctx = impl_->context;
  // In place (input is output's chunk rank()): gloo then sends from the output without a copy.
  const bool in_place = input.raw_data() == static_cast<const char*>(output.raw_data()) +
                                               rank() * detail::nbytes(input);
  return impl_->submit("all_gather", options.timeout, true,
                       [ctx, output, input, in_place](Milliseconds t) {
    if (input.numel() == 0) return;
    gloo::AllgatherOptions opts(ctx);
    with_element_type(input.dtype(), [&](auto e) {
      using T = decltype(e);
      if (!in_place) opts.setInput(static_cast<T*>(input.raw_data()), count(input));
      opts.setOutput(static_cast<T*>(output.raw_data()), count(output));
    });
    opts.setTimeout(t);
    gloo::allgather(opts);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::all_gather(std::vector<Tensor>& outputs,
                                                   const Tensor& input, AllGatherOptions options) {
  detail::check_tensor(input, "all_gather", "input");
  detail::check_list(outputs, static_cast<std::size_t>(size()), input, "all_gather", "outputs");
  auto ctx = impl_->context;
  return impl_->submit("all_gather", options.timeout, true, [ctx, outputs, input](Milliseconds t) {
    if (input.numel() == 0) return;
    Tensor flat = Tensor::empty({input.numel() * ctx->size}, input.dtype());
    gloo::AllgatherOptions opts(ctx);
    with_element_type(input.dtype(), [&](auto e) {
      using T = decltype(e);
      opts.setInput(static_cast<T*>(input.raw_data()), count(input));
      opts.setOutput(static_cast<T*>(flat.raw_data()), count(flat));
    });
    opts.setTimeout(t);
    gloo::allgather(opts);
    auto* bytes = static_cast<const char*>(flat.raw_data());
    for (std::size_t r = 0; r < outputs.size(); ++r)
      copy_bytes(outputs[r], bytes + r * detail::nbytes(input));
  });
}

std::shared_ptr<Work> ProcessGroupGloo::reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                                              ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter_tensor", "output");
  detail::check_tensor(input, "reduce_scatter_tensor", "input");
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter_tensor");
  GENESIS_CHECK(output.dtype() == input.dtype(), InvalidArgument,
                "reduce_scatter_tensor output " + output.str() + " and input " + input.str() +
                    " differ in dtype");
  detail::check_numel(input, output.numel() * size(), "reduce_scatter_tensor", "input");
  auto ctx = impl_->context;
  int r = rank();
  return impl_->submit("reduce_scatter", options.timeout, true,
                       [ctx, output, input, options, r](Milliseconds t) {
    Tensor scratch = input;
    if (!options.input_is_scratch) {
      scratch = Tensor::empty({input.numel()}, input.dtype());
      std::memcpy(scratch.raw_data(), input.raw_data(), detail::nbytes(input));
    }
    all_reduce_raw(ctx, scratch.raw_data(), scratch.dtype(), count(scratch), options.op, 0, t);
    copy_bytes(output, static_cast<const char*>(scratch.raw_data()) + r * detail::nbytes(output));
  });
}

std::shared_ptr<Work> ProcessGroupGloo::reduce_scatter(Tensor& output,
                                                       const std::vector<Tensor>& inputs,
                                                       ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter", "output");
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter");
  detail::check_list(inputs, static_cast<std::size_t>(size()), output, "reduce_scatter", "inputs");
  auto ctx = impl_->context;
  int r = rank();
  return impl_->submit("reduce_scatter", options.timeout, true,
                       [ctx, output, inputs, options, r](Milliseconds t) {
    std::size_t chunk = detail::nbytes(output);
    Tensor scratch = Tensor::empty({output.numel() * ctx->size}, output.dtype());
    auto* bytes = static_cast<char*>(scratch.raw_data());
    for (std::size_t i = 0; i < inputs.size(); ++i)
      std::memcpy(bytes + i * chunk, inputs[i].raw_data(), chunk);
    all_reduce_raw(ctx, bytes, scratch.dtype(), count(scratch), options.op, 0, t);
    copy_bytes(output, bytes + r * chunk);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::reduce(Tensor& tensor, ReduceOptions options) {
  detail::check_tensor(tensor, "reduce", "tensor");
  detail::check_reduce_op(options.op, tensor.dtype(), "reduce");
  detail::check_rank(options.root, size(), "reduce", "root");
  auto ctx = impl_->context;
  return impl_->submit("reduce", options.timeout, true, [ctx, tensor, options](Milliseconds t) {
    if (tensor.numel() == 0) return;
    gloo::ReduceOptions opts(ctx);
    with_element_type(tensor.dtype(), [&](auto e) {
      opts.setOutput(static_cast<decltype(e)*>(tensor.raw_data()), count(tensor));
    });
    opts.setRoot(options.root);
    opts.setReduceFunction(reduce_function(options.op, tensor.dtype()));
    opts.setTimeout(t);
    gloo::reduce(opts);
    if (options.op == ReduceOp::AVG && ctx->rank == options.root)
      divide_in_place(tensor.raw_data(), tensor.dtype(), count(tensor), ctx->size);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::gather(std::vector<Tensor>& outputs, const Tensor& input,
                                               GatherOptions options) {
  detail::check_tensor(input, "gather", "input");
  detail::check_rank(options.root, size(), "gather", "root");
  bool is_root = rank() == options.root;
  if (is_root)
    detail::check_list(outputs, static_cast<std::size_t>(size()), input, "gather", "outputs");
  auto ctx = impl_->context;
  std::vector<Tensor> targets = is_root ? outputs : std::vector<Tensor>{};
  return impl_->submit("gather", options.timeout, true,
                       [ctx, targets, input, options, is_root](Milliseconds t) {
    if (input.numel() == 0) return;
    Tensor flat = is_root ? Tensor::empty({input.numel() * ctx->size}, input.dtype()) : Tensor();
    gloo::GatherOptions opts(ctx);
    with_element_type(input.dtype(), [&](auto e) {
      using T = decltype(e);
      opts.setInput(static_cast<T*>(input.raw_data()), count(input));
      if (is_root) opts.setOutput(static_cast<T*>(flat.raw_data()), count(flat));
    });
    opts.setRoot(options.root);
    opts.setTimeout(t);
    gloo::gather(opts);
    if (!is_root) return;
    auto* bytes = static_cast<const char*>(flat.raw_data());
    for (std::size_t r = 0; r < targets.size(); ++r)
      copy_bytes(targets[r], bytes + r * detail::nbytes(input));
  });
}

std::shared_ptr<Work> ProcessGroupGloo::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                                ScatterOptions options) {
  detail::check_tensor(output, "scatter", "output");
  detail::check_rank(options.root, size(), "scatter", "root");
  bool is_root = rank() == options.root;
  if (is_root)
    detail::check_list(inputs, static_cast<std::size_t>(size()), output, "scatter", "inputs");
  auto ctx = impl_->context;
  std::vector<Tensor> sources = is_root ? inputs : std::vector<Tensor>{};
  return impl_->submit("scatter", options.timeout, true,
                       [ctx, output, sources, options, is_root](Milliseconds t) {
    if (output.numel() == 0) return;
    gloo::ScatterOptions opts(ctx);
    with_element_type(output.dtype(), [&](auto e) {
      using T = decltype(e);
      if (is_root) {
        std::vector<T*> ptrs;
        for (const auto& s : sources) ptrs.push_back(static_cast<T*>(s.raw_data()));
        opts.setInputs(ptrs, count(output));
      }
      opts.setOutput(static_cast<T*>(output.raw_data()), count(output));
    });
    opts.setRoot(options.root);
    opts.setTimeout(t);
    gloo::scatter(opts);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::barrier(BarrierOptions options) {
  auto ctx = impl_->context;
  return impl_->submit("barrier", options.timeout, true, [ctx](Milliseconds t) {
    gloo::BarrierOptions opts(ctx);
    opts.setTimeout(t);
    gloo::barrier(opts);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::send(const Tensor& tensor, int dst, int tag) {
  detail::check_tensor(tensor, "send", "tensor");
  detail::check_rank(dst, size(), "send", "destination");
  GENESIS_CHECK(dst != rank(), InvalidArgument,
                "send from rank " + std::to_string(dst) + " to itself");
  GENESIS_CHECK(tag >= 0, InvalidArgument, "send tag must be >= 0, got " + std::to_string(tag));
  auto ctx = impl_->context;
  std::string op = "send to rank " + std::to_string(dst) + " (tag " + std::to_string(tag) + ")";
  return impl_->submit(op, kGroupTimeout, false, [ctx, tensor, dst, tag](Milliseconds t) {
    auto buf = ctx->createUnboundBuffer(tensor.raw_data(), detail::nbytes(tensor));
    buf->send(dst, gloo::Slot::build(kSendRecvSlotPrefix, static_cast<std::uint32_t>(tag)));
    GENESIS_CHECK(buf->waitSend(t), CommError, "send was aborted");
  });
}

std::shared_ptr<Work> ProcessGroupGloo::recv(Tensor& tensor, int src, int tag) {
  detail::check_tensor(tensor, "recv", "tensor");
  detail::check_rank(src, size(), "recv", "source");
  GENESIS_CHECK(src != rank(), InvalidArgument,
                "recv on rank " + std::to_string(src) + " from itself");
  GENESIS_CHECK(tag >= 0, InvalidArgument, "recv tag must be >= 0, got " + std::to_string(tag));
  auto ctx = impl_->context;
  std::string op = "recv from rank " + std::to_string(src) + " (tag " + std::to_string(tag) + ")";
  return impl_->submit(op, kGroupTimeout, false, [ctx, tensor, src, tag](Milliseconds t) {
    auto buf = ctx->createUnboundBuffer(tensor.raw_data(), detail::nbytes(tensor));
    buf->recv(src, gloo::Slot::build(kSendRecvSlotPrefix, static_cast<std::uint32_t>(tag)));
    GENESIS_CHECK(buf->waitRecv(t), CommError, "recv was aborted");
  });
}

}  // namespace genesis::dist
