// Damaged, foreign, truncated, old and new database files.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/schema.h"
#include "cache/sha256.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::vector<fs::path> moved_aside(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.find(".corrupt-") != std::string::npos && name.find("-wal") == std::string::npos) out.push_back(e.path());
  }
  return out;
}

// A fresh cache that works: publish and load round-trip.
void expect_usable(const fs::path& path) {
  Cache cache(options_at(path));
  EXPECT_EQ(cache.stats().schema_version, kSchemaVersion);
  cache.publish(make_key(77), make_entry(100, 77));
  auto got = cache.load(make_key(77));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->cubin, make_blob(100, 77));
}

void expect_replaced(const fs::path& path, const std::string& original) {
  LogCapture log;
  { Cache cache(options_at(path)); EXPECT_EQ(cache.stats().entries, 0u); }
  auto aside = moved_aside(path.parent_path());
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(read_file(aside[0]), original);  // kept for inspection, byte for byte
  EXPECT_NE(log.text().find("kept a copy at"), std::string::npos) << log.text();
  expect_usable(path);
}

TEST(CacheRecovery, RandomBytesAreMovedAside) {
  TempDir dir;
  std::mt19937 rng(1);
  std::string junk(8192, '\0');
  for (char& c : junk) c = char(rng());
  write_file(dir / "kernels.db", junk);
  expect_replaced(dir / "kernels.db", junk);
}

// Another process may hold a connection on the damaged file while this one recovers it. Had
// the file been renamed, that connection would go on using the old file with the new one's
// journal and WAL names (rolling the new file's journal back into the old file); reset in
// place, it reads the recovered file.
TEST(CacheRecovery, AConnectionOpenOnTheDamagedFileReadsTheRecoveredOne) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  std::string junk(20000, '\x7f');
  write_file(path, junk);
  sql::Db held(path, sql::Access::ReadWrite, 1000);
  EXPECT_THROW(held.query_int("PRAGMA user_version"), sql::SqliteError);
  {
    LogCapture log;
    Cache cache(options_at(path));
    for (int i = 0; i < 3; ++i) cache.publish(make_key(i), make_entry(3000, i));
  }
  EXPECT_FALSE(held.file_moved());
  EXPECT_EQ(held.query_int("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(held.query_int("SELECT count(*) FROM kernels"), 3);
  auto aside = moved_aside(dir.path());
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(read_file(aside[0]), junk);
}

TEST(CacheRecovery, TextFileIsMovedAside) {
  TempDir dir;
  write_file(dir / "kernels.db", "hello, I am not a database\n");
  expect_replaced(dir / "kernels.db", "hello, I am not a database\n");
}

std::string full_cache_bytes(const fs::path& path) {
  {
    Cache cache(options_at(path));
    for (int i = 0; i < 40; ++i) cache.publish(make_key(i), make_entry(6000, i));
  }
  return read_file(path);  // closed cleanly: the WAL is checkpointed into the file
}

TEST(CacheRecovery, TruncatedDatabaseIsMovedAside) {
  for (size_t keep : {size_t(20), size_t(100), size_t(1000), size_t(4096), size_t(0)}) {
    SCOPED_TRACE(keep);
    TempDir dir;
    fs::path path = dir / "kernels.db";
    std::string full = full_cache_bytes(path);
    ASSERT_GT(full.size(), 200000u);
    std::string truncated = full.substr(0, keep ? keep : full.size() / 2);
    write_file(path, truncated);
    expect_replaced(path, truncated);
  }
}

// Every entry of `cache` holds what full_cache_bytes (or a test's publish of key 500) stored.
void expect_entries_intact(Cache& cache) {
  for (const EntryInfo& info : cache.list()) {
    auto e = cache.load(info.key);
    ASSERT_TRUE(e) << info.key;
    bool known = false;
    for (int i = 0; i < 40 && !known; ++i) known = e->cubin == make_blob(6000, uint64_t(i));
    known |= e->cubin == make_blob(6000, 500);
    EXPECT_TRUE(known) << "entry " << info.key << " holds a cubin nobody stored";
  }
}

// A bit flipped in a b-tree page is met by whichever operation reads that page, or else by
// verify's quick_check. Before, such a file was never repaired: verify failed on every run
// and list or prune failed with "database disk image is malformed".
TEST(CacheRecovery, PageDamageIsMovedAsideByTheFirstOperationThatMeetsIt) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  const std::string pristine = full_cache_bytes(path);
  const std::vector<std::pair<const char*, std::function<void(Cache&)>>> ops = {
      {"list", [](Cache& c) { c.list(); }},
      {"load", [](Cache& c) { for (int i = 0; i < 40; ++i) c.load(make_key(i)); }},
      {"publish", [](Cache& c) { c.publish(make_key(500), make_entry(6000, 500)); }},
      {"prune", [](Cache& c) { c.prune(120000); }},
      {"stats", [](Cache& c) { c.stats(); }},
      {"find_keys", [](Cache& c) { c.find_keys("a"); }},
      {"verify", [](Cache& c) { c.verify(); }},
  };
  LogCapture log;
  int moved = 0, moved_by_op = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    for (const auto& [name, op] : ops) {
      SCOPED_TRACE(::testing::Message() << name << ", seed " << seed);
      for (const fs::path& p : moved_aside_in(dir.path())) fs::remove(p);
      write_database(path, flip_btree_bit(pristine, seed));
      {
        Cache cache(options_at(path));
        try {
          op(cache);
        } catch (const Error& e) {
          ADD_FAILURE() << e.what();
        }
        moved_by_op += !moved_aside_in(dir.path()).empty();
        cache.verify();
      }
      moved += !moved_aside_in(dir.path()).empty();
      EXPECT_LE(moved_aside_in(dir.path()).size(), 1u);
      Cache again(options_at(path));
      VerifyResult second = again.verify();
      EXPECT_FALSE(second.damage_found()) << second.integrity_message;
      expect_entries_intact(again);
      EXPECT_NO_THROW(again.publish(make_key(501), make_entry(100, 501)));
    }
  }
  EXPECT_GT(moved_by_op, 0) << "no operation met the damage: the test damages nothing";
  EXPECT_GE(moved, moved_by_op);
  EXPECT_NE(log.text().find("kept a copy at"), std::string::npos);
}

