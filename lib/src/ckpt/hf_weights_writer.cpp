// HfWeightsWriter: a weights directory as save_pretrained writes it, streamed tensor by tensor.
// Shards are assigned up front from the plan, as huggingface_hub's split_state_dict_into_shards
// does (a tensor over the limit gets a shard of its own, listed before the shard being filled), so
// each file's header is known when its first tensor arrives; at most that shard and one oversized
// tensor's are open at once. Files appear under their real names only when complete and synced.
#include "genesis/ckpt/hf_weights.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "durable_file.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/unique_fd.hpp"
#include "hf_weights_index.hpp"

namespace genesis::ckpt {
namespace fs = std::filesystem;

namespace {

std::string failure(const std::string& what, const fs::path& path) {
  return "cannot " + what + " '" + path.string() + "': " + std::strerror(errno);
}

void write_all(int fd, const char* p, std::size_t size, const fs::path& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    GENESIS_CHECK(n > 0, IoError, failure("write", path));
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

std::uint64_t planned_bytes(const HfTensorPlan& t) {
  std::uint64_t bytes = dtype_size(t.dtype);
  for (std::int64_t d : t.shape) {
    GENESIS_CHECK(d >= 0 && !__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes),
                  InvalidArgument, "hf weights plan: tensor '" + t.name + "' has a bad shape " + shape_str(t.shape));
  }
  return bytes;
}

}  // namespace

struct HfWeightsWriter::Impl {
  struct Shard {
    std::vector<std::size_t> tensors;  // plan indices, in plan order
    std::size_t written = 0;
    fs::path path, tmp;
    UniqueFd fd;
    bool done = false;
  };
  fs::path dir;
  std::vector<HfTensorPlan> plan;
  std::vector<std::uint64_t> bytes;    // per plan tensor
  std::vector<std::size_t> shard_of;   // per plan tensor
  std::vector<Shard> shards;
  std::size_t next = 0;
  bool finished = false;

