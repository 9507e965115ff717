#include "scheduler/events.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/error.h"

namespace mpk::sched {
namespace {

struct Write {
  int64_t begin, end;
  int task;
};

// Per task: the buffers all of whose writers are its ancestors, as a bitset.
class BufferSets {
 public:
  BufferSets(size_t tasks, size_t buffers) : words_((buffers + 63) / 64), bits_(tasks * words_) {}
  void set(int task, int buffer) { row(task)[size_t(buffer) / 64] |= uint64_t(1) << (buffer % 64); }
  bool has(int task, int buffer) const {
    return (bits_[size_t(task) * words_ + size_t(buffer) / 64] >> (buffer % 64)) & 1;
  }
  void merge(int into, int from) {
    uint64_t* a = row(into);
    const uint64_t* b = &bits_[size_t(from) * words_];
    for (size_t i = 0; i < words_; ++i) a[i] |= b[i];
  }

 private:
  uint64_t* row(int task) { return &bits_[size_t(task) * words_]; }
  size_t words_;
  std::vector<uint64_t> bits_;
};

void sort_unique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The writers of each carried buffer trigger an event (their own when they have one; a task
// triggers one event) and its readers wait on it for the previous step.
void carried_events(TaskGraph& tg, const std::vector<std::vector<Write>>& writes,
                    std::vector<int>& per_stage) {
  for (size_t b = 0; b < tg.buffers.size(); ++b) {
    if (!tg.buffers[b].carried || writes[b].empty()) continue;
    int fresh = -1;  // shared by the writers that had no event
    std::vector<int> events;
    for (const Write& w : writes[b]) {
      Task& t = tg.tasks[size_t(w.task)];
      if (t.trigger < 0) {
        if (fresh < 0) {
          Event e;
          e.id = fresh = int(tg.events.size());
          e.name = fmt::format("{}#{}", tg.stages[size_t(t.stage)].name, per_stage[size_t(t.stage)]++);
          tg.events.push_back(std::move(e));
        }
        Event& e = tg.events[size_t(fresh)];
        e.triggers.push_back(t.id);
        e.need = int(e.triggers.size());
        t.trigger = fresh;
      }
      events.push_back(t.trigger);
    }
    sort_unique(events);
    for (Task& t : tg.tasks) {
      const bool reads = std::any_of(t.reads.begin(), t.reads.end(),
                                     [&](const Access& a) { return a.buffer == int(b); });
      if (!reads) continue;
      t.waits_prev.insert(t.waits_prev.end(), events.begin(), events.end());
      sort_unique(t.waits_prev);
    }
  }
  for (const Task& t : tg.tasks)
    for (int e : t.waits_prev) tg.events[size_t(e)].prev_waiters.push_back(t.id);
}

}  // namespace

TaskGraph build_events(TaskGraph tg) {
  const size_t n = tg.tasks.size();
  std::vector<std::vector<Write>> writes(tg.buffers.size()), adds(tg.buffers.size());
  for (const Task& t : tg.tasks) {
    for (const Access& a : t.writes) writes[size_t(a.buffer)].push_back({a.begin, a.end, t.id});
    for (const Access& a : t.adds) {
      MPK_ICHECK(!tg.buffers[size_t(a.buffer)].carried)
          << "events: task " << t.name << " adds into carried " << tg.buffers[size_t(a.buffer)].name;
      adds[size_t(a.buffer)].push_back({a.begin, a.end, t.id});
    }
  }
  std::vector<int64_t> written(tg.buffers.size(), 0);
  for (size_t b = 0; b < writes.size(); ++b) {
    auto& w = writes[b];
    std::sort(w.begin(), w.end(), [](const Write& x, const Write& y) { return x.begin < y.begin; });
    for (size_t i = 0; i < w.size(); ++i) {
      MPK_ICHECK(i == 0 || w[i - 1].end <= w[i].begin)
          << "events: tasks " << w[i - 1].task << " and " << w[i].task << " both write "
          << tg.buffers[b].name;
      written[b] += w[i].end - w[i].begin;
    }
  }

  // Direct producers per read, then drop reads whose writers are all ancestors of another
  // producer of the same task.
  BufferSets full(n, tg.buffers.size());
  std::vector<std::vector<int>> producers(n);
  std::vector<std::vector<int>> consumers(n);
  // The tasks that write (or add into) a range of buffer r.buffer overlapping r.
  auto overlapping = [&](const Task& t, const Access& r, const std::vector<Write>& w, bool sorted,
                         std::vector<int>& p) {
    auto it = w.begin();
    if (sorted) {
      it = std::upper_bound(w.begin(), w.end(), r.begin,
                            [](int64_t v, const Write& x) { return v < x.begin; });
      if (it != w.begin()) --it;
    }
    for (; it != w.end() && (!sorted || it->begin < r.end); ++it)
      if (it->end > r.begin && it->begin < r.end) {
        MPK_ICHECK(it->task < t.id) << "events: task " << t.name << " reads "
                                    << tg.buffers[size_t(r.buffer)].name
                                    << " written by a later task " << it->task;
        p.push_back(it->task);
      }
  };
  for (Task& t : tg.tasks) {
    // A read waits for the range's writers and adders; an add for its writers only.
    std::vector<Access> deps = t.reads;
    deps.insert(deps.end(), t.adds.begin(), t.adds.end());
    std::vector<std::vector<int>> per_read;
    for (size_t i = 0; i < deps.size(); ++i) {
      const Access& r = deps[i];
      const bool read = i < t.reads.size();
      std::vector<int> p;
      if (!tg.buffers[size_t(r.buffer)].carried) {
        overlapping(t, r, writes[size_t(r.buffer)], true, p);
        if (read) overlapping(t, r, adds[size_t(r.buffer)], false, p);
      }
      if (read && !tg.buffers[size_t(r.buffer)].carried && r.begin == 0 &&
          r.end >= tg.buffers[size_t(r.buffer)].numel && written[size_t(r.buffer)] > 0)
        full.set(t.id, r.buffer);
      per_read.push_back(std::move(p));
    }
    std::vector<int> all;
    for (const auto& p : per_read) all.insert(all.end(), p.begin(), p.end());
    sort_unique(all);
    std::vector<int>& mine = producers[size_t(t.id)];
    for (size_t i = 0; i < deps.size(); ++i) {
      const int b = deps[i].buffer;
      const bool implied = std::any_of(all.begin(), all.end(), [&](int q) { return full.has(q, b); });
      if (!implied) mine.insert(mine.end(), per_read[i].begin(), per_read[i].end());
    }
    sort_unique(mine);
    for (int q : all) full.merge(t.id, q);
    for (int q : mine) consumers[size_t(q)].push_back(t.id);
  }

  // One event per distinct consumer set.
  tg.events.clear();
  std::map<std::vector<int>, int> by_consumers;
  std::vector<int> per_stage(tg.stages.size(), 0);
  for (Task& t : tg.tasks) {
    t.waits.clear();
    t.waits_prev.clear();
    t.trigger = -1;
    const auto& c = consumers[size_t(t.id)];
    if (c.empty()) continue;
    auto [it, inserted] = by_consumers.try_emplace(c, int(tg.events.size()));
    if (inserted) {
      Event e;
      e.id = it->second;
      e.name = fmt::format("{}#{}", tg.stages[size_t(t.stage)].name, per_stage[size_t(t.stage)]++);
      e.waiters = c;
      tg.events.push_back(std::move(e));
    }
    Event& e = tg.events[size_t(it->second)];
    e.triggers.push_back(t.id);
    e.need = int(e.triggers.size());
    t.trigger = e.id;
  }
  for (Task& t : tg.tasks) {
    for (int q : producers[size_t(t.id)]) t.waits.push_back(tg.tasks[size_t(q)].trigger);
    sort_unique(t.waits);
  }
  carried_events(tg, writes, per_stage);
  return tg;
}

}  // namespace mpk::sched