// Damage outside the table rows (here the free-space count of an index page, which only
// quick_check notices) moves the file aside too, and every entry comes back.
TEST(CacheRecovery, MovingAsideKeepsTheEntriesThatReadBackIntact) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  std::string bytes = full_cache_bytes(path);
  int64_t root = RawDb(path).query_int("SELECT rootpage FROM sqlite_master WHERE name = 'kernels_last_used'");
  size_t page = (size_t(uint8_t(bytes[16])) << 8) | uint8_t(bytes[17]);
  ASSERT_GT(root, 1);
  bytes[(size_t(root) - 1) * page + 7] ^= 0x21;  // fragmented free bytes
  write_database(path, bytes);
  LogCapture log;
  Cache cache(options_at(path));
  VerifyResult r = cache.verify();
  EXPECT_TRUE(r.damage_found());
  ASSERT_EQ(r.moved_aside.size(), 1u);
  EXPECT_EQ(read_bytes(r.moved_aside[0]), bytes);  // kept for inspection, byte for byte
  EXPECT_EQ(r.checked, 40u);
  EXPECT_NE(log.text().find("with the 40 intact entries it held"), std::string::npos) << log.text();
  EXPECT_EQ(cache.counters().files_moved_aside, 1u);
  for (int i = 0; i < 40; ++i) {
    auto e = cache.load(make_key(i));
    ASSERT_TRUE(e) << i;
    EXPECT_EQ(e->cubin, make_blob(6000, uint64_t(i)));
  }
  EXPECT_FALSE(cache.verify().damage_found());
}

// A read-only cache reports page damage and leaves the file as it is.
TEST(CacheRecovery, ReadOnlyReportsPageDamageAndTouchesNothing) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  std::string bytes = full_cache_bytes(path);
  int64_t root = RawDb(path).query_int("SELECT rootpage FROM sqlite_master WHERE name = 'kernels_last_used'");
  size_t page = (size_t(uint8_t(bytes[16])) << 8) | uint8_t(bytes[17]);
  bytes[(size_t(root) - 1) * page + 7] ^= 0x21;
  write_database(path, bytes);
  CacheOptions o = options_at(path);
  o.read_only = true;
  Cache cache(o);
  VerifyResult r = cache.verify();
  EXPECT_TRUE(r.damage_found());
  EXPECT_FALSE(r.integrity_ok);
  EXPECT_TRUE(r.moved_aside.empty());
  EXPECT_EQ(read_bytes(path), bytes);
  EXPECT_TRUE(moved_aside_in(dir.path()).empty());
}

