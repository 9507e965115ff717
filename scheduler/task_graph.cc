#include "scheduler/task_graph.h"

#include <algorithm>

namespace mpk::sched {

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::Linear: return "linear";
    case TaskKind::Attention: return "attention";
    case TaskKind::AttentionMerge: return "attention_merge";
    case TaskKind::Vector: return "vector";
  }
  return "?";
}

int64_t TaskGraph::total_weight_bytes() const {
  int64_t s = 0;
  for (const Task& t : tasks) s += t.weight_bytes;
  return s;
}

int64_t TaskGraph::total_kv_bytes() const {
  int64_t s = 0;
  for (const Task& t : tasks) s += t.kv_bytes;
  return s;
}

double TaskGraph::total_flops() const {
  double s = 0;
  for (const Task& t : tasks) s += t.flops;
  return s;
}

std::string layer_prefix(int layer) { return layer >= 0 ? "L" + std::to_string(layer) + "." : ""; }

std::vector<Access> normalize(std::vector<Access> a) {
  std::sort(a.begin(), a.end(), [](const Access& x, const Access& y) {
    return x.buffer != y.buffer ? x.buffer < y.buffer : x.begin < y.begin;
  });
  std::vector<Access> out;
  for (const Access& x : a) {
    if (x.end <= x.begin) continue;
    if (!out.empty() && out.back().buffer == x.buffer && x.begin <= out.back().end)
      out.back().end = std::max(out.back().end, x.end);
    else
      out.push_back(x);
  }
  return out;
}

int64_t access_bytes(const TaskGraph& tg, const std::vector<Access>& accesses) {
  int64_t s = 0;
  for (const Access& a : accesses)
    s += (a.end - a.begin) * int64_t(dtype_size(tg.buffers.at(size_t(a.buffer)).dtype));
  return s;
}

}  // namespace mpk::sched
