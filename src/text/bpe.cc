#include "text/bpe.h"

#include <queue>

#include "base/error.h"

namespace mpk::text {
namespace {

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

size_t char_len(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

}  // namespace

Bpe::Bpe(Vocab vocab,
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
  const auto it = vocab_.find(token);
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
  // Symbols in a linked list, candidate merges in a min-heap by (rank, position of the left
  // symbol): the reference's algorithm, O(n log n) where rescanning every pair after each
  // merge was O(n^2) (a word of a few thousand letters took seconds).
  struct Sym {
    int32_t id;
    int prev, next;
  };
  std::vector<Sym> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(char_len(static_cast<unsigned char>(word[i])), word.size() - i);
    if (const auto c = id(word.substr(i, n))) sym.push_back({*c, int(sym.size()) - 1, int(sym.size()) + 1});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Cand {
    int32_t rank, merged;
    int pos;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = sym[size_t(left)].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(sym[size_t(left)].id, sym[size_t(right)].id));
    if (it != merges_.end()) heap.push({it->second.first, it->second.second, left});
  };
  for (int i = 0; i + 1 < int(sym.size()); ++i) consider(i);
  std::vector<bool> gone(sym.size(), false);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Sym& l = sym[size_t(c.pos)];
    if (gone[size_t(c.pos)] || l.next < 0) continue;
    const auto it = merges_.find(pair_key(l.id, sym[size_t(l.next)].id));
    if (it == merges_.end() || it->second.first != c.rank || it->second.second != c.merged) continue;  // stale
    const int r = l.next;
    gone[size_t(r)] = true;
    l.id = c.merged;
    l.next = sym[size_t(r)].next;
    if (l.next >= 0) sym[size_t(l.next)].prev = c.pos;
    consider(l.prev);
    consider(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

}  // namespace mpk::text
