// The BPE model. The merge loop is tokenizers' Word::merge_all: a heap of candidate merges ordered
// by (rank, position), entries made stale by an earlier merge skipped when popped, so the result
// is the same as merging the lowest-ranked pair leftmost-first, in O(n log n) for the long pieces
// of sentencepiece-style tokenizers, whose pieces are whole lines. Merged pieces shorter than
// 256 bytes are cached per thread, as tokenizers caches them.
#include "tokenizer/bpe.hpp"

#include <atomic>
#include <queue>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/pre_tokenizers.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

namespace {

constexpr std::size_t kCachedPieceBytes = 256;
constexpr std::size_t kCacheEntries = 1 << 17;

struct PieceCache {
  std::uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> map;
};

std::uint64_t next_instance() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

std::string byte_token(unsigned b) {
  static const char* kHex = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

std::optional<std::string> optional_string(const nlohmann::json& json, std::string_view key) {
  const nlohmann::json* value = optional_field(json, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string())
    throw ConfigError("tokenizer.json: model BPE: \"" + std::string(key) + "\" must be a string");
  return value->get<std::string>();
}

}  // namespace

Bpe Bpe::from_json(const nlohmann::json& model) {
  constexpr std::string_view kWhere = "model BPE";
  Bpe bpe;
  if (const nlohmann::json* dropout = optional_field(model, "dropout")) {
    GENESIS_CHECK(dropout->is_number() && dropout->get<double>() == 0.0, NotSupported,
                  "tokenizer.json: model BPE: \"dropout\" " + dropout->dump() +
                      " is not supported (only null or 0: encoding must be deterministic)");
  }
  bpe.unk_token_ = optional_string(model, "unk_token");
  bpe.prefix_ = optional_string(model, "continuing_subword_prefix");
  bpe.suffix_ = optional_string(model, "end_of_word_suffix");
  if (bpe.prefix_ && bpe.prefix_->empty()) bpe.prefix_.reset();
  if (bpe.suffix_ && bpe.suffix_->empty()) bpe.suffix_.reset();
  bpe.fuse_unk_ = bool_field(model, "fuse_unk", kWhere, false);
  bpe.byte_fallback_ = bool_field(model, "byte_fallback", kWhere, false);
  bpe.ignore_merges_ = bool_field(model, "ignore_merges", kWhere, false);
  const nlohmann::json& vocab = field(model, "vocab", kWhere);
  GENESIS_CHECK(vocab.is_object(), ConfigError,
                "tokenizer.json: model BPE: \"vocab\" must be an object of token: id");
  bpe.vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    GENESIS_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
                      id.get<std::int64_t>() < (std::int64_t{1} << 31),
                  ConfigError,
                  "tokenizer.json: model BPE: the id of token '" + shown(token) + "' is not an id");
    bpe.vocab_.emplace(token, static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  bpe.build(array_field(model, "merges", kWhere));
  return bpe;
}

void Bpe::build(const nlohmann::json& merges) {
  instance_ = next_instance();
  std::int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  tokens_.assign(static_cast<std::size_t>(max_id + 1), nullptr);
  for (const auto& entry : vocab_) tokens_[entry.second] = &entry.first;
  byte_fallback_ids_.fill(-1);
  byte_char_ids_.fill(-1);
  for (unsigned b = 0; b < 256; ++b) {
    if (auto id = token_to_id(byte_token(b))) byte_fallback_ids_[b] = *id;
    if (auto id = token_to_id(byte_level_chars()[b])) byte_char_ids_[b] = *id;
  }
  const std::size_t prefix_len = prefix_ ? prefix_->size() : 0;
  merges_.reserve(merges.size());
  std::string merged;  // reused: a merge's two tokens joined
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const nlohmann::json& merge = merges[rank];
    std::string_view a, b;
    if (merge.is_string()) {
      const std::string& line = merge.get_ref<const std::string&>();
      const std::size_t space = line.find(' ');
      GENESIS_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                    ConfigError,
                    "tokenizer.json: model BPE: merge " + std::to_string(rank + 1) + " '" +
                        shown(line) + "' is not two tokens separated by one space");
      a = std::string_view(line).substr(0, space);
      b = std::string_view(line).substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      a = merge[0].get_ref<const std::string&>();
      b = merge[1].get_ref<const std::string&>();
    } else {
      throw ConfigError("tokenizer.json: model BPE: merge " + std::to_string(rank + 1) +
                        " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto lookup = [&](std::string_view token) {
      auto id = token_to_id(token);
      GENESIS_CHECK(id.has_value(), ConfigError,
                    "tokenizer.json: model BPE: merge " + std::to_string(rank + 1) + " ('" +
                        shown(a) + "' '" + shown(b) + "') names '" + shown(token) +
                        "', which is not in the vocabulary");
      return *id;
    };
    merged.assign(a);
    merged.append(b.size() >= prefix_len ? b.substr(prefix_len) : b);
    const std::int32_t left = lookup(a), right = lookup(b), merged_id = lookup(merged);
    merges_.insert(left, right, MergeRule{static_cast<std::uint32_t>(rank), merged_id});
  }
}

