// tokenizer.json's BPE model, as Hugging Face's tokenizers runs it: a piece starts as one symbol
// per character (its vocabulary id, else its <0xXX> byte tokens with byte_fallback, else the
// unknown token, fused or not), then the adjacent pair of lowest merge rank is merged, leftmost
// first, until no pair has a rule. ignore_merges looks the whole piece up first. With raw bytes
// (a ByteLevel pre-tokenizer last) a piece arrives as bytes and each byte is its character's id.
// Not here: dropout (refused unless 0), other models (WordPiece, Unigram, WordLevel).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/pair_map.hpp"

namespace genesis::tokenizer {

// std::string keys looked up by string_view without a copy.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

class Bpe {
 public:
  // From tokenizer.json's "model" object (type BPE).
  static Bpe from_json(const nlohmann::json& model);

  Bpe(Bpe&&) noexcept = default;
  Bpe& operator=(Bpe&&) noexcept = default;
  Bpe(const Bpe&) = delete;  // tokens_ points into vocab_
  Bpe& operator=(const Bpe&) = delete;

  // Take pieces as raw bytes instead of byte-level characters (see the file comment). Returns
  // false, changing nothing, where that would not give the same ids (a subword prefix or
  // suffix, byte_fallback).
  bool set_raw_bytes(bool raw);
  // Appends the ids of one piece (non-empty, valid UTF-8 unless raw).
  void encode(std::string_view piece, std::vector<std::int32_t>& ids) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  // The token of an id, or nullptr when the vocabulary has none.
  const std::string* id_to_token(std::int32_t id) const;
  std::size_t vocab_size() const { return vocab_.size(); }
  std::int32_t max_id() const { return static_cast<std::int32_t>(tokens_.size()) - 1; }

 private:
  Bpe() = default;
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;
    std::uint32_t len;  // bytes of the piece it covers; 0 once merged into its left neighbour
  };
  void build(const nlohmann::json& merges);
  void initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  void merge_all(std::vector<Symbol>& symbols) const;
  std::int32_t unk_id() const;

  Vocab vocab_;
  Vocab raw_vocab_;  // tokens spelled in raw bytes, for ignore_merges on raw pieces
  std::vector<const std::string*> tokens_;  // by id
  PairMap merges_;
  std::optional<std::string> unk_token_, prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false, raw_bytes_ = false;
  std::array<std::int32_t, 256> byte_fallback_ids_{};  // <0xXX> tokens, -1 where missing
  std::array<std::int32_t, 256> byte_char_ids_{};      // byte-level characters, -1 where missing
  std::uint64_t instance_ = 0;  // keys the per-thread cache of merged pieces
};

}  // namespace genesis::tokenizer