  void open(Shard& s) {
    // Written entry by entry: an ordered_json would search its keys at every insertion.
    std::string text = R"({"__metadata__":{"format":"pt"})";
    std::uint64_t offset = 0;
    for (std::size_t i : s.tensors) {
      const nlohmann::json entry = {{"dtype", safetensors_dtype_name(plan[i].dtype)},
                                    {"shape", plan[i].shape},
                                    {"data_offsets", {offset, offset + bytes[i]}}};
      text += "," + nlohmann::json(plan[i].name).dump() + ":" + entry.dump();
      offset += bytes[i];
    }
    text += "}";
    text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
    const std::uint64_t length = text.size();
    s.fd = UniqueFd(::open(s.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    GENESIS_CHECK(s.fd, IoError, failure("create", s.tmp));
    write_all(s.fd.get(), reinterpret_cast<const char*>(&length), 8, s.tmp);
    write_all(s.fd.get(), text.data(), text.size(), s.tmp);
  }
  void close(Shard& s) {
    GENESIS_CHECK(::fsync(s.fd.get()) == 0, IoError, failure("fsync", s.tmp));
    GENESIS_CHECK(s.fd.close() == 0, IoError, failure("close", s.tmp));
    std::error_code ec;
    fs::rename(s.tmp, s.path, ec);
    GENESIS_CHECK(!ec, IoError, "cannot rename '" + s.tmp.string() + "' to '" + s.path.string() + "': " + ec.message());
    s.done = true;
  }
  // Writes t's elements converted to `dtype` in chunks, so a conversion never copies a whole tensor.
  void append(Shard& s, const Tensor& t, DType dtype) {
    const auto n = static_cast<std::size_t>(t.numel());
    const char* src = static_cast<const char*>(t.raw_data());
    if (n == 0) return;
    if (t.dtype() == dtype) return write_all(s.fd.get(), src, n * dtype_size(dtype), s.tmp);
    constexpr std::size_t kChunk = 1 << 20;
    std::vector<char> buffer(std::min(n, kChunk) * dtype_size(dtype));
    for (std::size_t done = 0; done < n; done += kChunk) {
      const std::size_t m = std::min(kChunk, n - done);
      convert_elements(src + done * dtype_size(t.dtype()), t.dtype(), buffer.data(), dtype, m);
      write_all(s.fd.get(), buffer.data(), m * dtype_size(dtype), s.tmp);
    }
  }
};

HfWeightsWriter::HfWeightsWriter(fs::path dir, std::vector<HfTensorPlan> plan, std::uint64_t max_shard_bytes)
    : impl_(std::make_unique<Impl>()) {
  GENESIS_CHECK(max_shard_bytes > 0, InvalidArgument, "hf weights: max_shard_bytes must be positive");
  Impl& m = *impl_;
  m.dir = std::move(dir);
  m.plan = std::move(plan);
  std::set<std::string> names;
  for (const HfTensorPlan& t : m.plan) {
    GENESIS_CHECK(t.name != "__metadata__" && names.insert(t.name).second, InvalidArgument,
                  "hf weights plan: tensor name '" + t.name + "' is reserved or repeated");
    try {
      (void)nlohmann::json(t.name).dump();  // a header is JSON: the name must be valid UTF-8
    } catch (const nlohmann::json::exception&) {
      throw InvalidArgument("hf weights plan: tensor name '" + t.name + "' is not valid UTF-8");
    }
    m.bytes.push_back(planned_bytes(t));
  }
  // huggingface_hub's split: fill a shard in order; a tensor that would tip it over the limit
  // starts the next; a tensor bigger than the limit alone is a shard by itself at once.
  std::vector<std::vector<std::size_t>> split;
  std::vector<std::size_t> current;
  std::uint64_t current_bytes = 0;
  for (std::size_t i = 0; i < m.plan.size(); ++i) {
    if (m.bytes[i] > max_shard_bytes) {
      split.push_back({i});
      continue;
    }
    if (current_bytes + m.bytes[i] > max_shard_bytes) {
      split.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += m.bytes[i];
  }
  if (!current.empty() || split.empty()) split.push_back(std::move(current));
  m.shard_of.resize(m.plan.size());
  m.shards.resize(split.size());
  for (std::size_t k = 0; k < split.size(); ++k) {
    Impl::Shard& s = m.shards[k];
    s.tensors = std::move(split[k]);
    for (std::size_t i : s.tensors) m.shard_of[i] = k;
    s.path = m.dir / (split.size() == 1 ? std::string(detail::kHfSingleFile) : detail::hf_shard_name(k + 1, split.size()));
    s.tmp = s.path;
    s.tmp += ".tmp";
  }
  std::error_code ec;
  fs::create_directories(m.dir, ec);
  GENESIS_CHECK(!ec, IoError, "cannot create '" + m.dir.string() + "': " + ec.message());
}

HfWeightsWriter::~HfWeightsWriter() {
  if (!impl_ || impl_->finished) return;
  // Abandoned: leave no partial file behind (complete shards stay; the index was never written).
  for (Impl::Shard& s : impl_->shards) {
    if (s.done || !s.fd) continue;
    s.fd.close();
    ::unlink(s.tmp.c_str());
  }
}

void HfWeightsWriter::write(const std::string& name, const Tensor& tensor) {
  Impl& m = *impl_;
  GENESIS_CHECK(!m.finished && m.next < m.plan.size(), InvalidArgument,
                "hf weights: tensor '" + name + "' written after the plan's last tensor");
  const HfTensorPlan& want = m.plan[m.next];
  GENESIS_CHECK(name == want.name, InvalidArgument,
                "hf weights: tensor '" + name + "' written where the plan has '" + want.name + "'");
  GENESIS_CHECK(tensor.defined() && tensor.shape() == want.shape, InvalidArgument,
                "hf weights: tensor '" + name + "' has shape " +
                    (tensor.defined() ? shape_str(tensor.shape()) : "undefined") + ", the plan " +
                    shape_str(want.shape));
  Impl::Shard& s = m.shards[m.shard_of[m.next]];
  if (!s.fd) m.open(s);
  Tensor t = tensor.detach();
  if (!t.device().is_cpu()) t = t.to(Device::cpu());
  m.append(s, t.contiguous(), want.dtype);
  ++m.next;
  if (++s.written == s.tensors.size()) m.close(s);
}

std::vector<fs::path> HfWeightsWriter::finish() {
  Impl& m = *impl_;
  GENESIS_CHECK(!m.finished, InvalidArgument, "hf weights: finish() called twice");
  GENESIS_CHECK(m.next == m.plan.size(), InvalidArgument,
                "hf weights: finish() after " + std::to_string(m.next) + " of the plan's " +
                    std::to_string(m.plan.size()) + " tensors");
  std::vector<fs::path> files;
  for (Impl::Shard& s : m.shards) {
    if (!s.done) {  // only an empty plan's one empty file
      m.open(s);
      m.close(s);
    }
    files.push_back(s.path);
  }
  const bool sharded = m.shards.size() > 1;
  if (sharded) {
    nlohmann::json weight_map = nlohmann::json::object();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < m.plan.size(); ++i) {
      weight_map[m.plan[i].name] = m.shards[m.shard_of[i]].path.filename().string();
      total += m.bytes[i];
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    files.push_back(m.dir / detail::kHfIndexFile);
    detail::replace_file_atomically(files.back(), index.dump(2) + "\n");
  }
  // What a loader would read instead of what was just written goes, after the new files are in
  // place: a single file shadows an index (transformers prefers it), and a previous export's
  // other shards are no longer listed.
  std::error_code ec;
  std::set<fs::path> written(files.begin(), files.end());
  for (const auto& entry : fs::directory_iterator(m.dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool stale = (sharded && name == detail::kHfSingleFile) ||
                       (!sharded && name == detail::kHfIndexFile) || detail::is_hf_shard_name(name);
    if (stale && !written.count(entry.path())) fs::remove(entry.path(), ec);
  }
  detail::fsync_directory(m.dir);
  m.finished = true;
  return files;
}

std::uint64_t parse_shard_size(const std::string& text) {
  // transformers' convert_file_size_to_int: GiB/MiB/KiB are powers of 2, GB/MB/KB powers of 10,
  // and a lowercase final "b" (5Gb) means bits. A bare number is bytes.
  struct Unit {
    const char* suffix;
    std::uint64_t scale;
  };
  constexpr Unit kUnits[] = {{"GIB", 1ull << 30}, {"MIB", 1ull << 20}, {"KIB", 1ull << 10},
                             {"GB", 1000000000}, {"MB", 1000000},    {"KB", 1000}};
  const std::string bad = "max_shard_size '" + text + "': expected a size like 5GB, 500MB, 2GiB or a byte count";
  std::string upper = text;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string digits = text;
  std::uint64_t scale = 1;
  bool bits = false;
  for (const Unit& u : kUnits) {
    const std::size_t n = std::strlen(u.suffix);
    if (upper.size() > n && upper.compare(upper.size() - n, n, u.suffix) == 0) {
      digits = text.substr(0, text.size() - n);
      scale = u.scale;
      bits = n == 2 && text.back() == 'b';
      break;
    }
  }
  GENESIS_CHECK(!digits.empty() && digits.size() <= 19 &&
                    std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }),
                InvalidArgument, bad);
  std::uint64_t bytes = 0;
  GENESIS_CHECK(!__builtin_mul_overflow(std::stoull(digits), scale, &bytes), InvalidArgument,
                bad + " (too large)");
  if (bits) bytes /= 8;
  GENESIS_CHECK(bytes > 0, InvalidArgument, "max_shard_size '" + text + "' must be more than 0 bytes");
  return bytes;
}

}  // namespace genesis::ckpt
