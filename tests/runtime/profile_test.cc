// profile_report without a device: a megakernel plan of the qwen3-f32 fixture, its tables on
// fake segment bases, and per-task timers synthesized worker by worker with known waits and
// busy times; the JSON report is checked against sums computed here from the same timers.
#include "runtime/profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "ir/builder.h"
#include "model/model.h"
#include "runtime/megakernel.h"

namespace mpk::rt {
namespace {

constexpr int kWorkers = 8;
constexpr int64_t kCapacity = 64;

struct Fixture {
  std::unique_ptr<model::Model> model;
  ir::Graph graph;
  sched::Plan plan;
  MegakernelTables tables;
};

Fixture make(bool fold_merges) {
  Fixture f;
  f.model = model::load(std::string(MPK_TEST_DATA) + "/qwen3-f32");
  f.graph = ir::build(f.model->config);
  sched::PlanOptions o = megakernel_plan_options(f.graph, kWorkers, kCapacity);
  o.fuse.merge_into_attention = fold_merges;
  f.plan = sched::plan(f.graph, o);
  const MemoryPlan mem = plan_memory(f.graph, f.plan.tasks, f.model->dtype, kCapacity);
  const SegmentBases fake{1ull << 40, 2ull << 40, 3ull << 40, 4ull << 40};
  f.tables = build_tables(f.graph, f.plan, mem, fake);
  return f;
}

constexpr size_t kN = MPK_MK_PROFILE_TIMERS;

// Per queue slot: start, ready (start + a wait of 40..80 ns), end (ready + a busy time of
// 300..450 ns); linear tasks also their input (ready + 100), weights (0: not staged) and dot
// products (end - 50); each worker's slots back to back, 3 ns apart, workers starting 17 ns apart.
std::vector<uint64_t> synthesize(const MegakernelTables& t) {
  std::vector<uint64_t> times(t.queue.size() * kN);
  for (int w = 0; w < t.num_workers; ++w) {
    uint64_t now = 1'000'000'000 + uint64_t(w) * 17;
    for (int qi = t.queue_begin[size_t(w)]; qi < t.queue_begin[size_t(w) + 1]; ++qi) {
      const uint64_t wait = 40 + 10 * uint64_t(qi % 5);
      const uint64_t busy = 300 + 25 * uint64_t(t.queue[size_t(qi)] % 7);
      uint64_t* at = &times[kN * size_t(qi)];
      at[MPK_MK_T_START] = now;
      at[MPK_MK_T_READY] = now + wait;
      at[MPK_MK_T_END] = now + wait + busy;
      if (t.tasks[size_t(t.queue[size_t(qi)])].kind == MPK_MK_LINEAR) {
        at[MPK_MK_T_INPUT] = now + wait + 100;
        at[MPK_MK_T_DOTS] = now + wait + busy - 50;
      }
      now += wait + busy + 3;
    }
  }
  return times;
}

// "L12.attn" -> "attn", "lm_head" -> "lm_head".
std::string kind_of(const std::string& stage) {
  static const std::regex layer("^L[0-9]+\\.(.+)$");
  std::smatch m;
  return std::regex_match(stage, m, layer) ? m[1].str() : stage;
}

struct Expected {
  int tasks = 0;
  int64_t bytes = 0;
  uint64_t busy = 0, wait = 0;
  std::map<int, std::pair<uint64_t, uint64_t>> stages;  // first ready, last end
};

// What the report should say per kind, from the plan, the timers and the KV length.
std::map<std::string, Expected> expected(const Fixture& f, const std::vector<uint64_t>& times,
                                         int64_t kv_len) {
  std::map<std::string, Expected> kinds;
  const int64_t kv_row = 2 * int64_t(f.model->config.head_dim) * 4;  // f32 key + value
  for (size_t qi = 0; qi < f.tables.queue.size(); ++qi) {
    const sched::Task& t = f.plan.tasks.tasks[size_t(f.tables.queue[qi])];
    Expected& e = kinds[kind_of(f.plan.tasks.stages[size_t(t.stage)].name)];
    const uint64_t start = times[kN * qi + MPK_MK_T_START], ready = times[kN * qi + MPK_MK_T_READY],
                   end = times[kN * qi + MPK_MK_T_END];
    ++e.tasks;
    e.wait += ready - start;
    e.busy += end - ready;
    if (t.kind == sched::TaskKind::Attention) {
      // The chunk's share of the live KV length, not of the planned seq_len.
      const int64_t c = t.chunk, n = t.num_chunks;
      e.bytes += ((c + 1) * kv_len / n - c * kv_len / n) * kv_row;
    } else {
      e.bytes += t.weight_bytes;
    }
    auto [it, fresh] = e.stages.try_emplace(t.stage, ready, end);
    it->second.first = std::min(it->second.first, ready);
    it->second.second = std::max(it->second.second, end);
  }
  return kinds;
}

void expect_near(double actual, double want, const std::string& what) {
  EXPECT_NEAR(actual, want, 1e-9 * std::max(1.0, std::abs(want))) << what;
}

void check_report(const Fixture& f, int64_t kv_len) {
  SCOPED_TRACE("kv_len " + std::to_string(kv_len));
  const std::vector<uint64_t> times = synthesize(f.tables);
  const nlohmann::json r = nlohmann::json::parse(profile_report(f.plan, f.tables, times, kv_len));
  const size_t n = f.plan.tasks.tasks.size();
  ASSERT_EQ(f.tables.queue.size(), n);

  uint64_t first = UINT64_MAX, last = 0;
  for (size_t qi = 0; qi < n; ++qi) {
    first = std::min(first, times[kN * qi + MPK_MK_T_START]);
    last = std::max(last, times[kN * qi + MPK_MK_T_END]);
  }
  expect_near(r.at("step_us").get<double>(), double(last - first) / 1e3, "step_us");
  EXPECT_EQ(r.at("workers").get<int>(), kWorkers);
  EXPECT_EQ(r.at("tasks").get<size_t>(), n);
  EXPECT_EQ(r.at("kv_len").get<int64_t>(), kv_len);

  const std::map<std::string, Expected> want = expected(f, times, kv_len);
  std::set<std::string> names;
  size_t tasks = 0;
  for (const nlohmann::json& k : r.at("kinds")) {
    const std::string name = k.at("kind").get<std::string>();
    SCOPED_TRACE(name);
    EXPECT_TRUE(names.insert(name).second) << "listed twice";
    ASSERT_TRUE(want.count(name)) << "not a stage name less its layer";
    const Expected& e = want.at(name);
    tasks += k.at("tasks").get<size_t>();
    EXPECT_EQ(k.at("tasks").get<int>(), e.tasks);
    EXPECT_EQ(k.at("stages").get<size_t>(), e.stages.size());
    EXPECT_EQ(k.at("bytes").get<int64_t>(), e.bytes);
    expect_near(k.at("busy_us_mean").get<double>(), double(e.busy) / e.tasks / 1e3, "busy_us_mean");
    expect_near(k.at("wait_us_mean").get<double>(), double(e.wait) / e.tasks / 1e3, "wait_us_mean");
    double span_ns = 0;
    for (const auto& [stage, s] : e.stages) span_ns += double(s.second - s.first);
    ASSERT_GT(span_ns, 0);
    expect_near(k.at("span_us").get<double>(), span_ns / 1e3, "span_us");
    expect_near(k.at("gbps").get<double>(), double(e.bytes) / span_ns, "gbps");
  }
  EXPECT_EQ(tasks, n);
  EXPECT_EQ(names.size(), want.size());

  // The timeline: every task once, on the worker whose queue holds it, its timers from `first`.
  const nlohmann::json& tl = r.at("timeline");
  ASSERT_EQ(tl.size(), n);
  std::set<std::string> seen;
  for (int w = 0; w < kWorkers; ++w)
    for (int qi = f.tables.queue_begin[size_t(w)]; qi < f.tables.queue_begin[size_t(w) + 1]; ++qi) {
      const nlohmann::json& e = tl.at(size_t(qi));
      const std::string& name = f.plan.tasks.tasks[size_t(f.tables.queue[size_t(qi)])].name;
      EXPECT_EQ(e.at(0).get<std::string>(), name);
      EXPECT_TRUE(seen.insert(name).second) << name;
      EXPECT_EQ(e.at(1).get<int>(), w);
      const uint64_t* at = &times[kN * size_t(qi)];
      const int order[] = {MPK_MK_T_START, MPK_MK_T_READY, MPK_MK_T_END, MPK_MK_T_INPUT, MPK_MK_T_WEIGHTS, MPK_MK_T_DOTS};
      ASSERT_EQ(e.size(), 2 + std::size(order)) << name;
      for (size_t j = 0; j < std::size(order); ++j) {
        if (at[order[j]] == 0)
          EXPECT_TRUE(e.at(2 + j).is_null()) << name << " point " << order[j];
        else
          EXPECT_EQ(e.at(2 + j).get<uint64_t>(), at[order[j]] - first) << name << " point " << order[j];
      }
    }

  // Attention streams exactly the live KV rows of every KV head in every layer.
  const model::Config& c = f.model->config;
  EXPECT_EQ(want.at("attn").bytes,
            int64_t(c.num_layers) * c.num_kv_heads * kv_len * 2 * c.head_dim * 4);
}

TEST(Profile, ReportSumsTheTimersPerKind) {
  const Fixture f = make(true);
  const std::vector<uint64_t> times = synthesize(f.tables);
  const nlohmann::json r = nlohmann::json::parse(profile_report(f.plan, f.tables, times, 37));
  std::vector<std::string> kinds;
  for (const nlohmann::json& k : r.at("kinds")) kinds.push_back(k.at("kind").get<std::string>());
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(kinds, (std::vector<std::string>{"argmax", "attn", "attn_out", "gate_up", "lm_head",
                                             "mlp_out", "qkv"}));
  // The attention is split into chunks, so the chunks' shares of the live KV length matter.
  int chunks = 0;
  for (const sched::Task& t : f.plan.tasks.tasks)
    if (t.kind == sched::TaskKind::Attention) {
      EXPECT_GT(t.num_chunks, 1) << t.name;
      EXPECT_TRUE(t.merges) << t.name;
      ++chunks;
    }
  EXPECT_GT(chunks, f.model->config.num_layers * f.model->config.num_kv_heads);
  for (int64_t kv_len : {int64_t(1), int64_t(37), kCapacity}) check_report(f, kv_len);
}

// Merge tasks are a kind of their own; they stream no KV rows.
TEST(Profile, MergeTasksAreAKind) {
  const Fixture f = make(false);
  const nlohmann::json r =
      nlohmann::json::parse(profile_report(f.plan, f.tables, synthesize(f.tables), 37));
  bool merge = false;
  for (const nlohmann::json& k : r.at("kinds"))
    if (k.at("kind") == "attn_merge") {
      merge = true;
      EXPECT_EQ(k.at("tasks").get<int>(), f.model->config.num_layers * f.model->config.num_kv_heads);
      EXPECT_EQ(k.at("bytes").get<int64_t>(), 0);
    }
  EXPECT_TRUE(merge);
  check_report(f, 37);
}

void expect_internal(const Fixture& f, const std::vector<uint64_t>& times, const std::string& what) {
  try {
    profile_report(f.plan, f.tables, times, 37);
    ADD_FAILURE() << what << ": expected Error(Internal)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal) << what << ": " << e.what();
  }
}

TEST(Profile, OutOfOrderTimersAreInternalErrors) {
  const Fixture f = make(true);
  const std::vector<uint64_t> good = synthesize(f.tables);
  const size_t slot = f.tables.queue.size() / 2;
  std::vector<uint64_t> t = good;
  uint64_t* at = &t[kN * slot];
  at[MPK_MK_T_READY] = at[MPK_MK_T_START] - 1;  // ready before start
  expect_internal(f, t, "ready < start");
  t = good;
  at = &t[kN * slot];
  at[MPK_MK_T_END] = at[MPK_MK_T_READY] - 1;  // end before ready
  expect_internal(f, t, "end < ready");
  t = good;
  t.pop_back();
  expect_internal(f, t, "a timer missing");
  // Equal times are in order.
  t = good;
  at = &t[kN * slot];
  at[MPK_MK_T_READY] = at[MPK_MK_T_END] = at[MPK_MK_T_START];
  EXPECT_NO_THROW(profile_report(f.plan, f.tables, t, 37));
}

}  // namespace
}  // namespace mpk::rt
