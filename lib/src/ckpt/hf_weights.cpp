// HfWeights: a Hugging Face weights directory opened by mapping each safetensors file and checking
// its header (safetensors_header.cpp) and the index against the shards before any tensor is read.
// A read touches only the pages of the requested elements. Not here: writing (hf_weights_writer),
// what the names mean (the model families), and files changed while mapped (a truncated file
// faults on access, as with any mapping).
#include "genesis/ckpt/hf_weights.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "checked_json.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/unique_fd.hpp"
#include "hf_weights_index.hpp"
#include "safetensors_header.hpp"

namespace genesis::ckpt {
namespace fs = std::filesystem;

// Named, not anonymous: HfWeights::Impl holds these, and a unity build includes this file.
namespace detail {

// One safetensors file mapped read-only for the reader's lifetime, its header checked.
class MappedShard {
 public:
  explicit MappedShard(fs::path path) : path_(std::move(path)) {
    const std::string where = detail::safetensors_where(path_);
    // O_NONBLOCK: a FIFO planted under a shard's name must fail the S_ISREG check, not block.
    UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    GENESIS_CHECK(fd, IoError, where + "cannot open: " + std::strerror(errno));
    struct stat st {};
    GENESIS_CHECK(::fstat(fd.get(), &st) == 0, IoError, where + "cannot stat: " + std::strerror(errno));
    GENESIS_CHECK(S_ISREG(st.st_mode), IoError, where + "not a regular file");
    size_ = static_cast<std::size_t>(st.st_size);
    GENESIS_CHECK(size_ >= 8, IoError,
                  where + "not a safetensors file: " + std::to_string(size_) +
                      " bytes, shorter than the 8-byte header length");
    void* base = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    GENESIS_CHECK(base != MAP_FAILED, IoError, where + "cannot map: " + std::strerror(errno));
    base_ = static_cast<const char*>(base);
    try {
      header_ = detail::check_safetensors_file(std::string_view(base_, size_), path_);
    } catch (...) {
      ::munmap(base, size_);  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~MappedShard() { ::munmap(const_cast<char*>(base_), size_); }
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;

  const fs::path& path() const { return path_; }
  const detail::SafetensorsHeader& header() const { return header_; }
  // The entry's bytes start here (no alignment promised: the header length is arbitrary).
  const char* data(const detail::SafetensorsEntry& e) const { return base_ + header_.data_start + e.begin; }
  // Gives back the whole pages of [begin, begin + bytes), once read: a mapped page read stays
  // resident in the process until unmapped, so loading a checkpoint would otherwise hold the
  // whole file beside the model it was copied into (1.2 GB for a 0.6B model in bf16). A later
  // read of the same bytes maps them again from the page cache.
  void release(const char* begin, std::size_t bytes) const {
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto from = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page;
    const auto to = (reinterpret_cast<std::uintptr_t>(begin) + bytes) / page * page;
    if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }

 private:
  fs::path path_;
  const char* base_ = nullptr;
  std::size_t size_ = 0;
  detail::SafetensorsHeader header_;
};

}  // namespace detail

namespace {

std::string read_index_text(const fs::path& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  GENESIS_CHECK(!ec, IoError, "weights index '" + path.string() + "': cannot read: " + ec.message());
  GENESIS_CHECK(size <= detail::kMaxHfIndexBytes, IoError,
                "weights index '" + path.string() + "': " + std::to_string(size) +
                    " bytes, more than an index can need (" +
                    std::to_string(detail::kMaxHfIndexBytes) + ")");
  std::ifstream in(path, std::ios::binary);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  GENESIS_CHECK(in.good() || size == 0, IoError, "weights index '" + path.string() + "': short read");
  return text;
}

// Converts n elements at `src` (any alignment) into dst. convert_elements reads its source as
// typed elements, so a misaligned source goes through an aligned bounce buffer, a chunk at a time.
void convert_from(const char* src, DType from, void* dst, DType to, std::size_t n) {
  if (n == 0) return;
  const std::size_t in_size = dtype_size(from), out_size = dtype_size(to);
  if (from == to) {
    std::memcpy(dst, src, n * in_size);
  } else if (reinterpret_cast<std::uintptr_t>(src) % in_size == 0) {
    convert_elements(src, from, dst, to, n);
  } else {
    constexpr std::size_t kChunk = 1 << 16;
    std::vector<std::uint64_t> bounce((kChunk * in_size + 7) / 8);
    for (std::size_t done = 0; done < n; done += kChunk) {
      const std::size_t m = std::min(kChunk, n - done);
      std::memcpy(bounce.data(), src + done * in_size, m * in_size);
      convert_elements(bounce.data(), from, static_cast<char*>(dst) + done * out_size, to, m);
    }
  }
}

}  // namespace

struct HfWeights::Impl {
  struct Ref {
    const detail::MappedShard* shard;
    const detail::SafetensorsEntry* entry;
  };
  fs::path dir;
  std::vector<std::unique_ptr<detail::MappedShard>> shards;
  std::map<std::string, Ref> tensors;

