// Publish, load, checksum checks, read-only mode, LRU pruning, listing and stats.
#include <gtest/gtest.h>

#include <cctype>
#include <set>

#include "base/error.h"
#include "cache/cache.h"
#include "cache/schema.h"
#include "cache/sha256.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no mpk::Error thrown";
  return ErrorKind::Internal;
}

class CacheStore : public ::testing::Test {
 protected:
  CacheOptions opts() {
    CacheOptions o = options_at(dir / "kernels.db");
    o.clock = clock.fn();
    return o;
  }
  TempDir dir;
  FakeClock clock;
};

TEST_F(CacheStore, PublishThenLoadReturnsEverything) {
  Cache cache(opts());
  CacheKey key = make_key(1);
  EXPECT_FALSE(cache.load(key));
  Entry e = make_entry(20000, 7, 12.5);
  e.provenance.host = "builder";
  EXPECT_TRUE(cache.publish(key, e));

  auto got = cache.load(key);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->cubin, e.cubin);
  EXPECT_EQ(got->params_json, e.params_json);
  EXPECT_EQ(got->verification_json, e.verification_json);
  ASSERT_TRUE(got->time_us);
  EXPECT_DOUBLE_EQ(*got->time_us, 12.5);
  EXPECT_EQ(got->key, key_digest(key));
  EXPECT_EQ(got->key_text, canonical_key_text(key));
  EXPECT_EQ(got->checksum, sha256_hex(e.cubin.data(), e.cubin.size()));
  EXPECT_EQ(got->provenance.host, "builder");  // kept
  EXPECT_EQ(got->provenance.unix_time, clock.t->load());
  EXPECT_FALSE(got->provenance.mpk_version.empty());
  EXPECT_EQ(cache.counters().hits, 1u);
  EXPECT_EQ(cache.counters().misses, 1u);
  EXPECT_EQ(cache.counters().publishes, 1u);
  // Another field value of the key misses.
  EXPECT_FALSE(cache.load(make_key(1, "sm_90")));
}

TEST_F(CacheStore, UntimedEntryRoundTrips) {
  Cache cache(opts());
  cache.publish(make_key(1), make_entry(100, 1, std::nullopt));
  auto got = cache.load(make_key(1));
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->time_us);
}

TEST_F(CacheStore, EntriesPersistAcrossOpens) {
  { Cache(opts()).publish(make_key(1), make_entry(1000, 1)); }
  Cache cache(opts());
  auto got = cache.load(make_key(1));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->cubin, make_blob(1000, 1));
}

TEST_F(CacheStore, PublishKeepsABetterExistingEntry) {
  Cache cache(opts());
  CacheKey key = make_key(1);
  EXPECT_TRUE(cache.publish(key, make_entry(100, 1, 5.0, true)));
  EXPECT_FALSE(cache.publish(key, make_entry(100, 2, 9.0, true)));   // slower
  EXPECT_FALSE(cache.publish(key, make_entry(100, 3, 1.0, false)));  // unverified
  EXPECT_EQ(cache.load(key)->cubin, make_blob(100, 1));
  EXPECT_TRUE(cache.publish(key, make_entry(100, 4, 5.0, true)));  // a tie goes to the newcomer
  EXPECT_EQ(cache.load(key)->cubin, make_blob(100, 4));
  EXPECT_TRUE(cache.publish(key, make_entry(100, 5, 2.0, true)));
  EXPECT_EQ(cache.load(key)->cubin, make_blob(100, 5));
  EXPECT_EQ(cache.counters().publishes_kept_existing, 2u);
  EXPECT_EQ(cache.stats().entries, 1u);
}

