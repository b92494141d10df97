// The CUDA op table against the CPU one (ggml's habit: one op test runs every backend against
// the CPU), and the AVX-512 CPU kernels against the baseline's. Everywhere: a CUDA build has a kernel in every row, a CPU-only build has no table.
// Tagged [cuda], on a GPU only (a WARN and an early return elsewhere): every case of
// op_cases.hpp runs on both backends and every output is compared element by element, with the
// device buffers mirrored exactly (views stay views) and everything outside the outputs poisoned.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/tensor/blas_kernels.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "tensor/op_cases.hpp"
#include "support/environment_skip.hpp"
#include "support/gpu_required.hpp"
#include "tensor/backends/cpu/register.hpp"  // cpu::base::kernel_table

#ifdef GENESIS_CPU_AVX512_KERNELS
namespace genesis::cpu::avx512 {
const KernelTable& kernel_table();
}
#endif

using namespace genesis;
using testing::op_cases::CaseBuilder;
using testing::op_cases::CaseList;
using testing::op_cases::OpCase;
using testing::op_cases::Tolerance;

namespace {

constexpr std::uint64_t kSeed = 0x6e6e5f6f70ull;

// bf16 keeps 8 significant bits and f16 11, so a 16-bit output differs from the CPU's f32 by its
// own rounding (2^-9 and 2^-12 relative) plus the kernel's f32 accumulation order.
Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return {3e-2, 3e-2};
    case DType::f16:
      return {5e-3, 5e-3};
    default:
      return {1e-4, 1e-4};
  }
}

std::string fmt(double v) {
  std::ostringstream s;
  s << std::setprecision(9) << v;
  return s.str();
}

std::string shape_text(const Shape& s) { return testing::op_cases::dims(s); }

