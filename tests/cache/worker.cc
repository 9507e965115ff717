// A separate process for the multi-process cache tests. Each process opens its own
// connection after exec.
//
//   cache_test_worker mixed DB WORKER N SHARED   print "ready", wait for a line on stdin, then
//                                                 publish N own keys and N shared ones, reading
//                                                 back and checking rows as it goes
//   cache_test_worker forever DB                  publish large entries, printing each index
//                                                 once committed, until killed
//   cache_test_worker hold DB                     open a write transaction, print
//                                                 "in-transaction", and wait to be killed
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "cache/cache.h"
#include "test_util.h"

using namespace mpk::cache;
using namespace mpk::cache::testing;

namespace {

constexpr int kOwnKeyBase = 100000;

int run_mixed(const std::string& db, int w, int n, int shared) {
  Cache cache(options_at(db));
  // Start gate: the test releases every worker at once.
  std::printf("ready\n");
  std::fflush(stdout);
  char go[16];
  if (!std::fgets(go, sizeof(go), stdin)) return 2;
  for (int j = 0; j < n; ++j) {
    int own = kOwnKeyBase + w * 1000 + j;
    cache.publish(make_key(own), worker_entry(w, own));
    int s = j % shared;
    if (j % 2) {
      cache.publish(make_key(s), worker_entry(w, s));
    } else {
      cache.get_or_build(make_key(s), [&] { return worker_entry(w, s); });
    }
    // Read back a shared key and an earlier own key.
    if (auto e = cache.load(make_key((j * 7 + w) % shared)); e && writer_of(*e, (j * 7 + w) % shared) < 0) {
      std::fprintf(stderr, "worker %d: inconsistent shared entry\n", w);
      return 3;
    }
    int earlier = kOwnKeyBase + w * 1000 + j / 2;
    auto mine = cache.load(make_key(earlier));
    if (!mine || writer_of(*mine, earlier) != w) {
      std::fprintf(stderr, "worker %d: lost or mixed own entry %d\n", w, earlier);
      return 3;
    }
  }
  return 0;
}

int run_forever(const std::string& db) {
  Cache cache(options_at(db));
  for (int i = 0;; ++i) {
    Entry e = make_entry(1, 0);
    e.cubin = forever_blob(i);
    cache.publish(make_key(5000 + i), std::move(e));
    std::printf("%d\n", i);
    std::fflush(stdout);
  }
}

int run_hold(const std::string& db) {
  { Cache cache(options_at(db)); }  // makes sure the schema exists
  RawDb raw(db);
  raw.exec("BEGIN IMMEDIATE");
  raw.exec("INSERT INTO kernels (key, key_text, checksum, params, time_us, verification, host, created, "
           "mpk_version, last_used, bytes) VALUES ('" + std::string(64, 'e') +
           "', '', '', '{}', NULL, '{}', 'held', 0, '', 0, 10)");
  raw.exec("INSERT INTO blobs (id, data) VALUES (last_insert_rowid(), zeroblob(1000000))");
  std::printf("in-transaction\n");
  std::fflush(stdout);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 2 ? argv[1] : "";
  try {
    if (mode == "mixed" && argc == 6) return run_mixed(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
    if (mode == "forever" && argc == 3) return run_forever(argv[2]);
    if (mode == "hold" && argc == 3) return run_hold(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker: %s\n", e.what());
    return 4;
  }
  std::fprintf(stderr, "usage: cache_test_worker mixed DB WORKER N SHARED | forever DB | hold DB\n");
  return 2;
}
