// Dumps: JSON parses and holds every task and event; DOT names every task and event; plan()
// writes its stage dumps where MPK_DUMP_DIR (here: the option) says.
#include "scheduler/dump.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <unistd.h>

#include "configs.h"
#include "scheduler/plan.h"

namespace mpk::sched {
namespace {

using Json = nlohmann::json;

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Dump, TaskGraphJson) {
  const ir::Graph g = ir::build(testing::tiny_qwen2());
  const TaskGraph tg = testing::build_tasks(g, {.seq_len = 100, .kv_chunk = 40});
  const Json j = Json::parse(to_json(tg));
  ASSERT_EQ(j["tasks"].size(), tg.tasks.size());
  ASSERT_EQ(j["events"].size(), tg.events.size());
  EXPECT_EQ(j["weight_bytes"].get<int64_t>(), tg.total_weight_bytes());
  int merging = 0;
  for (const Task& t : tg.tasks) {
    const Json& jt = j["tasks"][size_t(t.id)];
    EXPECT_EQ(jt["name"], t.name);
    EXPECT_EQ(jt["trigger"], t.trigger);
    EXPECT_EQ(jt["waits"].get<std::vector<int>>(), t.waits);
    EXPECT_EQ(jt["waits_prev"].get<std::vector<int>>(), t.waits_prev);
    EXPECT_EQ(jt["ops"].size(), t.ops.size());
    if (t.kind == TaskKind::Linear) {
      EXPECT_EQ(jt["weights"].size(), t.weights.size());
    }
    EXPECT_EQ(jt.value("merges", false), t.merges) << t.name;
    merging += t.merges;
  }
  EXPECT_GT(merging, 0);  // the KV chunks, with the merge folded in
  EXPECT_EQ(j["tasks"][0]["ops"][0]["kind"], "rms_norm");
  EXPECT_EQ(j["events"][0]["need"], tg.events[0].need);
  int prev_edges = 0;
  for (const Event& e : tg.events) {
    EXPECT_EQ(j["events"][size_t(e.id)]["prev_waiters"].get<std::vector<int>>(), e.prev_waiters);
    prev_edges += int(e.prev_waiters.size());
  }
  EXPECT_GT(prev_edges, 0);  // the carried embedding's readers
}

// Same-step waits are solid, waits for the previous step dashed and red.
TEST(Dump, PrevWaitsAreDashedInDot) {
  const TaskGraph tg = testing::build_tasks(ir::build(testing::tiny_qwen3()), {.seq_len = 64});
  const std::string dot = to_dot(tg);
  int prev = 0;
  for (const Task& t : tg.tasks) {
    for (int e : t.waits_prev) {
      ++prev;
      EXPECT_NE(dot.find(fmt::format("e{} -> t{} [style=dashed, color=red", e, t.id)), std::string::npos);
    }
    for (int e : t.waits) EXPECT_NE(dot.find(fmt::format("e{} -> t{};", e, t.id)), std::string::npos);
  }
  EXPECT_GT(prev, 0);
  int dashed = 0;
  for (size_t at = 0; (at = dot.find("style=dashed, color=red", at)) != std::string::npos; ++at) ++dashed;
  EXPECT_EQ(dashed, prev);
}

TEST(Dump, ScheduleJsonAndDot) {
  const TaskGraph tg = testing::build_tasks(ir::build(testing::tiny_qwen3()), {.seq_len = 64});
  const Schedule s = schedule(tg, testing::with_workers(4));
  const SimResult sim = simulate(tg, s, CostModel{});
  const Json j = Json::parse(to_json(s, &sim));
  EXPECT_EQ(j["num_workers"], 4);
  EXPECT_EQ(j["queues"].size(), 4u);
  EXPECT_EQ(j["order"].size(), tg.tasks.size());
  EXPECT_EQ(j["simulation"]["tasks"].size(), tg.tasks.size());
  EXPECT_DOUBLE_EQ(j["simulation"]["latency_s"].get<double>(), sim.latency_s);
  for (const std::string& dot : {to_dot(tg), to_dot(tg, s)}) {
    EXPECT_EQ(dot.rfind("digraph", 0), 0u);
    EXPECT_EQ(dot.back(), '\n');
    for (const Task& t : tg.tasks) EXPECT_NE(dot.find(fmt::format("t{} [label=\"{}", t.id, t.name)), std::string::npos);
    for (const Event& e : tg.events) EXPECT_NE(dot.find(fmt::format("e{} [shape=circle", e.id)), std::string::npos);
    EXPECT_EQ(std::count(dot.begin(), dot.end(), '{'), std::count(dot.begin(), dot.end(), '}'));
  }
  EXPECT_NE(to_dot(tg, s).find("cluster_w3"), std::string::npos);
}

TEST(Dump, PlanWritesEachStage) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mpk_sched_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  PlanOptions o;
  o.decompose.seq_len = 64;
  o.schedule.num_workers = 5;
  o.dump = "tasks,schedule";
  o.dump_dir = dir.string();
  const Plan p = plan(ir::build(testing::tiny_llama()), o);
  for (const char* stage : {"1.decompose", "2.fuse", "3.events", "4.schedule"}) {
    const std::string base = (dir / (std::string("sched.") + stage)).string();
    ASSERT_TRUE(std::filesystem::exists(base + ".json")) << base;
    EXPECT_NO_THROW(Json::parse(read(base + ".json"))) << base;
    EXPECT_EQ(read(base + ".dot").rfind("digraph", 0), 0u);
  }
  const Json fused = Json::parse(read(dir / "sched.3.events.json"));
  EXPECT_EQ(fused["tasks"].size(), p.tasks.tasks.size());
  const Json sched = Json::parse(read(dir / "sched.4.schedule.json"));
  EXPECT_EQ(sched["queues"].size(), 5u);
  // Only what MPK_DUMP lists.
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  o.dump = "schedule";
  plan(ir::build(testing::tiny_llama()), o);
  EXPECT_FALSE(std::filesystem::exists(dir / "sched.1.decompose.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "sched.4.schedule.json"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mpk::sched