TEST(CacheRecovery, ForeignSqliteDatabaseIsMovedAside) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  RawDb(path).exec("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');");
  std::string original = read_file(path);
  expect_replaced(path, original);
}

TEST(CacheRecovery, LookalikeWithAnotherApplicationIdIsMovedAside) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  { Cache c(options_at(path)); }
  RawDb(path).exec("PRAGMA application_id = 42");
  expect_replaced(path, read_file(path));
}

TEST(CacheRecovery, OurFileWithAMissingTableIsMovedAside) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  { Cache c(options_at(path)); }
  RawDb(path).exec("DROP TABLE blobs");
  expect_replaced(path, read_file(path));
}

TEST(CacheRecovery, EmptyFileIsInitialisedInPlace) {
  TempDir dir;
  write_file(dir / "kernels.db", "");
  expect_usable(dir / "kernels.db");
  EXPECT_TRUE(moved_aside(dir.path()).empty());
}

// Something else at the file's path is a cache that cannot be used (Error(Cache), which a load
// treats as no cache), not a bad argument; it is left alone.
TEST(CacheRecovery, AFolderAtTheFilesPathIsACacheError) {
  TempDir dir;
  fs::create_directories(dir / "kernels.db");
  for (bool read_only : {false, true}) {
    CacheOptions o = options_at(dir / "kernels.db");
    o.read_only = read_only;
    try {
      Cache cache(o);
      ADD_FAILURE() << "opened a folder";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Cache) << e.what();
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_directory(dir / "kernels.db"));
}

// Through a symbolic link, SQLite keeps the WAL beside the file the link points at: recovery
// keeps its copy there (with the WAL, when there is one; the copy beside the link had none, and
// the entries still in the WAL were lost with the reset) and takes the folder lock there.
TEST(CacheRecovery, ASymlinkedFileIsKeptBesideItsTarget) {
  TempDir dir;
  fs::create_directories(dir / "real");
  const fs::path real = dir / "real" / "kernels.db", link = dir / "kernels.db";
  {
    Cache cache(options_at(real));
    cache.publish(make_key(0), make_entry(3000, 0));
  }
  fs::create_symlink(real, link);
  std::string bytes = read_bytes(real);
  bytes[0] = 'X';  // not a database: set aside on open
  write_database(real, bytes);
  {
    LogCapture quiet;
    Cache reopened(options_at(link));
  }
  const std::vector<fs::path> moved = moved_aside_in(dir / "real");
  ASSERT_EQ(moved.size(), 1u) << "the copy is kept beside the real file";
  EXPECT_EQ(read_bytes(moved[0]), bytes);
  EXPECT_TRUE(moved_aside_in(dir.path()).empty());
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST(CacheRecovery, CreatesMissingFolders) {
  TempDir dir;
  expect_usable(dir / "a/b/c/kernels.db");
}

TEST(CacheRecovery, NewerSchemaIsRefusedAndLeftAlone) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  { Cache c(options_at(path)); c.publish(make_key(1), make_entry(10, 1)); }
  RawDb(path).exec("PRAGMA user_version = 99");
  std::string before = read_file(path);
  try {
    Cache c(options_at(path));
    FAIL() << "opened a newer schema";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cache);
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(path), before);
  EXPECT_TRUE(moved_aside(dir.path()).empty());
}

TEST(CacheRecovery, ReadOnlyNeverTouchesADamagedFile) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  write_file(path, std::string(5000, 'x'));
  CacheOptions o = options_at(path);
  o.read_only = true;
  EXPECT_THROW(Cache c(o), Error);
  EXPECT_EQ(read_file(path), std::string(5000, 'x'));
  EXPECT_TRUE(moved_aside(dir.path()).empty());
}

TEST(CacheRecovery, ConcurrentOpenersMoveTheFileAsideOnce) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  write_file(path, std::string(10000, '\x5a'));
  LogCapture log;  // keeps the expected warnings off the console
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<Cache>> caches(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        caches[t] = std::make_unique<Cache>(options_at(path));
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) ASSERT_EQ(errors[t], "") << "opener " << t;
  EXPECT_EQ(moved_aside(dir.path()).size(), 1u);
  // They all share the one fresh file.
  caches[0]->publish(make_key(5), make_entry(100, 5));
  for (auto& c : caches) EXPECT_TRUE(c->load(make_key(5)));
}

fs::path golden_copy(const TempDir& dir) {
  fs::path src = fs::path(MPK_TEST_DATA) / "cache_v1.db";
  fs::path dst = dir / "kernels.db";
  fs::copy_file(src, dst);
  fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  return dst;
}