  const Ref& find(const std::string& name) const {
    const auto it = tensors.find(name);
    GENESIS_CHECK(it != tensors.end(), IoError,
                  "weights '" + dir.string() + "': no tensor '" + detail::excerpt(name) + "'");
    return it->second;
  }
  // The tensor's genesis dtype; NotSupported for the format's others (U8, F64, F8_*, ...).
  DType stored_dtype(const Ref& ref) const {
    const auto dtype = detail::genesis_dtype(ref.entry->dtype);
    GENESIS_CHECK(dtype.has_value(), NotSupported,
                  "tensor '" + detail::excerpt(ref.entry->name) + "' in '" + ref.shard->path().string() +
                      "' is " + ref.entry->dtype + ", which genesis does not read (F32 F16 BF16 I32 I64 BOOL)");
    return *dtype;
  }
  void add_shard(const fs::path& path) {
    shards.push_back(std::make_unique<detail::MappedShard>(path));
    const detail::MappedShard* shard = shards.back().get();
    for (const detail::SafetensorsEntry& e : shard->header().entries) {
      const auto [it, fresh] = tensors.emplace(e.name, Ref{shard, &e});
      GENESIS_CHECK(fresh, IoError,
                    "weights '" + dir.string() + "': tensor '" + detail::excerpt(e.name) + "' is in both '" +
                        it->second.shard->path().filename().string() + "' and '" +
                        path.filename().string() + "'");
    }
  }
};

HfWeights::HfWeights(const fs::path& dir) : impl_(std::make_unique<Impl>()) {
  impl_->dir = dir;
  std::error_code ec;
  GENESIS_CHECK(fs::is_directory(dir, ec), IoError, "weights '" + dir.string() + "': not a directory");
  // transformers prefers the single file when both are present; so does this reader.
  const fs::path single = dir / detail::kHfSingleFile, index_path = dir / detail::kHfIndexFile;
  if (fs::exists(single, ec)) {
    impl_->add_shard(single);
    return;
  }
  GENESIS_CHECK(fs::exists(index_path, ec), IoError,
                "weights '" + dir.string() + "': neither " + detail::kHfSingleFile + " nor " +
                    detail::kHfIndexFile + " is there");
  const detail::HfIndex index = detail::parse_hf_index(read_index_text(index_path), index_path);
  for (const std::string& shard : index.shards) {
    GENESIS_CHECK(fs::exists(dir / shard, ec), IoError,
                  "weights index '" + index_path.string() + "': shard '" + shard + "' is missing");
    impl_->add_shard(dir / shard);
  }
  for (const auto& [name, shard] : index.weight_map) {
    const auto it = impl_->tensors.find(name);
    GENESIS_CHECK(it != impl_->tensors.end() && it->second.shard->path() == dir / shard, IoError,
                  "weights index '" + index_path.string() + "': lists tensor '" + detail::excerpt(name) +
                      "' in '" + shard + "', which does not hold it");
  }
}

HfWeights::~HfWeights() = default;
HfWeights::HfWeights(HfWeights&&) noexcept = default;
HfWeights& HfWeights::operator=(HfWeights&&) noexcept = default;

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, ref] : impl_->tensors) out.push_back(name);
  return out;
}

bool HfWeights::contains(const std::string& name) const { return impl_->tensors.count(name) != 0; }

Shape HfWeights::shape(const std::string& name) const {
  const Impl::Ref& ref = impl_->find(name);
  return detail::genesis_shape(*ref.entry, ref.shard->path());
}

DType HfWeights::dtype(const std::string& name) const { return impl_->stored_dtype(impl_->find(name)); }

fs::path HfWeights::file_of(const std::string& name) const { return impl_->find(name).shard->path(); }

Tensor HfWeights::read(const std::string& name, DType dtype, std::int64_t offset, std::int64_t numel) const {
  const Impl::Ref& ref = impl_->find(name);
  const DType stored = impl_->stored_dtype(ref);
  // The byte range was checked against shape x dtype, so it gives the element count exactly.
  const auto total = static_cast<std::int64_t>((ref.entry->end - ref.entry->begin) / dtype_size(stored));
  GENESIS_CHECK(offset >= 0 && numel >= 0 && offset <= total && numel <= total - offset, InvalidArgument,
                "tensor '" + detail::excerpt(name) + "': elements [" + std::to_string(offset) + ", +" +
                    std::to_string(numel) + ") are outside its " + std::to_string(total));
  Tensor out = Tensor::empty({numel}, dtype);
  const char* from = ref.shard->data(*ref.entry) + offset * static_cast<std::int64_t>(dtype_size(stored));
  convert_from(from, stored, out.raw_data(), dtype, static_cast<std::size_t>(numel));
  ref.shard->release(from, static_cast<std::size_t>(numel) * dtype_size(stored));
  return out;
}

Tensor HfWeights::read(const std::string& name, DType dtype) const {
  const Impl::Ref& ref = impl_->find(name);
  const DType stored = impl_->stored_dtype(ref);
  Tensor out = Tensor::empty(detail::genesis_shape(*ref.entry, ref.shard->path()), dtype);
  convert_from(ref.shard->data(*ref.entry), stored, out.raw_data(), dtype,
               static_cast<std::size_t>(out.numel()));
  ref.shard->release(ref.shard->data(*ref.entry), ref.entry->end - ref.entry->begin);
  return out;
}

}  // namespace genesis::ckpt
