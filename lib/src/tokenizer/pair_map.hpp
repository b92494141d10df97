// An open-addressing hash map from a pair of token ids to (merge rank, merged id): the lookup the
// BPE merge loop does for every adjacent pair, several times a word, so it is one multiply and a
// short linear probe in a flat array instead of std::unordered_map's node chase.
#pragma once

#include <cstdint>
#include <vector>

namespace genesis::tokenizer {

struct MergeRule {
  std::uint32_t rank;
  std::int32_t merged;
};

class PairMap {
 public:
  void reserve(std::size_t count) {
    std::size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
  }
  // A pair seen again replaces the earlier rule, as a Rust HashMap built from the list does.
  void insert(std::int32_t a, std::int32_t b, MergeRule rule) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot& slot = find_slot(key(a, b));
    if (!slot.used) ++size_;
    slot = Slot{key(a, b), rule, true};
  }
  const MergeRule* find(std::int32_t a, std::int32_t b) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t k = key(a, b);
    for (std::size_t i = hash(k);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.key == k) return &slot.rule;
    }
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    MergeRule rule{};
    bool used = false;
  };
  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  std::size_t hash(std::uint64_t k) const {
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 20) & mask_;
  }
  Slot& find_slot(std::uint64_t k) {
    for (std::size_t i = hash(k);; i = (i + 1) & mask_)
      if (!slots_[i].used || slots_[i].key == k) return slots_[i];
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    reserve(old.empty() ? 8 : old.size());
    size_ = 0;
    for (const Slot& slot : old)
      if (slot.used) {
        find_slot(slot.key) = slot;
        ++size_;
      }
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace genesis::tokenizer
