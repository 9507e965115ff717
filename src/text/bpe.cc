#include "text/bpe.h"

#include <limits>

#include "base/error.h"

namespace mpk::text {
namespace {

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

size_t char_len(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

}  // namespace

Bpe::Bpe(std::unordered_map<std::string, int32_t> vocab,
         const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
    MPK_CHECK(ia != vocab_.end() && ib != vocab_.end() && im != vocab_.end(), InvalidModel)
        << "tokenizer: merge " << r << " ('" << a << "' '" << b << "') names a token the vocabulary lacks";
    // A repeated pair keeps its first (lowest) rank, as the reference's map does.
    merges_.emplace(pair_key(ia->second, ib->second), std::make_pair(int32_t(r), im->second));
  }
}

std::optional<int32_t> Bpe::id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto whole = id(word)) {
      out.push_back(*whole);
      return;
    }
  }
  std::vector<int32_t> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(char_len(static_cast<unsigned char>(word[i])), word.size() - i);
    if (const auto c = id(word.substr(i, n))) sym.push_back(*c);
    i += n;
  }
  for (;;) {
    int32_t best_rank = std::numeric_limits<int32_t>::max(), best_id = -1;
    size_t best = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      const auto it = merges_.find(pair_key(sym[i], sym[i + 1]));
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best_id = it->second.second;
        best = i;
      }
    }
    if (best_id < 0) break;
    sym[best] = best_id;
    sym.erase(sym.begin() + std::ptrdiff_t(best) + 1);
  }
  out.insert(out.end(), sym.begin(), sym.end());
}

}  // namespace mpk::text
