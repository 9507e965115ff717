// The tunings table: a result is found by its signature, replaced by a newer search, dropped
// when damaged, carried by export and import (the newer one wins), and kept across the v2 -> v3
// migration of a file that holds kernels.
#include <gtest/gtest.h>

#include "cache/schema.h"
#include "cache/sha256.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

Tuning make_tuning(int model, double time_us, int64_t created = 0) {
  Tuning t;
  t.signature_text = R"({"model":)" + std::to_string(model) + R"(,"arch":"sm_90a","workers":132})";
  t.params_json = R"({"rows_per_warp":)" + std::to_string(1 + model % 4) + "}";
  t.record_json = R"({"seed":7,"classes":[]})";
  t.time_us = time_us;
  t.default_time_us = time_us * 1.1;
  t.provenance.unix_time = created;
  return t;
}

TEST(CacheTuning, PublishedResultIsFoundByItsSignature) {
  TempDir dir;
  Cache cache(options_at(dir / "kernels.db"));
  const Tuning t = make_tuning(1, 1000.5);
  EXPECT_FALSE(cache.tuning(sha256_hex(t.signature_text)));
  cache.publish_tuning(t);
  auto got = cache.tuning(sha256_hex(t.signature_text));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->signature_text, t.signature_text);
  EXPECT_EQ(got->params_json, t.params_json);
  EXPECT_EQ(got->record_json, t.record_json);
  EXPECT_DOUBLE_EQ(got->time_us, 1000.5);
  EXPECT_DOUBLE_EQ(got->default_time_us, 1000.5 * 1.1);
  EXPECT_FALSE(got->provenance.host.empty());
  EXPECT_GT(got->provenance.unix_time, 0);
  EXPECT_EQ(cache.stats().tunings, 1u);
  EXPECT_FALSE(cache.tuning(sha256_hex(make_tuning(2, 1).signature_text)));

  // A new search for the same signature supersedes the old result, even a faster one.
  Tuning again = make_tuning(1, 1200);
  again.params_json = R"({"rows_per_warp":4})";
  cache.publish_tuning(again);
  got = cache.tuning(sha256_hex(t.signature_text));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->params_json, again.params_json);
  EXPECT_EQ(cache.tunings().size(), 1u);
  EXPECT_TRUE(cache.erase_tuning(got->signature));
  EXPECT_FALSE(cache.erase_tuning(got->signature));
  EXPECT_TRUE(cache.tunings().empty());
}

TEST(CacheTuning, MalformedResultsAreRefused) {
  TempDir dir;
  Cache cache(options_at(dir / "kernels.db"));
  for (auto mutate : std::vector<std::function<void(Tuning&)>>{
           [](Tuning& t) { t.params_json = "{"; },
           [](Tuning& t) { t.params_json = "[1]"; },
           [](Tuning& t) { t.record_json = ""; },
           [](Tuning& t) { t.signature_text = "not json"; },
           [](Tuning& t) { t.time_us = 0; },
           [](Tuning& t) { t.default_time_us = std::nan(""); },
       }) {
    Tuning t = make_tuning(3, 10);
    mutate(t);
    try {
      cache.publish_tuning(t);
      ADD_FAILURE() << "stored a malformed tuning result";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    }
  }
  EXPECT_EQ(cache.stats().tunings, 0u);
}

TEST(CacheTuning, DamagedRowIsDroppedNotServed) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  const Tuning t = make_tuning(4, 50);
  const std::string sig = sha256_hex(t.signature_text);
  {
    Cache cache(options_at(path));
    cache.publish_tuning(t);
    cache.publish(make_key(1), make_entry(100, 1));
  }
  // Parameters changed behind the cache's back still parse: only a row that no longer holds
  // together is refused (the text no longer matching its digest).
  RawDb(path).exec("UPDATE tunings SET signature_text = '{\"model\":5}'");
  LogCapture log;
  Cache cache(options_at(path));
  EXPECT_FALSE(cache.tuning(sig));
  EXPECT_NE(log.text().find("damaged"), std::string::npos) << log.text();
  EXPECT_EQ(cache.stats().tunings, 0u);
  EXPECT_EQ(cache.stats().entries, 1u);  // the kernels are untouched
}

