// share_buffers: buffers share memory only when the events order every access of one before
// every access of the other, checked against a transitive closure computed independently
// (testing::Ancestors); host-visible, carried and never-written buffers keep their own; sharing
// saves memory.
#include "scheduler/liveness.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

#include "base/error.h"
#include "configs.h"

namespace mpk::sched {
namespace {

std::vector<std::vector<int>> accessors(const TaskGraph& tg) {
  std::vector<std::set<int>> s(tg.buffers.size());
  for (const Task& t : tg.tasks)
    for (const auto* list : {&t.reads, &t.writes})
      for (const Access& a : *list) s[size_t(a.buffer)].insert(t.id);
  std::vector<std::vector<int>> out;
  for (const auto& x : s) out.emplace_back(x.begin(), x.end());
  return out;
}

std::vector<bool> none(const TaskGraph& tg) { return std::vector<bool>(tg.buffers.size()); }

// Every access of `first` finishes before any access of `second` starts, in every step.
bool ordered(const testing::Ancestors& anc, const std::vector<int>& first, const std::vector<int>& second) {
  if (first.empty() || second.empty()) return false;
  for (int a : first)
    for (int b : second)
      if (!anc(b, a)) return false;
  return true;
}

std::vector<TaskGraph> graphs() {
  std::vector<TaskGraph> out;
  for (const model::Config& c : testing::tiny_configs()) {
    out.push_back(testing::build_tasks(ir::build(c), {.seq_len = 64}));
    out.push_back(testing::build_tasks(ir::build(c), {.seq_len = 64, .kv_splits = 4}));
  }
  model::Config c = testing::qwen3_0_6b();
  c.num_layers = 4;
  out.push_back(testing::build_tasks(ir::build(c), {.seq_len = 512, .kv_splits = 16}));
  return out;
}

TEST(Liveness, SharedBuffersAreOrderedByTheEvents) {
  for (const TaskGraph& tg : graphs()) {
    const testing::Ancestors anc(tg);
    const auto acc = accessors(tg);
    const std::vector<int> slot = share_buffers(tg, none(tg));
    ASSERT_EQ(slot.size(), tg.buffers.size());
    std::map<int, std::vector<int>> members;
    for (size_t b = 0; b < slot.size(); ++b) members[slot[b]].push_back(int(b));
    int shared = 0;
    for (const auto& [s, bs] : members) {
      shared += bs.size() > 1;
      for (size_t i = 0; i < bs.size(); ++i)
        for (size_t j = i + 1; j < bs.size(); ++j) {
          const auto &x = acc[size_t(bs[i])], &y = acc[size_t(bs[j])];
          EXPECT_TRUE(ordered(anc, x, y) || ordered(anc, y, x))
              << tg.buffers[size_t(bs[i])].name << " and " << tg.buffers[size_t(bs[j])].name
              << " share slot " << s << " but their accesses may overlap in time";
        }
    }
    EXPECT_GT(shared, 0) << "nothing shared in a graph of " << tg.buffers.size() << " buffers";
  }
}

TEST(Liveness, TaskOrderMatchesTheClosure) {
  for (const TaskGraph& tg : graphs()) {
    if (tg.tasks.size() > 3000) continue;
    const testing::Ancestors anc(tg);
    const HappensBefore hb(tg);
    for (size_t a = 0; a < tg.tasks.size(); ++a)
      for (size_t b = 0; b < tg.tasks.size(); ++b)
        ASSERT_EQ(hb.task_before(int(a), int(b)), anc(int(b), int(a))) << a << " -> " << b;
  }
}

TEST(Liveness, PinnedAndUnusedBuffersKeepTheirOwnMemory) {
  for (const TaskGraph& tg : graphs()) {
    std::vector<bool> host = none(tg);
    host.back() = true;  // one host-visible buffer, whatever it is
    const auto acc = accessors(tg);
    std::vector<bool> written(tg.buffers.size());
    for (const Task& t : tg.tasks)
      for (const Access& a : t.writes) written[size_t(a.buffer)] = true;
    const std::vector<int> slot = share_buffers(tg, host);
    std::map<int, int> count;
    for (int s : slot) ++count[s];
    int carried = 0;
    for (size_t b = 0; b < slot.size(); ++b) {
      carried += tg.buffers[b].carried;
      if (host[b] || tg.buffers[b].carried || !written[b] || acc[b].empty()) {
        EXPECT_EQ(count[slot[b]], 1) << tg.buffers[b].name;
      }
    }
    EXPECT_GT(carried, 0) << "no carried buffer to check";
  }
}

TEST(Liveness, SharingSavesMostActivationMemory) {
  const TaskGraph tg =
      testing::build_tasks(ir::build(testing::qwen3_0_6b()), {.seq_len = 512, .kv_splits = 16});
  const std::vector<int> slot = share_buffers(tg, none(tg));
  std::map<int, int64_t> bytes;
  int64_t unshared = 0, shared = 0;
  for (size_t b = 0; b < slot.size(); ++b) {
    unshared += tg.buffers[b].numel * 4;
    bytes[slot[b]] = std::max(bytes[slot[b]], tg.buffers[b].numel * 4);
  }
  for (const auto& [s, n] : bytes) shared += n;
  EXPECT_LT(shared * 3, unshared) << shared << " of " << unshared << " bytes";
  std::printf("qwen3-0.6b activations: %lld bytes shared, %lld unshared\n", (long long)shared,
              (long long)unshared);
}

// The cross-step premise is checked: a task that no longer waits for anything may run while
// the previous step is still reading its slot-mates.
TEST(Liveness, RefusesAGraphWhoseStepsMayOverlap) {
  const std::vector<TaskGraph> gs = graphs();
  TaskGraph tg = gs.front();
  int victim = -1;
  for (const Task& t : tg.tasks)
    if (!t.waits.empty() && t.waits_prev.empty()) victim = t.id;
  ASSERT_GE(victim, 0);
  for (int e : tg.tasks[size_t(victim)].waits)  // the cut, in both views of the graph
    std::erase(tg.events[size_t(e)].waiters, victim);
  tg.tasks[size_t(victim)].waits.clear();
  try {
    (void)share_buffers(tg, none(tg));
    ADD_FAILURE() << "accepted";
  } catch (const mpk::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal) << e.what();
    const std::string what = e.what();  // whichever side of the steps the cut breaks first
    EXPECT_TRUE(what.find("when the next step starts") != std::string::npos ||
                what.find("before the previous step ends") != std::string::npos)
        << what;
  }
}

TEST(Liveness, RefusesAMismatchedPinList) {
  const std::vector<TaskGraph> gs = graphs();
  const TaskGraph& tg = gs.front();
  EXPECT_THROW((void)share_buffers(tg, std::vector<bool>(tg.buffers.size() + 1)), mpk::Error);
}

}  // namespace
}  // namespace mpk::sched
