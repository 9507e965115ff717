#include "configs.h"

#include <set>
#include <stdexcept>
#include <utility>

#include "scheduler/events.h"

namespace mpk::sched::testing {

int64_t expected_weight_bytes(const model::Config& c, DType dt) {
  const int64_t h = c.hidden_size, i = c.intermediate_size, d = c.head_dim;
  const int64_t q = int64_t(c.num_heads) * d, kv = int64_t(c.num_kv_heads) * d;
  int64_t layer = 2 * h;                         // input and post-attention norms
  layer += (q + 2 * kv) * h + h * q + 3 * i * h;  // q, k, v, o, gate, up, down
  if (c.attention_bias) layer += q + 2 * kv;
  if (c.o_proj_bias) layer += h;
  if (c.qk_norm) layer += 2 * d;
  const int64_t elements = c.num_layers * layer + h /* final norm */ + h /* embedding row */ +
                           int64_t(c.vocab_size) * h /* LM head */;
  return elements * int64_t(dtype_size(dt));
}

TaskGraph build_tasks(const ir::Graph& g, const DecomposeOptions& d, const FuseOptions& f) {
  return build_events(fuse(g, decompose(g, d), f));
}

std::vector<int> waited_triggers(const TaskGraph& tg, const Task& t) {
  std::set<int> s;
  for (int e : t.waits)
    for (int p : tg.events[size_t(e)].triggers) s.insert(p);
  return {s.begin(), s.end()};
}

Ancestors::Ancestors(const TaskGraph& tg) : words_((tg.tasks.size() + 63) / 64) {
  const size_t n = tg.tasks.size();
  bits_.assign(n * words_, 0);
  std::vector<std::vector<int>> producers(n);
  for (const Task& t : tg.tasks)
    for (int e : t.waits)
      for (int p : tg.events[size_t(e)].triggers) producers[size_t(t.id)].push_back(p);
  // Depth-first over the wait edges: a task's row is filled once all its producers' rows are.
  enum : uint8_t { kTodo, kOpen, kDone };
  std::vector<uint8_t> state(n, kTodo);
  std::vector<std::pair<int, size_t>> stack;  // (task, its next producer to visit)
  for (size_t root = 0; root < n; ++root) {
    if (state[root] != kTodo) continue;
    state[root] = kOpen;
    stack.push_back({int(root), 0});
    while (!stack.empty()) {
      const int t = stack.back().first;
      const std::vector<int>& ps = producers[size_t(t)];
      if (size_t& next = stack.back().second; next < ps.size()) {
        const int p = ps[next++];
        if (state[size_t(p)] == kOpen) throw std::logic_error("ancestors: the waits form a cycle");
        if (state[size_t(p)] == kTodo) {
          state[size_t(p)] = kOpen;
          stack.push_back({p, 0});
        }
        continue;
      }
      uint64_t* row = &bits_[size_t(t) * words_];
      for (int p : ps) {
        row[size_t(p) / 64] |= uint64_t(1) << (p % 64);
        const uint64_t* from = &bits_[size_t(p) * words_];
        for (size_t w = 0; w < words_; ++w) row[w] |= from[w];
      }
      state[size_t(t)] = kDone;
      stack.pop_back();
    }
  }
}

}  // namespace mpk::sched::testing
