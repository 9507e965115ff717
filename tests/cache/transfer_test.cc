// Export to a cache file and import with the conflict rule.
#include <gtest/gtest.h>

#include <fstream>

#include "base/error.h"
#include "cache/cache.h"
#include "cache/sha256.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

std::string file_sha(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return sha256_hex(std::string(std::istreambuf_iterator<char>(f), {}));
}

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no mpk::Error thrown";
  return ErrorKind::Internal;
}

TEST(CacheTransfer, ExportImportRoundTrip) {
  TempDir dir;
  Cache src(options_at(dir / "src.db"));
  for (int i = 0; i < 10; ++i) {
    Entry e = make_entry(3000 + i, i, 1.0 + i);
    e.provenance = {"tuner-" + std::to_string(i), 1600000000 + i, "0.1.0"};
    src.publish(make_key(i), e);
  }
  TransferResult ex = src.export_to(dir / "export.db");
  EXPECT_EQ(ex.added, 10u);
  EXPECT_EQ(ex.skipped_corrupt, 0u);
  // One self-contained file (rollback journal mode), ready to copy.
  EXPECT_FALSE(fs::exists(dir.path() / "export.db-wal"));
  EXPECT_EQ(RawDb(dir / "export.db").query_int("SELECT count(*) FROM kernels"), 10);

  // The export is a cache file in its own right.
  {
    CacheOptions o = options_at(dir / "export.db");
    o.read_only = true;
    Cache exported(o);
    EXPECT_EQ(exported.stats().entries, 10u);
    EXPECT_TRUE(exported.load(make_key(3)));
  }

  Cache dst(options_at(dir / "dst.db"));
  TransferResult im = dst.import_from(dir / "export.db");
  EXPECT_EQ(im.added, 10u);
  EXPECT_EQ(im.replaced + im.kept_existing + im.skipped_corrupt, 0u);
  for (int i = 0; i < 10; ++i) {
    auto e = dst.load(make_key(i));
    ASSERT_TRUE(e) << i;
    EXPECT_EQ(e->cubin, make_blob(3000 + i, i));
    EXPECT_EQ(e->provenance.host, "tuner-" + std::to_string(i));
    EXPECT_EQ(e->provenance.unix_time, 1600000000 + i);
    EXPECT_EQ(e->key_text, canonical_key_text(make_key(i)));
  }
  // Importing the same file again changes nothing: ties keep the existing entry.
  TransferResult again = dst.import_from(dir / "export.db");
  EXPECT_EQ(again.kept_existing, 10u);
  EXPECT_EQ(again.added + again.replaced, 0u);
}

TEST(CacheTransfer, ImportKeepsTheFasterVerifiedEntry) {
  TempDir dir;
  Cache mine(options_at(dir / "mine.db"));
  Cache theirs(options_at(dir / "theirs.db"));
  struct Case {
    const char* name;
    std::optional<double> my_time;
    bool my_verified;
    std::optional<double> their_time;
    bool their_verified;
    bool theirs_wins;
  };
  const std::vector<Case> cases = {
      {"their faster verified", 5.0, true, 3.0, true, true},
      {"their slower verified", 5.0, true, 9.0, true, false},
      {"their verified vs my unverified", 1.0, false, 20.0, true, true},
      {"their unverified vs my verified", 20.0, true, 1.0, false, false},
      {"their timed vs my untimed", std::nullopt, true, 5.0, true, true},
      {"their untimed vs my timed", 5.0, true, std::nullopt, true, false},
      {"tie", 4.0, true, 4.0, true, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    mine.publish(make_key(int(i)), make_entry(100, 1000 + i, c.my_time, c.my_verified));
    theirs.publish(make_key(int(i)), make_entry(100, 2000 + i, c.their_time, c.their_verified));
  }
  theirs.publish(make_key(100), make_entry(100, 100));  // only theirs
  theirs.export_to(dir / "theirs.export");
  TransferResult r = mine.import_from(dir / "theirs.export");
  EXPECT_EQ(r.added, 1u);
  EXPECT_EQ(r.replaced, 3u);
  EXPECT_EQ(r.kept_existing, 4u);
  for (size_t i = 0; i < cases.size(); ++i) {
    auto e = mine.load(make_key(int(i)));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->cubin, make_blob(100, (cases[i].theirs_wins ? 2000 : 1000) + i)) << cases[i].name;
  }
  EXPECT_TRUE(mine.load(make_key(100)));
  EXPECT_EQ(mine.stats().entries, cases.size() + 1);
}