TEST(CacheMigration, GoldenV1IsMigratedToTheCurrentSchema) {
  TempDir dir;
  std::string golden_sha = sha256_hex(read_file(fs::path(MPK_TEST_DATA) / "cache_v1.db"));
  fs::path path = golden_copy(dir);
  ASSERT_EQ(RawDb(path).query_int("PRAGMA user_version"), 1);
  {
    Cache cache(options_at(path));
    CacheStats st = cache.stats();
    EXPECT_EQ(st.schema_version, kSchemaVersion);
    EXPECT_EQ(st.entries, 3u);
    EXPECT_EQ(st.verified_entries, 2u);

    // The file was written with key format v1: its entries are found by their stored keys
    // (make_key(100, "sm_90a") and make_key(101, "sm_90") then).
    auto a = cache.load(std::string_view("7f413bc1a6853f7baccf5cf26f2bc5cd1083e7bb1965b0357258ee09aad214f5"));
    ASSERT_TRUE(a);
    EXPECT_EQ(a->cubin.size(), 48u);
    EXPECT_EQ(a->checksum, "b48c5caccb1bb2c8e5f1dd79c26c40f265c86c7a449d9e7430119e0f09797ee2");
    EXPECT_EQ(a->params_json, R"({"tile":64})");
    ASSERT_TRUE(a->time_us);
    EXPECT_DOUBLE_EQ(*a->time_us, 12.5);
    EXPECT_EQ(a->provenance.host, "builder-a");
    EXPECT_EQ(a->provenance.unix_time, 1690000000);
    EXPECT_EQ(a->provenance.mpk_version, "0.0.9");
    EXPECT_TRUE(a->key_text.empty());  // v1 did not store it

    auto b = cache.load(std::string_view("832b22a113b2bfdbb2379e170ac1f982b50fe08f5d280aef230a8e4db2ec4559"));
    ASSERT_TRUE(b);
    EXPECT_FALSE(b->time_us);
    EXPECT_EQ(b->cubin.size(), 64u);

    auto c = cache.info("c49fea7425fa7f8699897a97c159c6690267d9003bb78c53fafa8fc15c325d84");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->last_used, 1690000200);  // last_used starts at the creation time
    EXPECT_FALSE(c->verified);
    EXPECT_EQ(c->cubin_bytes, 28u);

    uint64_t sum = 0;
    for (const auto& e : cache.list()) sum += e.bytes;
    EXPECT_EQ(st.payload_bytes, sum);
    EXPECT_TRUE(cache.verify().bad_keys.empty());
    cache.publish(make_key(1), make_entry(100, 1));
    EXPECT_EQ(cache.stats().entries, 4u);
  }
  RawDb raw(path);
  EXPECT_EQ(raw.query_int("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.query_int("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(raw.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'kernels_v1'"), 0);
  EXPECT_EQ(sha256_hex(read_file(fs::path(MPK_TEST_DATA) / "cache_v1.db")), golden_sha);
  // Reopening a migrated file changes nothing.
  Cache again(options_at(path));
  EXPECT_EQ(again.stats().entries, 4u);
}

TEST(CacheMigration, ReadOnlyRefusesToMigrate) {
  TempDir dir;
  fs::path path = golden_copy(dir);
  CacheOptions o = options_at(path);
  o.read_only = true;
  try {
    Cache c(o);
    FAIL() << "read-only open migrated a v1 file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cache);
    EXPECT_NE(std::string(e.what()).find("v1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(RawDb(path).query_int("PRAGMA user_version"), 1);
}

TEST(CacheMigration, FreshAndMigratedSchemasAreIdentical) {
  TempDir dir;
  fs::path migrated = golden_copy(dir);
  { Cache c(options_at(migrated)); }
  { Cache c(options_at(dir / "fresh.db")); }
  auto schema = [](const fs::path& p) {
    RawDb raw(p);
    std::string all;
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(raw.handle(), "SELECT type, name, sql FROM sqlite_master ORDER BY name", -1, &s, nullptr);
    while (sqlite3_step(s) == SQLITE_ROW)
      for (int i = 0; i < 3; ++i) {
        auto t = sqlite3_column_text(s, i);
        all += t ? reinterpret_cast<const char*>(t) : "";
        all += "|";
      }
    sqlite3_finalize(s);
    return all;
  };
  EXPECT_EQ(schema(migrated), schema(dir / "fresh.db"));
}

}  // namespace
}  // namespace mpk::cache