// Storage offsets of every element of a view, in row-major order of its logical index.
std::vector<std::int64_t> storage_offsets(const Tensor& t) {
  std::vector<std::int64_t> offs;
  const std::int64_t n = t.numel();
  if (n == 0) return offs;
  offs.reserve(static_cast<std::size_t>(n));
  const Shape& shape = t.shape();
  const Shape& strides = t.strides();
  std::vector<std::int64_t> idx(shape.size(), 0);
  std::int64_t off = t.offset();
  for (std::int64_t i = 0; i < n; ++i) {
    offs.push_back(off);
    for (std::size_t d = shape.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
  return offs;
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element `off` of a host buffer of `dtype`. A bool reads as its raw byte, so the poison 7 is
// told apart from a written true.
double read_element(const void* base, DType dtype, std::int64_t off) {
  const char* p =
      static_cast<const char*>(base) + off * static_cast<std::int64_t>(dtype_size(dtype));
  switch (dtype) {
    case DType::f32: return load<float>(p);
    case DType::f16: return f16_to_f32(load<std::uint16_t>(p));
    case DType::bf16: return bf16_to_f32(load<std::uint16_t>(p));
    case DType::i32: return load<std::int32_t>(p);
    case DType::i64: return static_cast<double>(load<std::int64_t>(p));
    case DType::boolean: return load<std::uint8_t>(p);
  }
  return 0.0;
}

template <typename T>
void fill_with(const Tensor& flat, T value) {
  char* p = static_cast<char*>(flat.raw_data());
  for (std::int64_t i = 0, n = flat.numel(); i < n; ++i)
    std::memcpy(p + i * static_cast<std::int64_t>(sizeof(T)), &value, sizeof(T));
}

// What an output buffer holds before the call: NaN for floats, -777 for integers, 7 for bool.
void poison(const Tensor& flat) {
  switch (flat.dtype()) {
    case DType::f32: return fill_with(flat, std::numeric_limits<float>::quiet_NaN());
    case DType::f16: return fill_with(flat, std::uint16_t{0x7e00});
    case DType::bf16: return fill_with(flat, std::uint16_t{0x7fc0});
    case DType::i32: return fill_with(flat, std::int32_t{-777});
    case DType::i64: return fill_with(flat, std::int64_t{-777});
    case DType::boolean: return fill_with(flat, std::uint8_t{7});
  }
}

std::string index_text(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return shape_text(idx);
}

// One host storage of a case and its device twin. Tensors viewing one host storage view one
// device buffer, so packed layouts and in-place aliasing survive the trip.
struct Buffer {
  Tensor flat;  // the host storage as a flat tensor of its own dtype
  DType device_dtype = DType::f32;
  bool input = false;
  std::string users;          // "in[0] out[1]" for messages
  Tensor uploaded;            // contiguous, device dtype: what the GPU buffer held before the call
  Tensor device;              // the flat buffer on cuda:0
  Tensor downloaded;          // its bytes after the call
  std::vector<char> written;  // elements some output (or written input) covers
};

bool kept_f32(const OpCase& c, const Tensor& t) {
  for (const Tensor& k : c.keep_f32)
    if (k.defined() && k.storage() == t.storage()) return true;
  return false;
}

DType device_dtype_of(const OpCase& c, const Tensor& t) {
  if (!t.defined()) return DType::f32;
  return t.dtype() == DType::f32 && c.dtype != DType::f32 && !kept_f32(c, t) ? c.dtype : t.dtype();
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() == b.storage() && a.offset() == b.offset() &&
         a.shape() == b.shape() && a.strides() == b.strides() && a.dtype() == b.dtype();
}

// A contiguous host copy of t in t's own dtype, its values rounded through `through` first.
Tensor cpu_copy(const Tensor& t, DType through) {
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  if (t.numel() == 0) return out;
  if (through == t.dtype()) {
    out.copy_(t);
  } else {
    Tensor narrow = Tensor::empty(t.shape(), through);
    narrow.copy_(t);
    out.copy_(narrow);
  }
  return out;
}

std::string tensor_text(const Tensor& t, DType device_dtype) {
  if (!t.defined()) return "undefined";
  return std::string(dtype_name(device_dtype)) + " " + shape_text(t.shape()) + " strides " +
         shape_text(t.strides()) + " offset " + std::to_string(t.offset());
}

std::string describe(const OpCase& c) {
  std::ostringstream s;
  s << "op " << op_info(c.op).name << " [" << c.label << "], dtype " << dtype_name(c.dtype);
  for (std::size_t i = 0; i < c.in.size(); ++i)
    s << "\n  in[" << i << "]: " << tensor_text(c.in[i], device_dtype_of(c, c.in[i]));
  for (std::size_t j = 0; j < c.out.size(); ++j)
    s << "\n  out[" << j << "]: " << tensor_text(c.out[j], device_dtype_of(c, c.out[j]));
  return s.str();
}

// Element-by-element comparison of a device result (view `geometry` over the downloaded
// buffer) with the CPU's contiguous result. Returns "" when every element is within the case's
// tolerance, by default that of the result's own dtype (an f32 lse of a bf16 case is held to
// f32's: both sides compute it in f32 from the same rounded inputs); integers and bools exactly.
std::string compare_values(const std::string& what, const Buffer& b, const Tensor& geometry,
                           const Tensor& cpu, const std::optional<Tolerance>& case_tol) {
  const Tolerance tol = !is_floating(b.device_dtype)
                            ? testing::op_cases::kExact
                            : case_tol.value_or(default_tolerance(b.device_dtype));
  const std::vector<std::int64_t> offs = storage_offsets(geometry);
  const void* gpu_base = b.downloaded.raw_data();
  const void* cpu_base = cpu.raw_data();
  std::int64_t bad = 0, first = -1;
  double first_gpu = 0, first_cpu = 0, max_abs = 0, max_rel = 0;
  for (std::size_t i = 0; i < offs.size(); ++i) {
    const double g = read_element(gpu_base, b.device_dtype, offs[i]);
    const double c = read_element(cpu_base, cpu.dtype(), static_cast<std::int64_t>(i));
    bool ok;
    if (std::isnan(g) || std::isnan(c)) {
      ok = std::isnan(g) && std::isnan(c);
    } else if (g == c) {
      ok = true;  // equal infinities included
    } else {
      const double err = std::fabs(g - c);
      ok = err <= tol.atol + tol.rtol * std::fabs(c);
      if (std::isfinite(err)) {
        max_abs = std::max(max_abs, err);
        max_rel = std::max(max_rel, err / std::max(std::fabs(c), 1e-30));
      }
    }
    if (!ok) {
      if (bad++ == 0) {
        first = static_cast<std::int64_t>(i);
        first_gpu = g;
        first_cpu = c;
      }
    }
  }
  if (bad == 0) return "";
  std::ostringstream s;
  s << what << ": " << bad << " of " << offs.size() << " elements differ (rtol " << tol.rtol
    << ", atol " << tol.atol << "); first at flat index " << first << " "
    << index_text(first, geometry.shape()) << ": gpu " << fmt(first_gpu) << ", cpu "
    << fmt(first_cpu) << "; max abs err " << fmt(max_abs) << ", max rel err " << fmt(max_rel)
    << "\n";
  return s.str();
}

// Every element of a buffer that no output covers must hold the bytes it was uploaded with:
// the poison of an output buffer, the data of an input.
std::string check_untouched(const Buffer& b) {
  const std::int64_t n = b.flat.numel();
  const std::size_t size = dtype_size(b.device_dtype);
  const char* before = static_cast<const char*>(b.uploaded.raw_data());
  const char* after = static_cast<const char*>(b.downloaded.raw_data());
  std::int64_t changed = 0, first = -1;
  for (std::int64_t e = 0; e < n; ++e) {
    if (b.written[e]) continue;
    if (std::memcmp(before + e * size, after + e * size, size) != 0 && changed++ == 0) first = e;
  }
  if (changed == 0) return "";
  std::ostringstream s;
  s << "the buffer of " << b.users << "(" << n << " " << dtype_name(b.device_dtype)
    << " elements) changed outside every output at " << changed << " elements; first at element "
    << first << ": was " << fmt(read_element(before, b.device_dtype, first)) << ", now "
    << fmt(read_element(after, b.device_dtype, first)) << "\n";
  return s.str();
}

// The host storages a case's tensors use, keyed by storage, each flattened and with what the
// call may write in it marked (views of one storage share one buffer).
using Buffers = std::map<const Storage*, Buffer>;

Buffers collect_buffers(const OpCase& c) {
  Buffers buffers;
  auto enlist = [&](const Tensor& t, bool input, const std::string& name) {
    if (!t.defined()) return;
    Buffer& b = buffers[t.storage().get()];
    if (!b.flat.defined()) {
      const std::int64_t n =
          static_cast<std::int64_t>(t.storage()->nbytes() / dtype_size(t.dtype()));
      b.flat = make_view(t, {n}, {1}, 0);
      b.device_dtype = device_dtype_of(c, t);
    }
    GENESIS_CHECK(b.flat.dtype() == t.dtype() && b.device_dtype == device_dtype_of(c, t),
                  InvalidArgument, "case error: tensors sharing a storage differ in dtype");
    b.input = b.input || input;
    b.users += name + " ";
  };
  for (std::size_t i = 0; i < c.in.size(); ++i)
    enlist(c.in[i], true, "in[" + std::to_string(i) + "]");
  for (std::size_t j = 0; j < c.out.size(); ++j)
    enlist(c.out[j], false, "out[" + std::to_string(j) + "]");

  // Marks what the call may write.
  for (auto& [storage, b] : buffers) b.written.assign(static_cast<std::size_t>(b.flat.numel()), 0);
  auto mark = [&](const Tensor& t) {
    Buffer& b = buffers.at(t.storage().get());
    for (std::int64_t off : storage_offsets(t)) b.written[static_cast<std::size_t>(off)] = 1;
  };
  for (const Tensor& t : c.out) mark(t);
  for (int i : c.written_inputs) mark(c.in[static_cast<std::size_t>(i)]);
  return buffers;
}

// The CPU reference (the reference table's kernels): contiguous copies, in-place aliasing kept.
// "" or a case error.
std::string run_cpu_reference(const OpCase& c, const KernelTable& reference, Buffers& buffers,
                              std::vector<Tensor>& cpu_in, std::vector<Tensor>& cpu_out) {
  for (std::size_t i = 0; i < c.in.size(); ++i)
    if (c.in[i].defined())
      cpu_in[i] = cpu_copy(c.in[i], buffers.at(c.in[i].storage().get()).device_dtype);
  for (std::size_t j = 0; j < c.out.size(); ++j) {
    for (std::size_t i = 0; i < c.in.size() && !cpu_out[j].defined(); ++i)
      if (same_view(c.out[j], c.in[i])) cpu_out[j] = cpu_in[i];
    if (!cpu_out[j].defined()) cpu_out[j] = Tensor::empty(c.out[j].shape(), c.out[j].dtype());
  }
  try {
    reference[static_cast<int>(c.op)](std::span<const Tensor>(cpu_in.data(), cpu_in.size()),
                                      std::span<Tensor>(cpu_out.data(), cpu_out.size()), c.args);
  } catch (const std::exception& e) {
    return std::string("case error: the CPU kernel threw: ") + e.what() + "\n";
  }
  return "";
}

// The device under test (the GPU, or the CPU for another table of CPU kernels): every buffer
// uploaded as bytes (inputs converted on the host, outputs poisoned), the kernel run on views
// mirroring the case's, every buffer read back. "" or what went wrong.
std::string run_on(const OpCase& c, Kernel kernel, Device device, Buffers& buffers) {
  for (auto& [storage, b] : buffers) {
    const std::int64_t n = b.flat.numel();
    b.uploaded = Tensor::empty({n}, b.device_dtype);
    if (b.input && n > 0)
      b.uploaded.copy_(b.flat);
    else
      poison(b.uploaded);
    b.device = b.uploaded.to(device);
  }
  auto device_view = [&](const Tensor& t) {
    return t.defined() ? make_view(buffers.at(t.storage().get()).device, t.shape(), t.strides(),
                                   t.offset())
                       : Tensor();
  };
  std::vector<Tensor> dev_in, dev_out;
  for (const Tensor& t : c.in) dev_in.push_back(device_view(t));
  for (const Tensor& t : c.out) dev_out.push_back(device_view(t));
  try {
    kernel(std::span<const Tensor>(dev_in.data(), dev_in.size()),
           std::span<Tensor>(dev_out.data(), dev_out.size()), c.args);
  } catch (const std::exception& e) {
    return std::string("the kernel under test threw: ") + e.what() + "\n";
  }
  try {
    // A contiguous device tensor comes back as one plain copy, never through the copy kernel.
    for (auto& [storage, b] : buffers) b.downloaded = b.device.to(Device::cpu());
  } catch (const std::exception& e) {
    return std::string("reading the results back failed (a device fault in the kernel?): ") +
           e.what() + "\n";
  }
  return "";
}

// Another table of CPU kernels against the reference's results (ref_out, ref_in): both run on
// the same contiguous copies (CPU kernels take no views), and every output and updated input is
// compared element by element.
std::string compare_cpu_tables(const OpCase& c, const KernelTable& tested, Buffers& buffers,
                               const std::vector<Tensor>& ref_out,
                               const std::vector<Tensor>& ref_in) {
  std::vector<Tensor> in(c.in.size()), out(c.out.size());
  if (std::string error = run_cpu_reference(c, tested, buffers, in, out); !error.empty())
    return "the kernel under test: " + error;
  // A row that rounds to the case's 16-bit dtype on the way (rms_norm's contract) can land a
  // result one ulp of that dtype apart when the two sum orders differ: the case dtype's tolerance.
  const std::optional<Tolerance> tol = c.tol ? c.tol : std::optional(default_tolerance(c.dtype));
  auto compare = [&](const std::string& what, const Tensor& result, const Tensor& reference) {
    Buffer b;
    b.downloaded = result;
    b.device_dtype = result.dtype();
    return compare_values(what, b, result, reference, tol);
  };
  std::string report;
  for (std::size_t j = 0; j < c.out.size(); ++j)
    report += compare("out[" + std::to_string(j) + "]", out[j], ref_out[j]);
  for (int i : c.written_inputs) {
    const auto k = static_cast<std::size_t>(i);
    report += compare("in[" + std::to_string(i) + "] (updated in place)", in[k], ref_in[k]);
  }
  return report;
}

// Which kernels a run compares: the reference's (CPU) against the tested table's on its device;
// no tested table runs the reference alone.
struct Tables {
  const KernelTable& reference;
  const KernelTable* tested;
  Device device;
};

// Runs one case on the reference and, given a tested table, on its device; returns "" when
// everything agrees, else a report naming each disagreement.
std::string run_case(const OpCase& c, const Tables& tables) {
  const OpInfo& info = op_info(c.op);
  if ((info.num_inputs >= 0 && static_cast<int>(c.in.size()) != info.num_inputs) ||
      static_cast<int>(c.out.size()) != info.num_outputs)
    return "case error: the row takes " + std::to_string(info.num_inputs) + " inputs and " +
           std::to_string(info.num_outputs) + " outputs\n";

  Buffers buffers = collect_buffers(c);
  auto buffer_of = [&](const Tensor& t) -> Buffer& { return buffers.at(t.storage().get()); };
  std::vector<Tensor> cpu_in(c.in.size()), cpu_out(c.out.size());
  if (std::string error = run_cpu_reference(c, tables.reference, buffers, cpu_in, cpu_out);
      !error.empty())
    return error;
  if (tables.tested == nullptr) return "";
  if (tables.device.is_cpu()) return compare_cpu_tables(c, *tables.tested, buffers, cpu_out, cpu_in);
  const Kernel kernel = (*tables.tested)[static_cast<int>(c.op)];
  if (kernel == nullptr) return "the tested table has no kernel in this row\n";
  if (std::string error = run_on(c, kernel, tables.device, buffers); !error.empty()) return error;

  // ---- the comparison
  std::string report;
  for (std::size_t j = 0; j < c.out.size(); ++j)
    report += compare_values("out[" + std::to_string(j) + "]", buffer_of(c.out[j]), c.out[j],
                             cpu_out[j], c.tol);
  for (int i : c.written_inputs) {
    const auto k = static_cast<std::size_t>(i);
    report += compare_values("in[" + std::to_string(i) + "] (updated in place)", buffer_of(c.in[k]),
                             c.in[k], cpu_in[k], c.tol);
  }
  for (auto& [storage, b] : buffers) report += check_untouched(b);
  return report;
}

// GENESIS_OP_CASES=text runs only the cases whose "op [label]" contains text (debugging on a
// GPU); every case is still built, so the random values stay those of the full run.
bool selected(const OpCase& c, const char* filter) {
  if (filter == nullptr || *filter == '\0') return true;
  const std::string name = std::string(op_info(c.op).name) + " [" + c.label + "]";
  return name.find(filter) != std::string::npos;
}


// Runs every case and checks that every row has one.
void run_all_cases(const Tables& tables) {
  const char* filter = std::getenv("GENESIS_OP_CASES");
  Generator gen(kSeed);
  std::set<int> covered;
  int ran = 0;
  for (CaseBuilder build : testing::op_cases::kCaseBuilders) {
    CaseList cases;
    build(cases, gen);
    for (const OpCase& c : cases) {
      if (!selected(c, filter)) continue;
      covered.insert(static_cast<int>(c.op));
      ++ran;
      std::string report;
      try {
        report = run_case(c, tables);
      } catch (const std::exception& e) {
        report = std::string("the harness failed: ") + e.what();
      }
      INFO(describe(c));
      INFO(report);
      CHECK(report.empty());
    }
  }
  if (filter != nullptr && *filter != '\0') {
    WARN("GENESIS_OP_CASES=" << filter << " ran " << ran
                             << " cases; the row coverage check is off");
    return;
  }
  for (int i = 0; i < kOpCount; ++i) {
    INFO("op " << kOpInfo[static_cast<std::size_t>(i)].name << " has no case");
    CHECK(covered.count(i) == 1);
  }
  REQUIRE(static_cast<int>(covered.size()) == kOpCount);
}

}  // namespace

TEST_CASE("a CUDA build has a CUDA kernel for every op-table row", "[tensor][op_table]") {
#ifdef GENESIS_WITH_CUDA
  const KernelTable* table = cuda_kernels();
  REQUIRE(table != nullptr);
  for (int i = 0; i < kOpCount; ++i) {
    INFO("op " << kOpInfo[static_cast<std::size_t>(i)].name);
    CHECK((*table)[static_cast<std::size_t>(i)] != nullptr);
  }
#else
  REQUIRE(cuda_kernels() == nullptr);
#endif
}

TEST_CASE("every op-table row matches the CPU kernel on the GPU", "[cuda][op_table]") {
  if (testing::skip_without_gpu("the CPU-vs-CUDA op table")) return;
  const KernelTable* table = cuda_kernels();
  REQUIRE(table != nullptr);
  run_all_cases({cpu_kernels(), table, Device::cuda(0)});
}

// The CPU kernels compiled for AVX-512 (chosen at run time where the CPU has it, isa.hpp) against
// the same kernels compiled for the portable baseline, on every case: a wider vector changes the
// order of a sum's partial sums, nothing else, so the GPU's tolerances hold with room to spare.
TEST_CASE("the AVX-512 CPU kernels match the baseline's on every op-table case",
          "[tensor][op_table]") {
#ifdef GENESIS_CPU_AVX512_KERNELS
  if (!cpu::cpu_features().avx512)
    return testing::skip_test(testing::Need::avx512,
                              "this CPU has no AVX-512: the kernels chosen for it never run here");
  REQUIRE(std::string(cpu_kernel_set()) == "avx512");
  REQUIRE(&cpu_kernels() == &cpu::avx512::kernel_table());
  run_all_cases({cpu::base::kernel_table(), &cpu::avx512::kernel_table(), Device::cpu()});
#else
  return testing::skip_test(testing::Need::avx512,
                            "this build has one set of CPU kernels (GENESIS_NATIVE, or not x86-64)");
#endif
}

// Hidden (not in ctest): the CPU half of every case, so that the cases themselves can be checked
// on a machine without a GPU before any GPU time is spent: genesis_tests "[op_table_cases]".
TEST_CASE("every op-table case runs on the CPU kernels", "[.][op_table_cases]") {
  run_all_cases({cpu_kernels(), nullptr, Device::cpu()});
}