TEST(CacheTransfer, DamagedEntriesAreNotCopied) {
  TempDir dir;
  {
    Cache src(options_at(dir / "src.db"));
    for (int i = 0; i < 4; ++i) src.publish(make_key(i), make_entry(500, i));
  }
  RawDb(dir / "src.db").exec("UPDATE blobs SET data = zeroblob(500) WHERE id = (SELECT id FROM kernels WHERE key = '" +
                             key_digest(make_key(2)) + "')");
  Cache src(options_at(dir / "src.db"));
  TransferResult ex = src.export_to(dir / "out.db");
  EXPECT_EQ(ex.added, 3u);
  EXPECT_EQ(ex.skipped_corrupt, 1u);

  // Import from a damaged source: skipped, and the source file is left as it was.
  std::string before = file_sha(dir / "src.db");
  Cache dst(options_at(dir / "dst.db"));
  TransferResult im = dst.import_from(dir / "src.db");
  EXPECT_EQ(im.added, 3u);
  EXPECT_EQ(im.skipped_corrupt, 1u);
  EXPECT_FALSE(dst.load(make_key(2)));
  EXPECT_EQ(file_sha(dir / "src.db"), before);
}

// A source's entries are taken only when sound: one with JSON that does not parse or a time that
// is not a positive number is skipped. One without its key text (its key cannot be checked: it
// could carry any kernel under our key) never replaces ours, however good its record looks.
TEST(CacheTransfer, UnsoundEntriesAreNotImported) {
  TempDir dir;
  Cache cache(options_at(dir / "kernels.db"));
  const Entry ours = make_entry(500, 1, 10.0);
  cache.publish(make_key(1), ours);
  {
    Cache src(options_at(dir / "src.db"));
    for (int k = 2; k <= 6; ++k) src.publish(make_key(k), make_entry(600, uint64_t(k), 1.0));
  }
  {
    RawDb raw(dir / "src.db");
    // Entry 2 under our key, without the key text, verified and faster.
    raw.exec("UPDATE kernels SET key = '" + key_digest(make_key(1)) + "', key_text = '' WHERE key = '" +
             key_digest(make_key(2)) + "'");
    raw.exec("UPDATE kernels SET time_us = -1 WHERE key = '" + key_digest(make_key(3)) + "'");
    raw.exec("UPDATE kernels SET params = '{not json' WHERE key = '" + key_digest(make_key(4)) + "'");
    // Entry 6 as migrated from v1: no key text, under a key nobody holds.
    raw.exec("UPDATE kernels SET key_text = '' WHERE key = '" + key_digest(make_key(6)) + "'");
  }
  const TransferResult r = cache.import_from(dir / "src.db");
  EXPECT_EQ(r.added, 2u);  // entries 5 and 6
  EXPECT_EQ(r.replaced, 0u);
  EXPECT_EQ(r.kept_existing, 1u);
  EXPECT_EQ(r.skipped_corrupt, 2u);
  const auto got = cache.load(make_key(1));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->cubin, ours.cubin);
  EXPECT_TRUE(cache.load(make_key(5)));
  EXPECT_TRUE(cache.load(make_key(6)));
  EXPECT_FALSE(cache.load(make_key(3)));
}

