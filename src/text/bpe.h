// Byte-pair encoding of one pre-token: its characters become vocabulary ids, then the adjacent
// pair of lowest merge rank is merged (the leftmost among equal ranks) until no pair has a
// merge, which is the order of the reference implementation's priority queue.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mpk::text {

// Hashes std::string and std::string_view alike, so a lookup by view makes no string.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>>;

class Bpe {
 public:
  // `vocab`: token text -> id; `merges` in rank order, each two tokens whose concatenation is in
  // the vocabulary. Error(InvalidModel) naming a merge whose parts or result are not.
  // `ignore_merges`: a pre-token that is itself a token is that token, merges or not.
  Bpe(Vocab vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

  // Appends the ids of `word` (UTF-8 in the vocabulary's alphabet). A character that is not a
  // token is left out, as the reference does without an unknown token.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> id(std::string_view token) const;
  const Vocab& vocab() const { return vocab_; }

 private:
  Vocab vocab_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  bool ignore_merges_ = false;
};

}  // namespace mpk::text