bool Bpe::set_raw_bytes(bool raw) {
  if (raw && (prefix_ || suffix_ || byte_fallback_)) return false;
  raw_bytes_ = raw;
  if (raw && raw_vocab_.empty() && ignore_merges_) {
    raw_vocab_.reserve(vocab_.size());
    for (const auto& [token, id] : vocab_)
      if (auto bytes = byte_level_bytes(token)) raw_vocab_.emplace(std::move(*bytes), id);
  }
  return true;
}

std::optional<std::int32_t> Bpe::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) return nullptr;
  return tokens_[id];
}

std::int32_t Bpe::unk_id() const {
  auto id = token_to_id(*unk_token_);
  GENESIS_CHECK(id.has_value(), ConfigError,
                "tokenizer.json: model BPE: unk_token '" + shown(*unk_token_) +
                    "' is not in the vocabulary");
  return *id;
}

void Bpe::initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const {
  std::optional<Symbol> unk;  // the unknown token being built (fused over unknown characters)
  auto push = [&](std::int32_t id, std::size_t len) {
    const auto n = static_cast<std::int32_t>(symbols.size());
    symbols.push_back(Symbol{id, n - 1, n + 1, static_cast<std::uint32_t>(len)});
  };
  auto flush_unk = [&] {
    if (unk) push(unk->id, unk->len);
    unk.reset();
  };
  std::string key;
  for (std::size_t pos = 0; pos < piece.size();) {
    const std::size_t len = raw_bytes_ ? 1 : utf8_length(static_cast<unsigned char>(piece[pos]));
    std::optional<std::int32_t> id;
    if (raw_bytes_) {
      const std::int32_t byte_id = byte_char_ids_[static_cast<unsigned char>(piece[pos])];
      if (byte_id >= 0) id = byte_id;
    } else if (!prefix_ && !suffix_) {
      key.assign(piece.substr(pos, len));
      id = token_to_id(key);
    } else {
      key.assign(prefix_ && pos > 0 ? *prefix_ : "");
      key.append(piece.substr(pos, len));
      if (suffix_ && pos + len == piece.size()) key.append(*suffix_);
      id = token_to_id(key);
    }
    pos += len;
    if (id) {
      flush_unk();
      push(*id, len);
      continue;
    }
    if (byte_fallback_ && !raw_bytes_) {
      bool all = true;
      for (char c : key) all = all && byte_fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : key) push(byte_fallback_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (!unk_token_) continue;  // tokenizers drops a character it has no token for
    if (unk && fuse_unk_) {
      unk->len += static_cast<std::uint32_t>(len);
    } else {
      flush_unk();
      unk = Symbol{unk_id(), 0, 0, static_cast<std::uint32_t>(len)};
    }
  }
  flush_unk();
  if (!symbols.empty()) symbols.back().next = -1;
}

void Bpe::merge_all(std::vector<Symbol>& symbols) const {
  struct Candidate {
    std::uint32_t rank;
    std::int32_t pos;
    std::int32_t merged;
    bool operator<(const Candidate& other) const {  // the heap's top: lowest rank, then position
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  std::vector<Candidate> storage;
  storage.reserve(symbols.size());
  std::priority_queue<Candidate> queue(std::less<Candidate>{}, std::move(storage));
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const MergeRule* rule = merges_.find(symbols[i].id, symbols[i + 1].id))
      queue.push({rule->rank, static_cast<std::int32_t>(i), rule->merged});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.len == 0 || left.next == -1) continue;
    Symbol& right = symbols[left.next];
    const MergeRule* rule = merges_.find(left.id, right.id);
    if (rule == nullptr || rule->merged != top.merged) continue;  // made stale by a merge
    left.id = top.merged;
    left.len += right.len;
    left.next = right.next;
    right.len = 0;
    if (left.next != -1) symbols[left.next].prev = top.pos;
    if (left.prev >= 0)
      if (const MergeRule* r = merges_.find(symbols[left.prev].id, left.id))
        queue.push({r->rank, left.prev, r->merged});
    if (left.next != -1)
      if (const MergeRule* r = merges_.find(left.id, symbols[left.next].id))
        queue.push({r->rank, top.pos, r->merged});
  }
}

void Bpe::encode(std::string_view piece, std::vector<std::int32_t>& ids) const {
  if (ignore_merges_) {
    const Vocab& whole = raw_bytes_ ? raw_vocab_ : vocab_;
    if (auto it = whole.find(piece); it != whole.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  thread_local PieceCache cache;
  const bool cacheable = piece.size() < kCachedPieceBytes;
  if (cacheable) {
    if (cache.owner != instance_) {
      cache.map.clear();
      cache.owner = instance_;
    }
    if (auto it = cache.map.find(piece); it != cache.map.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  initial_symbols(piece, symbols);
  if (symbols.size() > 1) merge_all(symbols);
  const std::size_t first = ids.size();
  for (const Symbol& s : symbols)
    if (s.len != 0) ids.push_back(s.id);
  if (cacheable) {
    if (cache.map.size() >= kCacheEntries) cache.map.clear();
    cache.map.emplace(std::string(piece), std::vector<std::int32_t>(ids.begin() + first, ids.end()));
  }
}

}  // namespace genesis::tokenizer