TEST(CacheTransfer, BadTargetsAndSources) {
  TempDir dir;
  Cache cache(options_at(dir / "kernels.db"));
  cache.publish(make_key(1), make_entry(100, 1));
  cache.export_to(dir / "out.db");
  EXPECT_EQ(kind_of([&] { cache.export_to(dir / "out.db"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(cache.export_to(dir / "out.db", /*overwrite=*/true).added, 1u);
  EXPECT_EQ(kind_of([&] { cache.export_to(dir / "kernels.db", true); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { cache.import_from(dir / "kernels.db"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { cache.import_from(dir / "missing.db"); }), ErrorKind::NotFound);
  {
    std::ofstream f(dir / "junk.db", std::ios::binary);
    f << std::string(3000, 'j');
  }
  EXPECT_EQ(kind_of([&] { cache.import_from(dir / "junk.db"); }), ErrorKind::Cache);
  EXPECT_EQ(fs::file_size(dir / "junk.db"), 3000u);  // not moved aside: it is not ours to fix
  EXPECT_EQ(cache.stats().entries, 1u);

  // Before, a folder as the source read as "disk I/O error", and export created missing
  // folders.
  fs::create_directories(dir / "folder");
  EXPECT_EQ(kind_of([&] { cache.import_from(dir / "folder"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { cache.export_to(dir / "folder"); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([&] { cache.export_to(dir / "missing" / "out.db"); }), ErrorKind::NotFound);
  EXPECT_FALSE(fs::exists(dir / "missing"));
}

// A source with a damaged page gives every entry that still reads back intact; the ones it
// cannot read are counted, and the source is left as it was.
TEST(CacheTransfer, ImportFromAPageDamagedSourceTakesWhatReadsBack) {
  TempDir dir;
  {
    Cache src(options_at(dir / "src.db"));
    for (int i = 0; i < 60; ++i) src.publish(make_key(i), make_entry(700, uint64_t(i)));
  }
  std::string bytes = read_bytes(dir / "src.db");
  // Overwrite the first leaf of the kernels table: its rows become unreadable, the others
  // stay readable. The root (an interior page) names that leaf in its first cell.
  int64_t root = RawDb(dir / "src.db").query_int("SELECT rootpage FROM sqlite_master WHERE name = 'kernels'");
  size_t page = (size_t(uint8_t(bytes[16])) << 8) | uint8_t(bytes[17]);
  auto byte_at = [&](size_t offset) { return uint32_t(uint8_t(bytes[offset])); };
  size_t root_at = (size_t(root) - 1) * page;
  ASSERT_EQ(byte_at(root_at), 5u) << "the kernels table is expected to span several pages";
  size_t cell = root_at + ((byte_at(root_at + 12) << 8) | byte_at(root_at + 13));
  uint32_t leftmost = (byte_at(cell) << 24) | (byte_at(cell + 1) << 16) | (byte_at(cell + 2) << 8) | byte_at(cell + 3);
  ASSERT_GT(leftmost, 1u);
  std::fill(bytes.begin() + long((leftmost - 1) * page), bytes.begin() + long(leftmost * page), '\x77');
  write_database(dir / "src.db", bytes);
  std::string before = file_sha(dir / "src.db");

  LogCapture log;
  Cache dst(options_at(dir / "dst.db"));
  TransferResult im = dst.import_from(dir / "src.db");
  EXPECT_GT(im.added, 0u);
  EXPECT_LT(im.added, 60u);
  EXPECT_GT(im.skipped_corrupt, 0u);
  for (const EntryInfo& info : dst.list()) {
    auto e = dst.load(info.key);
    ASSERT_TRUE(e);
    EXPECT_EQ(sha256_hex(e->cubin.data(), e->cubin.size()), e->checksum);
  }
  EXPECT_FALSE(dst.verify().damage_found());
  EXPECT_EQ(file_sha(dir / "src.db"), before);
  EXPECT_NE(log.text().find("is damaged"), std::string::npos) << log.text();
}

TEST(CacheTransfer, ImportRespectsTheByteBudget) {
  TempDir dir;
  Cache src(options_at(dir / "src.db"));
  for (int i = 0; i < 10; ++i) src.publish(make_key(i), make_entry(1000, i));
  src.export_to(dir / "out.db");
  CacheOptions o = options_at(dir / "dst.db");
  o.max_bytes = 5000;
  Cache dst(o);
  dst.import_from(dir / "out.db");
  EXPECT_LE(dst.stats().payload_bytes, 5000u);
  EXPECT_GT(dst.stats().entries, 0u);
}

}  // namespace
}  // namespace mpk::cache
