// A shared cache that the user may read but not write: a write-protected file in a folder
// the user cannot write, where SQLite's WAL mode cannot create its -wal and -shm files.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "cache/cache.h"
#include "cache/sqlite_db.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

constexpr int kEntries = 5;

// Entries 0..kEntries-1 in a WAL-mode file at `path`, closed cleanly (no -wal or -shm left).
void fill(const fs::path& path) {
  {
    Cache cache(options_at(path));
    for (int i = 0; i < kEntries; ++i) cache.publish(make_key(i), make_entry(2000, uint64_t(i)));
  }
  ASSERT_EQ(read_bytes(path)[18], 2) << "not a WAL-mode file";
  ASSERT_FALSE(fs::exists(path.string() + "-shm"));
}

// Write-protects a folder and its file while alive.
class WriteProtected {
 public:
  WriteProtected(fs::path folder, fs::path file) : folder_(std::move(folder)), file_(std::move(file)) {
    fs::permissions(file_, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(folder_, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                 fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  }
  ~WriteProtected() {
    fs::permissions(folder_, fs::perms::owner_write, fs::perm_options::add);
    fs::permissions(file_, fs::perms::owner_write, fs::perm_options::add);
  }

 private:
  fs::path folder_, file_;
};

// What a user sees of the shared cache at `path`: "" when it serves every entry and refuses
// writes, else what went wrong.
std::string serves_hits_read_only(const fs::path& path, bool asked) {
  if (access(path.parent_path().c_str(), W_OK) == 0) return "SKIP:this user can write the folder anyway";
  CacheOptions o = options_at(path);
  o.read_only = asked;
  Cache cache(o);
  if (!cache.read_only()) return "opened read-write";
  for (int i = 0; i < kEntries; ++i) {
    auto e = cache.load(make_key(i));
    if (!e || e->cubin != make_blob(2000, uint64_t(i))) return "entry " + std::to_string(i) + " missed";
  }
  if (cache.stats().entries != kEntries) return "stats disagree";
  if (cache.verify().damage_found()) return "verify found damage";
  try {
    cache.publish(make_key(99), make_entry(10, 99));
    return "publish succeeded";
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cache) return std::string("publish: ") + e.what();
  }
  Entry built = cache.get_or_build(make_key(98), [] { return make_entry(10, 98); });
  if (built.cubin != make_blob(10, 98)) return "get_or_build did not return what it built";
  return "";
}

// Before, this failed with "attempt to write a readonly database" even when asked to open
// read-only: WAL mode needs a -shm file beside the database.
TEST(CacheReadOnly, FolderTheUserCannotWriteServesHits) {
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::others_read | fs::perms::others_exec | fs::perms::group_read |
                                  fs::perms::group_exec, fs::perm_options::add);
  fs::path folder = dir / "shared";
  fs::create_directories(folder);
  fs::path path = folder / "kernels.db";
  fill(path);
  std::string skip, failure;
  {
    WriteProtected guard(folder, path);
    for (bool asked : {true, false}) {
      failure = in_unprivileged_child([&] { return serves_hits_read_only(path, asked); }, &skip);
      if (!skip.empty() || !failure.empty()) break;
    }
  }
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(failure, "");
  for (const char* suffix : {"-wal", "-shm", "-journal"}) EXPECT_FALSE(fs::exists(path.string() + suffix));
}

// The two read-only ways of opening, on their own: mode=ro needs a -shm for a WAL file,
// immutable reads the file alone.
TEST(CacheReadOnly, ImmutableReadsAWalFileWithoutCompanions) {
  TempDir dir;
  fs::path path = dir / "kernels.db";
  fill(path);
  {
    sql::Db db(path, sql::Access::Immutable, 0);
    EXPECT_EQ(db.query_int("SELECT count(*) FROM kernels"), kEntries);
    EXPECT_TRUE(db.is_read_only());
  }
  EXPECT_FALSE(fs::exists(path.string() + "-shm"));
  EXPECT_FALSE(fs::exists(path.string() + "-wal"));
  {
    sql::Db db(path, sql::Access::ReadOnly, 0);
    EXPECT_EQ(db.query_int("SELECT count(*) FROM kernels"), kEntries);
    EXPECT_TRUE(db.is_read_only());
  }
}

// Names that mean something in a URI ('?', '#', '%') are still one file name.
TEST(CacheReadOnly, FileNamesWithUriCharacters) {
  TempDir dir;
  fs::path path = dir / "odd ?name#1%20.db";
  fill(path);
  CacheOptions o = options_at(path);
  o.read_only = true;
  Cache cache(o);
  EXPECT_TRUE(cache.load(make_key(1)));
  EXPECT_FALSE(fs::exists(dir / "odd "));
}

// A rollback-journal file (as exports are) whose writer died mid-transaction: a read-only open
// refuses it (reading past the hot journal would show the writer's uncommitted pages), names
// the way out, and leaves it; a read-write open rolls the transaction back.
TEST(CacheReadOnly, HotJournalIsRefusedNotReadPast) {
  TempDir dir;
  fill(dir / "kernels.db");
  const fs::path path = dir / "export.db";
  {
    Cache cache(options_at(dir / "kernels.db"));
    cache.export_to(path);
  }
  ASSERT_EQ(read_bytes(path)[18], 1) << "an export is not a rollback-journal file";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a writer that dies with its transaction open
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) _exit(2);
    sqlite3_exec(db, "PRAGMA cache_size = 1", nullptr, nullptr, nullptr);  // pages spill to the file
    if (sqlite3_exec(db, "BEGIN IMMEDIATE; UPDATE blobs SET data = randomblob(length(data))", nullptr, nullptr,
                     nullptr) != SQLITE_OK)
      _exit(3);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Hot: the file holds uncommitted pages, and the journal (its header written) the originals.
  ASSERT_NE(read_bytes(path.string() + "-journal").substr(0, 4), std::string(4, '\0'));
  const std::string before = read_bytes(path);
  CacheOptions ro = options_at(path);
  ro.read_only = true;
  try {
    Cache cache(ro);
    ADD_FAILURE() << "a read-only open read past a hot journal";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cache);
    EXPECT_NE(std::string(e.what()).find("hot journal"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("open it read-write once to roll it back"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_bytes(path), before);
  Cache rw(options_at(path));
  for (int i = 0; i < kEntries; ++i) EXPECT_TRUE(rw.load(make_key(i))) << i;  // checksums hold
  EXPECT_EQ(rw.counters().corrupt_entries_dropped, 0u);
}

// A file this user may not write, in a folder it may write, is used read-only (with a
// warning) instead of failing on the first write.
TEST(CacheReadOnly, WriteProtectedFileIsUsedReadOnly) {
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::others_read | fs::perms::others_exec | fs::perms::group_read |
                                  fs::perms::group_exec, fs::perm_options::add);
  fs::path path = dir / "kernels.db";
  fill(path);
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  std::string skip;
  std::string failure = in_unprivileged_child(
      [&]() -> std::string {
        if (access(path.c_str(), W_OK) == 0) return "SKIP:this user can write the file anyway";
        Cache cache(options_at(path));
        if (!cache.read_only()) return "opened read-write";
        return cache.load(make_key(2)) ? "" : "entry 2 missed";
      },
      &skip);
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(failure, "");
}

}  // namespace
}  // namespace mpk::cache
