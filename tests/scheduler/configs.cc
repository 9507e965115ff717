#include "configs.h"

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

std::vector<std::vector<bool>> ancestors(const TaskGraph& tg) {
  const size_t n = tg.tasks.size();
  std::vector<std::vector<bool>> a(n, std::vector<bool>(n, false));
  for (const Task& t : tg.tasks)  // ids are topological
    for (int e : t.waits)
      for (int p : tg.events[size_t(e)].triggers) {
        a[size_t(t.id)][size_t(p)] = true;
        for (size_t k = 0; k < n; ++k)
          if (a[size_t(p)][k]) a[size_t(t.id)][k] = true;
      }
  return a;
}

}  // namespace mpk::sched::testing
