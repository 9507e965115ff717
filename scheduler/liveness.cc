#include "scheduler/liveness.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace mpk::sched {
namespace {

bool has(const std::vector<uint64_t>& bits, int i) {
  return !bits.empty() && ((bits[size_t(i) / 64] >> (size_t(i) % 64)) & 1u) != 0;
}

}  // namespace

HappensBefore::HappensBefore(const TaskGraph& tg) {
  const size_t n = tg.tasks.size(), ne = tg.events.size();
  for (const Task& t : tg.tasks) trigger_.push_back(t.trigger);
  words_ = (n + 63) / 64;
  // Ids are topological: a waiter's id is above every producer's. From the last task down,
  // the waiters of a task's trigger, and everything after them, are done when it is reached.
  after_event_.assign(ne, {});
  std::vector<char> done(ne, 0);
  for (size_t i = n; i-- > 0;) {
    const Task& t = tg.tasks[i];
    MPK_ICHECK(t.id == int(i)) << "task ids must be indices";
    const int e = t.trigger;
    if (e < 0 || done[size_t(e)]) continue;
    std::vector<uint64_t> s(words_, 0);
    for (int w : tg.events[size_t(e)].waiters) {
      MPK_ICHECK(w > t.id) << "task " << w << " waits for a later task " << t.id;
      s[size_t(w) / 64] |= uint64_t(1) << (size_t(w) % 64);
      const int e2 = tg.tasks[size_t(w)].trigger;
      if (e2 < 0) continue;
      MPK_ICHECK(done[size_t(e2)]) << "event order";
      for (size_t k = 0; k < words_; ++k) s[k] |= after_event_[size_t(e2)][k];
    }
    after_event_[size_t(e)] = std::move(s);
    done[size_t(e)] = 1;
  }
  accessors_.assign(tg.buffers.size(), {});
  for (const Task& t : tg.tasks) {
    for (const auto* list : {&t.reads, &t.writes, &t.adds})
      for (const Access& a : *list) {
        auto& v = accessors_[size_t(a.buffer)];
        if (v.empty() || v.back() != t.id) v.push_back(t.id);
      }
  }
  after_buffer_.assign(tg.buffers.size(), {});
  for (size_t b = 0; b < tg.buffers.size(); ++b) {
    if (accessors_[b].empty()) continue;
    std::vector<uint64_t> s(words_, ~uint64_t(0));
    for (int a : accessors_[b]) {
      const int e = tg.tasks[size_t(a)].trigger;
      if (e < 0) {
        std::fill(s.begin(), s.end(), 0);
        break;
      }
      for (size_t k = 0; k < words_; ++k) s[k] &= after_event_[size_t(e)][k];
    }
    after_buffer_[b] = std::move(s);
  }
}

bool HappensBefore::task_before(int a, int b) const {
  const int e = trigger_[size_t(a)];
  return e >= 0 && has(after_event_[size_t(e)], b);
}

bool HappensBefore::buffer_before(int earlier, int later) const {
  const auto& first = accessors_[size_t(earlier)];
  const auto& second = accessors_[size_t(later)];
  if (first.empty() || second.empty()) return false;
  for (int b : second)
    if (!has(after_buffer_[size_t(earlier)], b)) return false;
  return true;
}

std::vector<int> share_buffers(const TaskGraph& tg, const std::vector<bool>& host_visible) {
  MPK_CHECK(host_visible.size() == tg.buffers.size(), InvalidArgument)
      << "share_buffers: " << host_visible.size() << " host-visible flags for " << tg.buffers.size()
      << " buffers";
  const HappensBefore hb(tg);
  const size_t nb = tg.buffers.size();
  std::vector<bool> pinned = host_visible, written(nb);
  for (const Task& t : tg.tasks)
    for (const auto* list : {&t.writes, &t.adds})
      for (const Access& a : *list) written[size_t(a.buffer)] = true;
  for (size_t b = 0; b < nb; ++b) pinned[b] = pinned[b] || tg.buffers[b].carried || !written[b];
  for (size_t c = 0; c < nb; ++c) {
    if (!tg.buffers[c].carried) continue;
    std::vector<int> writers, readers;
    for (const Task& t : tg.tasks) {
      for (const Access& a : t.writes)
        if (a.buffer == int(c)) writers.push_back(t.id);
      for (const Access& a : t.reads)
        if (a.buffer == int(c)) readers.push_back(t.id);
    }
    for (int r : readers)
      MPK_ICHECK(!tg.tasks[size_t(r)].waits_prev.empty())
          << "share_buffers: " << tg.tasks[size_t(r)].name << " reads carried " << tg.buffers[c].name
          << " without waiting for the previous step";
    for (const Task& t : tg.tasks) {
      const auto before = [&](int w) { return w == t.id || hb.task_before(t.id, w); };
      const auto after = [&](int r) { return r == t.id || hb.task_before(r, t.id); };
      MPK_ICHECK(std::any_of(writers.begin(), writers.end(), before))
          << "share_buffers: " << t.name << " may still run when the next step starts (not before a "
          << "writer of carried " << tg.buffers[c].name << ")";
      MPK_ICHECK(std::any_of(readers.begin(), readers.end(), after))
          << "share_buffers: " << t.name << " may run before the previous step ends (not after a "
          << "reader of carried " << tg.buffers[c].name << ")";
    }
  }
  std::vector<int> first(nb, int(tg.tasks.size()));  // a buffer's first accessor (none: n)
  for (size_t b = 0; b < nb; ++b)
    if (!hb.accessors(int(b)).empty()) first[b] = hb.accessors(int(b)).front();
  std::vector<int> order(nb);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return first[size_t(a)] < first[size_t(b)]; });

  std::vector<int> slot(nb, -1), last;  // last: each open slot's latest buffer, -1 when closed
  for (int b : order) {
    const bool alone = pinned[size_t(b)] || first[size_t(b)] == int(tg.tasks.size());
    int s = -1;
    if (!alone)
      for (size_t i = 0; i < last.size() && s < 0; ++i)
        if (last[i] >= 0 && hb.buffer_before(last[i], b)) s = int(i);
    if (s < 0) {
      s = int(last.size());
      last.push_back(-1);
    }
    slot[size_t(b)] = s;
    last[size_t(s)] = alone ? -1 : b;
  }
  return slot;
}

}  // namespace mpk::sched
