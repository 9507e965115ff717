#include "runtime/profile.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace mpk::rt {
namespace {

// The stage name less its layer: "L3.gate_up" -> "gate_up"; "lm_head" stays.
std::string kind_of(const sched::Stage& stage) {
  if (stage.layer < 0) return stage.name;
  const std::string prefix = sched::layer_prefix(stage.layer);
  MPK_ICHECK(stage.name.rfind(prefix, 0) == 0) << "stage " << stage.name << " of layer " << stage.layer;
  return stage.name.substr(prefix.size());
}

// Bytes a task streams in the step: its weights, and for attention the live KV rows it reads.
int64_t task_bytes(const sched::Task& t, const MkTask& d, int64_t kv_len) {
  if (d.kind != MPK_MK_ATTENTION) return t.weight_bytes;
  const auto [j0, j1] = sched::even_split(kv_len, d.num_chunks, d.chunk);
  return (j1 - j0) * 2 * d.head_dim * 4;  // keys and values, fp32
}

struct Span {
  uint64_t first_ready = UINT64_MAX, last_end = 0;
};

struct Kind {
  int tasks = 0;
  int64_t bytes = 0;
  double busy_ns = 0, wait_ns = 0;
  std::map<int, Span> stages;
};

}  // namespace

std::string profile_report(const sched::Plan& plan, const MegakernelTables& tables,
                           const std::vector<uint64_t>& times, int64_t kv_len) {
  constexpr size_t kN = MPK_MK_PROFILE_TIMERS;
  MPK_ICHECK(times.size() == tables.queue.size() * kN) << "profile: " << times.size() << " timers";
  const auto& tasks = plan.tasks.tasks;
  std::map<std::string, Kind> kinds;
  std::vector<std::string> order;
  uint64_t first = UINT64_MAX, last = 0;
  for (size_t qi = 0; qi < tables.queue.size(); ++qi) {
    const int id = tables.queue[qi];
    const sched::Task& t = tasks[size_t(id)];
    const uint64_t start = times[kN * qi + MPK_MK_T_START], ready = times[kN * qi + MPK_MK_T_READY],
                   end = times[kN * qi + MPK_MK_T_END];
    MPK_ICHECK(start <= ready && ready <= end) << "profile: timers of task " << t.name << " out of order";
    first = std::min(first, start);
    last = std::max(last, end);
    const std::string k = kind_of(plan.tasks.stages[size_t(t.stage)]);
    if (!kinds.count(k)) order.push_back(k);
    Kind& kd = kinds[k];
    ++kd.tasks;
    kd.bytes += task_bytes(t, tables.tasks[size_t(id)], kv_len);
    kd.busy_ns += double(end - ready);
    kd.wait_ns += double(ready - start);
    Span& s = kd.stages[t.stage];
    s.first_ready = std::min(s.first_ready, ready);
    s.last_end = std::max(s.last_end, end);
  }
  nlohmann::json out;
  out["timer"] = "globaltimer (ns, one clock for all SMs) per task: start, events ready, end; "
                 "a linear's input staged, weights landed, dot products done";
  out["step_us"] = tables.queue.empty() ? 0.0 : double(last - first) / 1e3;
  out["workers"] = tables.num_workers;
  out["tasks"] = tables.queue.size();
  out["kv_len"] = kv_len;
  nlohmann::json list = nlohmann::json::array();
  for (const std::string& k : order) {
    const Kind& kd = kinds[k];
    double span_ns = 0;
    for (const auto& [stage, s] : kd.stages) span_ns += double(s.last_end - s.first_ready);
    list.push_back({{"kind", k},
                    {"tasks", kd.tasks},
                    {"stages", kd.stages.size()},
                    {"bytes", kd.bytes},
                    {"span_us", span_ns / 1e3},
                    {"busy_us_mean", kd.busy_ns / kd.tasks / 1e3},
                    {"wait_us_mean", kd.wait_ns / kd.tasks / 1e3},
                    {"gbps", span_ns > 0 ? double(kd.bytes) / span_ns : 0.0}});
  }
  out["kinds"] = std::move(list);
  // Every task's timers (ns from the step's first start), for critical-path analysis.
  nlohmann::json timeline = nlohmann::json::array();
  // Segment by segment (MegakernelTables): entry w is worker w % (num_workers + 1).
  for (int w = 0; w + 1 < int(tables.queue_begin.size()); ++w)
    for (int qi = tables.queue_begin[size_t(w)]; qi < tables.queue_begin[size_t(w) + 1]; ++qi) {
      const uint64_t* at = &times[kN * size_t(qi)];
      nlohmann::json e = {tasks[size_t(tables.queue[size_t(qi)])].name, w % (tables.num_workers + 1), at[MPK_MK_T_START] - first,
                          at[MPK_MK_T_READY] - first, at[MPK_MK_T_END] - first};
      for (int k : {MPK_MK_T_INPUT, MPK_MK_T_WEIGHTS, MPK_MK_T_DOTS})
        e.push_back(at[k] ? nlohmann::json(at[k] - first) : nlohmann::json(nullptr));
      timeline.push_back(std::move(e));
    }
  out["timeline"] = std::move(timeline);
  return out.dump();
}

}  // namespace mpk::rt
