// validate: schedules broken on purpose report each kind of violation.
#include "scheduler/validate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "configs.h"
#include "scheduler/events.h"

namespace mpk::sched {
namespace {

class Validate : public ::testing::Test {
 protected:
  void SetUp() override {
    tg = testing::build_tasks(ir::build(testing::tiny_qwen3()), {.seq_len = 200, .kv_chunk = 64});
    s = schedule(tg, testing::with_workers(3));
    ASSERT_TRUE(validate(tg, s).empty()) << to_text(validate(tg, s));
  }
  static bool has(const std::vector<Violation>& v, ViolationKind k) {
    return std::any_of(v.begin(), v.end(), [&](const Violation& x) { return x.kind == k; });
  }
  // The worker and queue position of a task.
  std::pair<int, size_t> where(int task) const {
    const int w = s.worker[size_t(task)];
    const auto& q = s.queues[size_t(w)];
    return {w, size_t(std::find(q.begin(), q.end(), task) - q.begin())};
  }
  TaskGraph tg;
  Schedule s;
};

TEST_F(Validate, WorkerCount) {
  s.num_workers = 4;
  EXPECT_TRUE(has(validate(tg, s), ViolationKind::WorkerCount));
}

TEST_F(Validate, UnknownTask) {
  s.queues[0].push_back(int(tg.tasks.size()) + 7);
  const auto v = validate(tg, s);
  EXPECT_TRUE(has(v, ViolationKind::UnknownTask));
  EXPECT_FALSE(has(v, ViolationKind::Deadlock));
}

TEST_F(Validate, MissingTask) {
  // Drop the first LM-head tile: the argmax task waits forever for it.
  const int tile = tg.tasks.back().id - 1;
  auto [w, i] = where(tile);
  s.queues[size_t(w)].erase(s.queues[size_t(w)].begin() + long(i));
  const auto v = validate(tg, s);
  EXPECT_TRUE(has(v, ViolationKind::MissingTask));
  EXPECT_TRUE(has(v, ViolationKind::Deadlock));
  EXPECT_EQ(v[0].task, tile);
}

TEST_F(Validate, DuplicateTask) {
  s.queues[2].push_back(s.queues[0].front());
  EXPECT_TRUE(has(validate(tg, s), ViolationKind::DuplicateTask));
}

TEST_F(Validate, UnknownEvent) {
  tg.tasks[3].waits.push_back(int(tg.events.size()));
  tg.tasks[4].trigger = int(tg.events.size()) + 1;
  const auto v = validate(tg, s);
  EXPECT_EQ(std::count_if(v.begin(), v.end(), [](const Violation& x) { return x.kind == ViolationKind::UnknownEvent; }), 2);
}

TEST_F(Validate, NeedMismatch) {
  tg.events[1].need += 1;
  auto v = validate(tg, s);
  ASSERT_TRUE(has(v, ViolationKind::NeedMismatch));
  EXPECT_TRUE(has(v, ViolationKind::Deadlock));  // the counter never gets there
  tg.events[1].need -= 2;
  v = validate(tg, s);
  EXPECT_TRUE(has(v, ViolationKind::NeedMismatch));
}

TEST_F(Validate, WaitCycle) {
  // The first task waits on the event the LM-head tiles trigger, which it feeds.
  const int head_event = tg.tasks.back().waits[0];
  tg.tasks[0].waits.push_back(head_event);
  const auto v = validate(tg, s);
  ASSERT_TRUE(has(v, ViolationKind::WaitCycle));
  EXPECT_TRUE(has(v, ViolationKind::OrderNotTopological));
  EXPECT_TRUE(has(v, ViolationKind::Deadlock));
  for (const Violation& x : v)
    if (x.kind == ViolationKind::WaitCycle) {
      EXPECT_NE(x.task, tg.tasks.back().id);  // not on the cycle
    }
}

TEST_F(Validate, OrderNotTopological) {
  // Swap the final task with the first in the global order only.
  std::swap(s.order.front(), s.order.back());
  const auto v = validate(tg, s);
  EXPECT_TRUE(has(v, ViolationKind::OrderNotTopological));
  EXPECT_FALSE(has(v, ViolationKind::Deadlock));
  s.order.pop_back();
  EXPECT_TRUE(has(validate(tg, s), ViolationKind::OrderNotTopological));
}

TEST_F(Validate, QueueNotInOrder) {
  // Two independent tasks (tiles of one stage) on one worker, swapped: no deadlock, but the
  // queue no longer follows the global order.
  Schedule one = schedule(tg, testing::with_workers(1));
  auto& q = one.queues[0];
  std::swap(q[0], q[1]);
  const auto v = validate(tg, one);
  EXPECT_TRUE(has(v, ViolationKind::QueueNotInOrder));
  EXPECT_FALSE(has(v, ViolationKind::Deadlock));
}

TEST_F(Validate, Deadlock) {
  // One worker runs the last task first: it blocks before anything else runs.
  Schedule one = schedule(tg, testing::with_workers(1));
  auto& q = one.queues[0];
  std::rotate(q.begin(), q.end() - 1, q.end());
  const auto v = validate(tg, one);
  ASSERT_TRUE(has(v, ViolationKind::Deadlock));
  EXPECT_TRUE(has(v, ViolationKind::QueueNotInOrder));
  for (const Violation& x : v)
    if (x.kind == ViolationKind::Deadlock) {
      EXPECT_EQ(x.task, tg.tasks.back().id);
    }
  // Two workers each waiting on a task queued behind the other's wait.
  Schedule two = s;
  two.num_workers = 2;
  two.queues = {{}, {}};
  const int producer = tg.tasks.back().waits.empty() ? 0 : tg.events[size_t(tg.tasks.back().waits[0])].triggers[0];
  for (int id : s.order)
    if (id != producer && id != tg.tasks.back().id) two.queues[0].push_back(id);
  two.queues[1] = {tg.tasks.back().id, producer};
  EXPECT_TRUE(has(validate(tg, two), ViolationKind::Deadlock));
}

TEST_F(Validate, UnknownPrevEvent) {
  tg.tasks[5].waits_prev.push_back(int(tg.events.size()));
  tg.tasks[6].waits_prev.push_back(-1);
  const auto v = validate(tg, s);
  ASSERT_EQ(std::count_if(v.begin(), v.end(), [](const Violation& x) { return x.kind == ViolationKind::UnknownEvent; }), 2);
  EXPECT_EQ(v[0].task, 5);
  EXPECT_EQ(v[0].event, int(tg.events.size()));
}

// Without its waits for the previous step nothing in a step is held back by the last one.
TEST_F(Validate, CrossStepHazardWithoutPrevWaits) {
  int cleared = 0;
  for (Task& t : tg.tasks) {
    cleared += !t.waits_prev.empty();
    t.waits_prev.clear();
  }
  ASSERT_GT(cleared, 0);
  for (Event& e : tg.events) e.prev_waiters.clear();
  const auto v = validate(tg, s);
  ASSERT_EQ(v.size(), tg.tasks.size()) << to_text(v);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(v[i].kind, ViolationKind::CrossStepHazard);
    EXPECT_EQ(v[i].task, int(i));  // one per task
    EXPECT_EQ(v[i].event, tg.tasks.back().trigger);
  }
}

TEST(ValidatePlans, RealShapesHaveNoViolations) {
  std::vector<model::Config> configs = testing::tiny_configs();
  configs.push_back(testing::qwen3_0_6b());
  for (const model::Config& c : configs)
    for (int64_t chunk : {0, 64}) {
      SCOPED_TRACE(::testing::Message() << c.architecture << " chunk=" << chunk);
      const TaskGraph tg = testing::build_tasks(ir::build(c), {.seq_len = 200, .kv_chunk = chunk});
      int gated = 0;
      for (const Task& t : tg.tasks) gated += !t.waits_prev.empty();
      EXPECT_GT(gated, 0);  // the cross-step check has something to check
      for (int workers : {1, 5, 132}) {
        const auto v = validate(tg, schedule(tg, testing::with_workers(workers)));
        EXPECT_TRUE(v.empty()) << to_text(v);
      }
    }
}

// Hand-built: `carried` -> x -> y -> `carried` (the writer w), plus what each test adds.
class CrossStep : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"carried", "x", "y", "side", "free"})
      tg.buffers.push_back({name, DType::F32, 8, -1, false});
    tg.buffers[0].carried = true;
    tg.stages.push_back({"s", TaskKind::Vector, -1, 8, 0, {}});
    add("read", {{0, 0, 8}}, {{1, 0, 8}});
    add("mid", {{1, 0, 8}}, {{2, 0, 8}});
  }
  void add(const char* name, std::vector<Access> reads, std::vector<Access> writes) {
    Task t;
    t.id = int(tg.tasks.size()), t.stage = 0, t.tile = t.id, t.name = name;
    t.reads = std::move(reads), t.writes = std::move(writes);
    tg.stages[0].tasks.push_back(t.id);
    tg.tasks.push_back(std::move(t));
  }
  std::vector<Violation> run() {
    tg = build_events(std::move(tg));
    const auto v = validate(tg, schedule(tg, testing::with_workers(2)));
    for (const Violation& x : v) EXPECT_EQ(x.kind, ViolationKind::CrossStepHazard) << x.message;
    return v;
  }
  TaskGraph tg;
};

