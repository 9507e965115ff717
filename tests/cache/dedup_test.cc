// get_or_build: one build per key inside a process, however many threads ask.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "cache/cache.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

// Waits until `cond` holds, or gives up after a generous bound so that a broken
// implementation fails the test instead of hanging it. Not a timing assertion.
template <typename F>
bool wait_for(F cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(CacheDedup, ConcurrentCallersShareOneBuild) {
  TempDir dir;
  Cache cache(options_at(dir / "kernels.db"));
  constexpr int kThreads = 16;
  std::atomic<int> builds{0};
  std::atomic<bool> all_joined{false};
  auto build = [&] {
    ++builds;
    // Hold the build until every other caller has joined it.
    all_joined = wait_for([&] { return cache.counters().build_waits == kThreads - 1; });
    return make_entry(4096, 42);
  };
  std::vector<std::thread> threads;
  std::vector<Entry> results(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { results[t] = cache.get_or_build(make_key(1), build); });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(all_joined);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.counters().builds, 1u);
  EXPECT_EQ(cache.counters().publishes, 1u);
  for (const Entry& e : results) {
    EXPECT_EQ(e.cubin, make_blob(4096, 42));
    EXPECT_EQ(e.key, key_digest(make_key(1)));
  }
  // Later calls are plain hits.
  cache.get_or_build(make_key(1), build);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.stats().entries, 1u);
}

TEST(CacheDedup, DifferentKeysBuildIndependently) {
  TempDir dir;
  Cache cache(options_at(dir / "kernels.db"));
  constexpr int kThreads = 8;
  std::atomic<int> builds{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        Entry e = cache.get_or_build(make_key(t % 4), [&] {
          ++builds;
          return make_entry(1000, t % 4);
        });
        EXPECT_EQ(e.cubin, make_blob(1000, t % 4));
      }
    });
  for (auto& t : threads) t.join();
  // One build per key: a later caller either joined the build or hit the stored entry.
  EXPECT_EQ(builds, 4);
  EXPECT_EQ(cache.stats().entries, 4u);
}

TEST(CacheDedup, ABuildFailureReachesEveryWaiterAndIsNotCached) {
  TempDir dir;
  Cache cache(options_at(dir / "kernels.db"));
  constexpr int kThreads = 6;
  std::atomic<int> builds{0};
  std::atomic<int> failures{0};
  auto failing = [&]() -> Entry {
    ++builds;
    wait_for([&] { return cache.counters().build_waits == kThreads - 1; });
    MPK_THROW(Compile) << "nvrtc said no";
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      try {
        cache.get_or_build(make_key(1), failing);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::Compile) ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(failures, kThreads);
  EXPECT_EQ(cache.stats().entries, 0u);
  // The next call builds again.
  Entry e = cache.get_or_build(make_key(1), [] { return make_entry(10, 1); });
  EXPECT_EQ(e.cubin, make_blob(10, 1));
}

}  // namespace
}  // namespace mpk::cache
