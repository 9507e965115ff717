// Threads sharing Cache objects: every operation at once, and a repair of a damaged file while
// other threads wait for it. Meant to run under ThreadSanitizer too.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "cache/cache.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

constexpr int kThreads = 6;
constexpr int kRounds = 40;

// The key and entry thread `t` publishes in round `r`.
int key_of(int t, int r) { return 1000 * (t + 1) + r; }
Entry entry_of(int t, int r) { return make_entry(500 + size_t(r) * 10, uint64_t(key_of(t, r))); }

// Runs fn(thread index) on kThreads threads; returns the errors they met.
std::vector<std::string> on_threads(const std::function<void(int)>& fn) {
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        fn(t);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  return errors;
}

TEST(CacheThreads, EveryOperationAtOnceOnSharedObjects) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  Cache shared(options_at(path));
  Cache other(options_at(path));  // a second connection to the same file
  auto errors = on_threads([&](int t) {
    Cache& cache = t % 2 ? other : shared;
    for (int r = 0; r < kRounds; ++r) {
      cache.publish(make_key(key_of(t, r)), entry_of(t, r));
      if (auto e = cache.load(make_key(key_of((t + 1) % kThreads, r)))) {
        if (e->cubin != entry_of((t + 1) % kThreads, r).cubin) throw std::runtime_error("wrong cubin");
      }
      Entry built = cache.get_or_build(make_key(r), [&] { return make_entry(64, uint64_t(r)); });
      if (built.cubin != make_blob(64, uint64_t(r))) throw std::runtime_error("wrong build");
      switch (r % 5) {
        case 0: cache.list(5); break;
        case 1: cache.stats(); break;
        case 2: cache.find_keys("a", 3); break;
        case 3: if (r % 15 == 3) cache.verify(); break;
        case 4: cache.counters(); break;
      }
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRounds; ++r) {
      auto e = shared.load(make_key(key_of(t, r)));
      ASSERT_TRUE(e) << t << "/" << r;
      EXPECT_EQ(e->cubin, entry_of(t, r).cubin);
    }
  EXPECT_FALSE(shared.verify().damage_found());
}

// The damage is met by several threads at once: one moves the file aside, the others wait
// and carry on with the fresh file.
TEST(CacheThreads, ARepairWhileOtherThreadsWait) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  {
    Cache cache(options_at(path));
    for (int i = 0; i < 40; ++i) cache.publish(make_key(i), make_entry(6000, uint64_t(i)));
  }
  const std::string pristine = read_bytes(path);
  LogCapture quiet;
  // A damaged page that listing meets (found by trying seeds on a scratch copy).
  std::string damaged;
  for (uint64_t seed = 0; seed < 100 && damaged.empty(); ++seed) {
    write_database(dir / "probe.db", flip_btree_bit(pristine, seed));
    Cache probe(options_at(dir / "probe.db"));
    probe.list();
    if (!moved_aside_in(dir.path()).empty()) damaged = flip_btree_bit(pristine, seed);
    for (const fs::path& p : moved_aside_in(dir.path())) fs::remove(p);
  }
  ASSERT_FALSE(damaged.empty()) << "no seed damages a page that listing reads";
  write_database(path, damaged);

  Cache cache(options_at(path));
  auto errors = on_threads([&](int t) {
    for (int r = 0; r < 10; ++r) {
      cache.list();
      for (int i = 0; i < 40; i += 7)
        if (auto e = cache.load(make_key(i)); e && e->cubin != make_blob(6000, uint64_t(i)))
          throw std::runtime_error("wrong cubin");
      cache.publish(make_key(key_of(t, r)), entry_of(t, r));
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(moved_aside_in(dir.path()).size(), 1u);
  EXPECT_EQ(cache.counters().files_moved_aside, 1u);
  EXPECT_FALSE(cache.verify().moved_aside.empty());
  EXPECT_FALSE(Cache(options_at(path)).verify().damage_found());
}

}  // namespace
}  // namespace mpk::cache