TEST_F(CrossStep, ChainIsValid) {
  add("writer", {{2, 0, 8}}, {{0, 0, 8}});
  EXPECT_TRUE(run().empty());
  EXPECT_EQ(tg.tasks[0].waits_prev, std::vector<int>{tg.tasks[2].trigger});
}

// (a) A task outside the writer's ancestors may still read x when the next step overwrites it.
TEST_F(CrossStep, TaskAfterTheWriter) {
  add("writer", {{2, 0, 8}}, {{0, 0, 8}});
  add("late", {{1, 0, 8}}, {{3, 0, 8}});
  const auto v = run();
  ASSERT_EQ(v.size(), 1u) << to_text(v);
  EXPECT_EQ(v[0].task, 3);
  EXPECT_EQ(v[0].event, tg.tasks[2].trigger);
  EXPECT_NE(v[0].message.find("no ancestor"), std::string::npos) << v[0].message;
  EXPECT_NE(to_text(v).find("cross_step_hazard: task late"), std::string::npos);
}

// (b) A task that reads no activation is not held back by the previous step's writer.
TEST_F(CrossStep, UngatedTask) {
  add("free", {}, {{4, 0, 8}});
  add("writer", {{2, 0, 8}, {4, 0, 8}}, {{0, 0, 8}});
  const auto v = run();
  ASSERT_EQ(v.size(), 1u) << to_text(v);
  EXPECT_EQ(v[0].task, 2);
  EXPECT_NE(v[0].message.find("waits_prev"), std::string::npos) << v[0].message;
}

// A task breaking both conditions is reported once; a writer with no event is reported.
TEST_F(CrossStep, OneViolationPerTask) {
  add("writer", {{2, 0, 8}}, {{0, 0, 8}});
  add("stray", {}, {{3, 0, 8}});
  auto v = run();
  ASSERT_EQ(v.size(), 1u) << to_text(v);
  EXPECT_EQ(v[0].task, 3);
  tg.tasks[2].trigger = -1;
  v = validate(tg, schedule(tg, testing::with_workers(1)));
  EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](const Violation& x) {
    return x.kind == ViolationKind::CrossStepHazard && x.task == 2;
  })) << to_text(v);
}

TEST_F(Validate, Names) {
  EXPECT_STREQ(violation_kind_name(ViolationKind::Deadlock), "deadlock");
  EXPECT_STREQ(violation_kind_name(ViolationKind::CrossStepHazard), "cross_step_hazard");
  s.num_workers = 9;
  EXPECT_NE(to_text(validate(tg, s)).find("worker_count: 3 queues for 9 workers"), std::string::npos);
}

}  // namespace
}  // namespace mpk::sched