TEST(CacheTuning, ExportAndImportCarryResultsTheNewerWins) {
  TempDir dir;
  FakeClock clock;
  CacheOptions ao = options_at(dir / "a.db");
  ao.clock = clock.fn();
  Cache a(ao);
  a.publish(make_key(1), make_entry(100, 1));
  a.publish_tuning(make_tuning(1, 100, 1000));
  a.publish_tuning(make_tuning(2, 200, 3000));
  TransferResult ex = a.export_to(dir / "x.db");
  EXPECT_EQ(ex.added, 1u);
  EXPECT_EQ(ex.tunings, 2u);

  Cache b(options_at(dir / "b.db"));
  Tuning newer = make_tuning(1, 90, 2000);  // newer than a's result for model 1
  newer.params_json = R"({"rows_per_warp":3})";
  b.publish_tuning(newer);
  b.publish_tuning(make_tuning(2, 250, 4000));  // newer than a's result for model 2
  TransferResult im = b.import_from(dir / "x.db");
  EXPECT_EQ(im.tunings, 0u);
  EXPECT_EQ(b.tuning(sha256_hex(newer.signature_text))->params_json, newer.params_json);
  EXPECT_DOUBLE_EQ(b.tuning(sha256_hex(make_tuning(2, 1).signature_text))->time_us, 250);

  Cache c(options_at(dir / "c.db"));
  c.publish_tuning(make_tuning(1, 80, 500));  // older than a's
  im = c.import_from(dir / "x.db");
  EXPECT_EQ(im.tunings, 2u);
  auto got = c.tuning(sha256_hex(newer.signature_text));
  ASSERT_TRUE(got);
  EXPECT_DOUBLE_EQ(got->time_us, 100);
  EXPECT_EQ(got->provenance.unix_time, 1000);
  EXPECT_EQ(c.stats().entries, 1u);
}

TEST(CacheTuning, V2FileIsMigratedAndKeepsItsKernels) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  { Cache c(options_at(path)); c.publish(make_key(1), make_entry(100, 1)); }
  {
    RawDb raw(path);  // what a v2 file looks like: no tunings table
    raw.exec("DROP TABLE tunings");
    raw.exec("PRAGMA user_version = 2");
  }
  {
    // Read-only, a v2 file is read as it is (no migration): its kernels, no tuning results. An
    // import takes it as a source the same way.
    CacheOptions ro = options_at(path);
    ro.read_only = true;
    Cache c(ro);
    EXPECT_EQ(c.stats().schema_version, 2);
    EXPECT_EQ(c.stats().tunings, 0u);
    EXPECT_TRUE(c.load(make_key(1)));
    EXPECT_FALSE(c.tuning(sha256_hex(make_tuning(1, 1).signature_text)));
    EXPECT_TRUE(c.tunings().empty());
    Cache other(options_at(dir / "other.db"));
    const TransferResult im = other.import_from(path);
    EXPECT_EQ(im.added, 1u);
    EXPECT_EQ(im.tunings, 0u);
  }
  EXPECT_EQ(RawDb(path).query_int("PRAGMA user_version"), 2);  // untouched
  Cache cache(options_at(path));
  EXPECT_EQ(cache.stats().schema_version, kSchemaVersion);
  EXPECT_TRUE(cache.load(make_key(1)));
  cache.publish_tuning(make_tuning(1, 10));
  EXPECT_EQ(cache.stats().tunings, 1u);
  EXPECT_TRUE(moved_aside_in(dir.path()).empty());
}

}  // namespace
}  // namespace mpk::cache