TEST_F(CacheStore, RejectsBadValues) {
  Cache cache(opts());
  Entry e = make_entry(10, 1);
  e.params_json = "{not json";
  EXPECT_EQ(kind_of([&] { cache.publish(make_key(1), e); }), ErrorKind::InvalidArgument);
  e = make_entry(10, 1);
  e.verification_json = "";
  EXPECT_EQ(kind_of([&] { cache.publish(make_key(1), e); }), ErrorKind::InvalidArgument);
  e = make_entry(0, 1);
  EXPECT_EQ(kind_of([&] { cache.publish(make_key(1), e); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(cache.stats().entries, 0u);
}

// Tampers with the stored cubin and expects a miss, a dropped row and the counters to move.
void expect_corruption_detected(Cache& cache, const fs::path& db, const std::string& tamper_sql) {
  CacheKey key = make_key(1);
  cache.publish(key, make_entry(5000, 1));
  cache.publish(make_key(2), make_entry(5000, 2));
  RawDb(db).exec(tamper_sql);
  uint64_t before = cache.counters().corrupt_entries_dropped;
  EXPECT_FALSE(cache.load(key));
  EXPECT_EQ(cache.counters().corrupt_entries_dropped, before + 1);
  EXPECT_FALSE(cache.info(key_digest(key)));  // deleted, so the caller rebuilds
  EXPECT_EQ(RawDb(db).query_int("SELECT count(*) FROM blobs"), 1);
  EXPECT_EQ(cache.stats().corrupt_entries_dropped_total, 1u);
  EXPECT_TRUE(cache.load(make_key(2)));  // the neighbour is untouched
  // The rebuilt entry is stored again.
  cache.publish(key, make_entry(5000, 1));
  EXPECT_TRUE(cache.load(key));
}

std::string blob_of(const CacheKey& key) {
  return "(SELECT id FROM kernels WHERE key = '" + key_digest(key) + "')";
}

TEST_F(CacheStore, TruncatedBlobIsDetected) {
  Cache cache(opts());
  expect_corruption_detected(cache, dir / "kernels.db",
                             "UPDATE blobs SET data = substr(data, 1, 4000) WHERE id = " + blob_of(make_key(1)));
}

TEST_F(CacheStore, BitFlippedBlobIsDetected) {
  Cache cache(opts());
  CacheKey key = make_key(1);
  cache.publish(key, make_entry(5000, 1));
  cache.publish(make_key(2), make_entry(5000, 2));
  {
    RawDb raw(dir / "kernels.db");
    // Same length, one bit flipped.
    sqlite3_stmt* s = nullptr;
    std::string q = "SELECT data FROM blobs WHERE id = " + blob_of(key);
    ASSERT_EQ(sqlite3_prepare_v2(raw.handle(), q.c_str(), -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(s, 0));
    std::vector<uint8_t> data(p, p + sqlite3_column_bytes(s, 0));
    sqlite3_finalize(s);
    data[2500] ^= 0x10;
    std::string u = "UPDATE blobs SET data = ?1 WHERE id = " + blob_of(key);
    ASSERT_EQ(sqlite3_prepare_v2(raw.handle(), u.c_str(), -1, &s, nullptr), SQLITE_OK);
    sqlite3_bind_blob(s, 1, data.data(), int(data.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(s), SQLITE_DONE);
    sqlite3_finalize(s);
  }
  EXPECT_FALSE(cache.load(key));
  EXPECT_EQ(cache.counters().corrupt_entries_dropped, 1u);
  EXPECT_FALSE(cache.info(key_digest(key)));
  EXPECT_TRUE(cache.load(make_key(2)));
}

TEST_F(CacheStore, MissingBlobRowIsDetected) {
  Cache cache(opts());
  expect_corruption_detected(cache, dir / "kernels.db", "DELETE FROM blobs WHERE id = " + blob_of(make_key(1)));
}

TEST_F(CacheStore, TamperedChecksumIsDetected) {
  Cache cache(opts());
  expect_corruption_detected(cache, dir / "kernels.db",
                             "UPDATE kernels SET checksum = '" + std::string(64, '0') + "' WHERE key = '" +
                                 key_digest(make_key(1)) + "'");
}

TEST_F(CacheStore, GetOrBuildRebuildsACorruptEntry) {
  Cache cache(opts());
  int builds = 0;
  auto build = [&] {
    ++builds;
    return make_entry(3000, 9);
  };
  cache.get_or_build(make_key(1), build);
  cache.get_or_build(make_key(1), build);
  EXPECT_EQ(builds, 1);
  RawDb(dir / "kernels.db").exec("UPDATE blobs SET data = zeroblob(3000)");
  Entry e = cache.get_or_build(make_key(1), build);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(e.cubin, make_blob(3000, 9));
  EXPECT_EQ(cache.counters().corrupt_entries_dropped, 1u);
  EXPECT_TRUE(cache.load(make_key(1)));
}

TEST_F(CacheStore, ReadOnlyLoadsButRefusesWrites) {
  {
    Cache cache(opts());
    cache.publish(make_key(1), make_entry(1000, 1));
    cache.publish(make_key(2), make_entry(1000, 2));
  }
  int64_t last_used = RawDb(dir / "kernels.db").query_int("SELECT max(last_used) FROM kernels");
  clock.advance(10000);
  CacheOptions o = opts();
  o.read_only = true;
  Cache ro(o);
  EXPECT_TRUE(ro.read_only());
  auto got = ro.load(make_key(1));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->cubin, make_blob(1000, 1));
  EXPECT_EQ(kind_of([&] { ro.publish(make_key(3), make_entry(10, 3)); }), ErrorKind::Cache);
  EXPECT_EQ(kind_of([&] { ro.prune(0); }), ErrorKind::Cache);
  EXPECT_EQ(kind_of([&] { ro.erase(key_digest(make_key(1))); }), ErrorKind::Cache);
  EXPECT_EQ(kind_of([&] { ro.import_from(dir / "other.db"); }), ErrorKind::Cache);
  EXPECT_EQ(RawDb(dir / "kernels.db").query_int("SELECT max(last_used) FROM kernels"), last_used);
  // get_or_build still returns a kernel; it just is not stored.
  Entry built = ro.get_or_build(make_key(4), [] { return make_entry(10, 4); });
  EXPECT_EQ(built.cubin, make_blob(10, 4));
  EXPECT_EQ(ro.stats().entries, 2u);
  // A corrupt entry is ignored, not deleted.
  RawDb(dir / "kernels.db").exec("UPDATE blobs SET data = zeroblob(1000) WHERE id = " + blob_of(make_key(2)));
  EXPECT_FALSE(ro.load(make_key(2)));
  EXPECT_EQ(RawDb(dir / "kernels.db").query_int("SELECT count(*) FROM kernels"), 2);
}

TEST_F(CacheStore, ReadOnlyNeedsAnExistingCache) {
  CacheOptions o = opts();
  o.read_only = true;
  EXPECT_EQ(kind_of([&] { Cache c(o); }), ErrorKind::NotFound);
  EXPECT_FALSE(fs::exists(o.path));
}

TEST_F(CacheStore, HitsRefreshLastUsedAtMostOncePerInterval) {
  CacheOptions o = opts();
  o.touch_interval_s = 60;
  Cache cache(o);
  cache.publish(make_key(1), make_entry(10, 1));
  int64_t t0 = clock.t->load();
  clock.advance(30);
  EXPECT_EQ(cache.load(make_key(1))->last_used, t0);
  clock.advance(31);
  EXPECT_EQ(cache.load(make_key(1))->last_used, t0 + 61);
  EXPECT_EQ(cache.info(key_digest(make_key(1)))->last_used, t0 + 61);
}

TEST_F(CacheStore, PruneEvictsLeastRecentlyUsedFirst) {
  CacheOptions o = opts();
  o.touch_interval_s = 0;
  Cache cache(o);
  for (int i = 0; i < 10; ++i) {
    cache.publish(make_key(i), make_entry(1000, i));
    clock.advance(1);
  }
  // Use 0..4 again: 5..9 become the least recently used.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(cache.load(make_key(i)));
    clock.advance(1);
  }
  uint64_t per_entry = cache.info(key_digest(make_key(0)))->bytes;
  EXPECT_EQ(cache.stats().payload_bytes, 10 * per_entry);
  PruneResult r = cache.prune(6 * per_entry);
  EXPECT_EQ(r.removed_entries, 4u);
  EXPECT_EQ(r.remaining_entries, 6u);
  EXPECT_EQ(r.remaining_bytes, 6 * per_entry);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(cache.info(key_digest(make_key(i)))) << i;
  for (int i = 5; i < 9; ++i) EXPECT_FALSE(cache.info(key_digest(make_key(i)))) << i;
  EXPECT_TRUE(cache.info(key_digest(make_key(9))));
  EXPECT_EQ(cache.stats().payload_bytes, 6 * per_entry);
  EXPECT_EQ(RawDb(dir / "kernels.db").query_int("SELECT count(*) FROM blobs"), 6);
  EXPECT_EQ(cache.prune(6 * per_entry).removed_entries, 0u);
  EXPECT_EQ(cache.prune(0).remaining_entries, 0u);
  EXPECT_EQ(cache.stats().payload_bytes, 0u);
}

TEST_F(CacheStore, MaxBytesPrunesAfterPublishButKeepsTheNewEntry) {
  uint64_t per_entry = 0;
  {
    Cache probe(options_at(dir / "probe.db"));
    probe.publish(make_key(0), make_entry(1000, 0));
    per_entry = probe.info(key_digest(make_key(0)))->bytes;
  }
  CacheOptions o = opts();
  o.max_bytes = 3 * per_entry + per_entry / 2;  // three entries fit, four do not
  Cache cache(o);
  for (int i = 0; i < 6; ++i) {
    cache.publish(make_key(i), make_entry(1000, i));
    clock.advance(1);
  }
  CacheStats st = cache.stats();
  EXPECT_EQ(st.payload_bytes, 3 * per_entry);
  EXPECT_EQ(st.entries, 3u);
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(cache.load(make_key(i))) << i;
  EXPECT_EQ(cache.counters().pruned_entries, 3u);
  // An entry larger than the budget is still kept: it is the one the caller needs now.
  cache.publish(make_key(99), make_entry(10000, 99));
  EXPECT_TRUE(cache.load(make_key(99)));
  EXPECT_EQ(cache.stats().entries, 1u);
}

TEST_F(CacheStore, ListInfoFindAndErase) {
  Cache cache(opts());
  for (int i = 0; i < 5; ++i) {
    cache.publish(make_key(i), make_entry(100 * (i + 1), i, i + 1.0, i % 2 == 0));
    clock.advance(10);
  }
  auto all = cache.list();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].key, key_digest(make_key(4)));  // most recent first
  EXPECT_EQ(all[0].cubin_bytes, 500u);
  EXPECT_TRUE(all[0].verified);
  EXPECT_FALSE(all[1].verified);
  EXPECT_EQ(cache.list(2).size(), 2u);
  std::string k3 = key_digest(make_key(3));
  EXPECT_EQ(cache.find_keys(k3.substr(0, 12)), std::vector<std::string>{k3});
  std::string upper = k3.substr(0, 12);
  for (char& c : upper) c = char(std::toupper(c));
  EXPECT_EQ(cache.find_keys(upper), std::vector<std::string>{k3});
  EXPECT_EQ(cache.find_keys("").size(), 5u);
  EXPECT_EQ(cache.find_keys("", 3).size(), 3u);
  EXPECT_EQ(kind_of([&] { cache.find_keys("xyz"); }), ErrorKind::InvalidArgument);
  EXPECT_TRUE(cache.erase(k3));
  EXPECT_FALSE(cache.erase(k3));
  EXPECT_FALSE(cache.info(k3));
  EXPECT_EQ(cache.stats().entries, 4u);
}

TEST_F(CacheStore, StatsAddUp) {
  Cache cache(opts());
  uint64_t payload = 0;
  for (int i = 0; i < 4; ++i) {
    cache.publish(make_key(i), make_entry(2000, i, 1.0, i < 3));
    payload += cache.info(key_digest(make_key(i)))->bytes;
  }
  CacheStats st = cache.stats();
  EXPECT_EQ(st.schema_version, kSchemaVersion);
  EXPECT_EQ(st.entries, 4u);
  EXPECT_EQ(st.verified_entries, 3u);
  EXPECT_EQ(st.payload_bytes, payload);
  EXPECT_GT(st.file_bytes, 8000u);
  EXPECT_EQ(st.oldest_use, clock.t->load());
  EXPECT_EQ(st.session.publishes, 4u);
  EXPECT_FALSE(st.read_only);
}

TEST_F(CacheStore, VerifyDropsEveryBadEntry) {
  Cache cache(opts());
  for (int i = 0; i < 6; ++i) cache.publish(make_key(i), make_entry(500, i));
  RawDb raw(dir / "kernels.db");
  raw.exec("UPDATE blobs SET data = zeroblob(500) WHERE id = " + blob_of(make_key(1)));
  raw.exec("UPDATE blobs SET data = substr(data, 2) WHERE id = " + blob_of(make_key(4)));
  raw.exec("UPDATE kernels SET key_text = key_text || ' ' WHERE key = '" + key_digest(make_key(5)) + "'");
  VerifyResult r = cache.verify();
  EXPECT_EQ(r.checked, 6u);
  std::set<std::string> bad(r.bad_keys.begin(), r.bad_keys.end());
  EXPECT_EQ(bad, (std::set<std::string>{key_digest(make_key(1)), key_digest(make_key(4)), key_digest(make_key(5))}));
  EXPECT_TRUE(r.integrity_ok) << r.integrity_message;
  EXPECT_EQ(cache.stats().entries, 3u);
  EXPECT_EQ(cache.stats().corrupt_entries_dropped_total, 3u);
  EXPECT_TRUE(cache.verify().bad_keys.empty());
}

}  // namespace
}  // namespace mpk::cache
