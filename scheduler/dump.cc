#include "scheduler/dump.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace mpk::sched {
namespace {

using Json = nlohmann::json;

Json accesses(const std::vector<Access>& a) {
  Json j = Json::array();
  for (const Access& x : a) j.push_back({x.buffer, x.begin, x.end});
  return j;
}

Json task_json(const Task& t) {
  Json ops = Json::array();
  for (const FusedOp& f : t.ops) ops.push_back({{"op", f.op}, {"kind", ir::op_name(f.kind)}});
  Json j = {{"id", t.id},          {"name", t.name},
            {"kind", task_kind_name(t.kind)},
            {"stage", t.stage},    {"tile", t.tile},
            {"layer", t.layer},    {"ops", ops},
            {"weight_bytes", t.weight_bytes}, {"kv_bytes", t.kv_bytes},
            {"act_bytes", t.act_bytes},       {"flops", t.flops},
            {"reads", accesses(t.reads)},     {"writes", accesses(t.writes)},
            {"adds", accesses(t.adds)},
            {"waits", t.waits},    {"waits_prev", t.waits_prev},
            {"trigger", t.trigger}};
  if (t.kind == TaskKind::Linear) {
    Json w = Json::array();
    for (const WeightSlice& s : t.weights)
      w.push_back({{"weight", s.weight}, {"bias", s.bias}, {"row_begin", s.row_begin},
                   {"row_end", s.row_end}, {"out", s.out}, {"out_begin", s.out_begin},
                   {"copy", s.copy}});
    j["rows"] = {t.row_begin, t.row_end};
    j["k"] = t.k;
    j["weights"] = w;
    for (const WeightColumns& c : t.columns)
      j["columns"].push_back({{"weight", c.weight}, {"rows", c.rows}, {"cols", c.cols},
                              {"col_begin", c.col_begin}, {"col_end", c.col_end}, {"out", c.out}});
  } else if (t.kind != TaskKind::Vector) {
    j["kv_head"] = t.kv_head;
    j["q_heads"] = {t.q_head_begin, t.q_head_end};
    j["kv"] = {t.kv_begin, t.kv_end};
    j["chunk"] = t.chunk;
    j["num_chunks"] = t.num_chunks;
    if (t.merges) j["merges"] = true;
  }
  return j;
}

std::string label(const Task& t) {
  std::string ops;
  for (const FusedOp& f : t.ops) {
    if (!ops.empty()) ops += '+';
    ops += ir::op_name(f.kind);
  }
  return fmt::format("{}\\n{}", t.name, ops);
}

void event_nodes(const TaskGraph& tg, std::string& s) {
  for (const Event& e : tg.events) {
    s += fmt::format("  e{} [shape=circle, width=0.15, label=\"\", tooltip=\"{} need={}\"];\n", e.id,
                     e.name, e.need);
    for (int t : e.triggers) s += fmt::format("  t{} -> e{};\n", t, e.id);
    for (int t : e.waiters) s += fmt::format("  e{} -> t{};\n", e.id, t);
    // Waits for the previous step: against the flow of the step, so they do not rank nodes.
    for (int t : e.prev_waiters)
      s += fmt::format("  e{} -> t{} [style=dashed, color=red, constraint=false];\n", e.id, t);
  }
}

}  // namespace

std::string to_json(const TaskGraph& tg) {
  Json buffers = Json::array(), stages = Json::array(), tasks = Json::array(),
       events = Json::array();
  for (size_t i = 0; i < tg.buffers.size(); ++i) {
    const Buffer& b = tg.buffers[i];
    buffers.push_back({{"id", i}, {"name", b.name}, {"dtype", dtype_name(b.dtype)},
                       {"numel", b.numel}, {"graph_tensor", b.graph_tensor}, {"carried", b.carried}});
  }
  for (size_t i = 0; i < tg.stages.size(); ++i) {
    const Stage& s = tg.stages[i];
    stages.push_back({{"id", i}, {"name", s.name}, {"kind", task_kind_name(s.kind)},
                      {"layer", s.layer}, {"rows", s.rows}, {"k", s.k}, {"tasks", s.tasks}});
  }
  for (const Task& t : tg.tasks) tasks.push_back(task_json(t));
  for (const Event& e : tg.events)
    events.push_back({{"id", e.id}, {"name", e.name}, {"need", e.need},
                      {"triggers", e.triggers}, {"waiters", e.waiters},
                      {"prev_waiters", e.prev_waiters}});
  Json j = {{"seq_len", tg.seq_len},
            {"weight_dtype", dtype_name(tg.weight_dtype)},
            {"weight_bytes", tg.total_weight_bytes()},
            {"kv_bytes", tg.total_kv_bytes()},
            {"buffers", buffers},
            {"stages", stages},
            {"tasks", tasks},
            {"events", events}};
  return j.dump(1);
}

std::string to_json(const Schedule& s, const SimResult* sim) {
  Json j = {{"num_workers", s.num_workers}, {"predicted_s", s.predicted_s},
            {"order", s.order}, {"queues", s.queues}};
  if (sim) {
    Json tasks = Json::array();
    for (const TaskTiming& t : sim->tasks)
      tasks.push_back({{"worker", t.worker}, {"start", t.start}, {"ready", t.ready},
                       {"compute_start", t.compute_start}, {"end", t.end}});
    j["simulation"] = {{"deadlock", sim->deadlock},      {"latency_s", sim->latency_s},
                       {"bytes_bound_s", sim->bytes_bound_s}, {"critical_path", sim->critical_path},
                       {"busy_fraction", sim->busy_fraction}, {"tasks", tasks}};
  }
  return j.dump(1);
}

std::string to_dot(const TaskGraph& tg) {
  std::string s = "digraph tasks {\n  rankdir=TB;\n  node [shape=box, fontsize=9];\n";
  for (size_t i = 0; i < tg.stages.size(); ++i) {
    s += fmt::format("  subgraph cluster_s{} {{\n    label=\"{}\";\n", i, tg.stages[i].name);
    for (int t : tg.stages[i].tasks)
      s += fmt::format("    t{} [label=\"{}\"];\n", t, label(tg.tasks[size_t(t)]));
    s += "  }\n";
  }
  event_nodes(tg, s);
  return s + "}\n";
}

std::string to_dot(const TaskGraph& tg, const Schedule& sch) {
  std::string s = "digraph schedule {\n  rankdir=TB;\n  node [shape=box, fontsize=9];\n";
  for (size_t w = 0; w < sch.queues.size(); ++w) {
    s += fmt::format("  subgraph cluster_w{} {{\n    label=\"worker {}\";\n", w, w);
    const auto& q = sch.queues[w];
    for (int t : q)
      if (t >= 0 && t < int(tg.tasks.size()))
        s += fmt::format("    t{} [label=\"{}\"];\n", t, label(tg.tasks[size_t(t)]));
    for (size_t i = 1; i < q.size(); ++i)
      s += fmt::format("    t{} -> t{} [style=dashed];\n", q[i - 1], q[i]);
    s += "  }\n";
  }
  event_nodes(tg, s);
  return s + "}\n";
}

}  // namespace mpk::sched
