#include "cache/schema.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>

#include "base/log.h"
#include "cache/cache.h"
#include "cache/paths.h"

namespace mpk::cache {
namespace fs = std::filesystem;

const char* const kSchemaV1 = R"sql(
CREATE TABLE kernels (
  key TEXT PRIMARY KEY NOT NULL,
  checksum TEXT NOT NULL,
  params TEXT NOT NULL,
  time_us REAL,
  verification TEXT NOT NULL,
  host TEXT NOT NULL,
  created INTEGER NOT NULL,
  mpk_version TEXT NOT NULL,
  blob BLOB NOT NULL
);
)sql";

namespace {

// Row ids are AUTOINCREMENT so that an id names one version of an entry: dropping a damaged
// row by id cannot delete a good replacement another process wrote meanwhile.
const char* const kMigrateV1ToV2 = R"sql(
ALTER TABLE kernels RENAME TO kernels_v1;
CREATE TABLE kernels (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL UNIQUE,
  key_text TEXT NOT NULL,
  checksum TEXT NOT NULL,
  params TEXT NOT NULL,
  time_us REAL,
  verification TEXT NOT NULL,
  host TEXT NOT NULL,
  created INTEGER NOT NULL,
  mpk_version TEXT NOT NULL,
  last_used INTEGER NOT NULL,
  bytes INTEGER NOT NULL
);
CREATE INDEX kernels_last_used ON kernels(last_used);
CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO kernels (key, key_text, checksum, params, time_us, verification, host, created,
                     mpk_version, last_used, bytes)
  SELECT key, '', checksum, params, time_us, verification, host, created, mpk_version, created,
         length(blob) + length(CAST(params AS BLOB)) + length(CAST(verification AS BLOB))
  FROM kernels_v1 ORDER BY rowid;
INSERT INTO blobs (id, data) SELECT k.id, v.blob FROM kernels k JOIN kernels_v1 v ON v.key = k.key;
DROP TABLE kernels_v1;
INSERT INTO meta VALUES ('total_bytes', (SELECT coalesce(sum(bytes), 0) FROM kernels)),
                        ('corrupt_entries_dropped', 0);
CREATE TRIGGER kernels_insert AFTER INSERT ON kernels BEGIN
  UPDATE meta SET value = value + NEW.bytes WHERE name = 'total_bytes';
END;
CREATE TRIGGER kernels_delete AFTER DELETE ON kernels BEGIN
  UPDATE meta SET value = value - OLD.bytes WHERE name = 'total_bytes';
  DELETE FROM blobs WHERE id = OLD.id;
END;
CREATE TRIGGER kernels_update_bytes AFTER UPDATE OF bytes ON kernels BEGIN
  UPDATE meta SET value = value - OLD.bytes + NEW.bytes WHERE name = 'total_bytes';
END;
)sql";

const char* const kMigrateV2ToV3 = R"sql(
CREATE TABLE tunings (
  signature TEXT PRIMARY KEY NOT NULL,
  signature_text TEXT NOT NULL,
  params TEXT NOT NULL,
  record TEXT NOT NULL,
  time_us REAL NOT NULL,
  default_time_us REAL NOT NULL,
  host TEXT NOT NULL,
  created INTEGER NOT NULL,
  mpk_version TEXT NOT NULL
) WITHOUT ROWID;
)sql";

// Statements that only prepare against a complete schema of that version.
const char* const kProbeV2 =
    "SELECT k.id, k.key, k.key_text, k.checksum, k.params, k.time_us, k.verification, k.host, "
    "k.created, k.mpk_version, k.last_used, k.bytes, b.data, m.value "
    "FROM kernels k, blobs b, meta m LIMIT 0";
const char* const kProbeV3 =
    "SELECT signature, signature_text, params, record, time_us, default_time_us, host, created, "
    "mpk_version FROM tunings LIMIT 0";
const char* const kProbeV1 =
    "SELECT key, checksum, params, time_us, verification, host, created, mpk_version, blob "
    "FROM kernels LIMIT 0";

enum class State { Empty, Current, Older, Newer, Foreign, Damaged };

struct Probe {
  State state = State::Empty;
  int64_t version = 0;
  std::string detail;
};

Probe inspect_snapshot(sql::Db& db) {
  int64_t app = db.query_int("PRAGMA application_id");
  int64_t version = db.query_int("PRAGMA user_version");
  int64_t objects = db.query_int("SELECT count(*) FROM sqlite_master");
  if (app == 0 && version == 0 && objects == 0) return {State::Empty, 0, ""};
  if (app != kApplicationId)
    return {State::Foreign, version,
            fmt::format("application_id {:#x} and {} schema objects: not an mpk kernel cache", app, objects)};
  if (version > kSchemaVersion)
    return {State::Newer, version,
            fmt::format("schema version {} is newer than this mpk supports ({})", version, kSchemaVersion)};
  if (version < 1)
    return {State::Damaged, version, fmt::format("unknown schema version {}", version)};
  try {
    // Each version's tables, and the earlier versions' that it kept.
    for (const char* q : {version == 1 ? kProbeV1 : kProbeV2, version >= 3 ? kProbeV3 : nullptr}) {
      if (!q) continue;
      sql::Stmt probe(db, q);
      probe.run();
    }
  } catch (const sql::SqliteError& e) {
    if (e.is_corruption() || e.is_file_moved() || e.is_busy()) throw;
    return {State::Damaged, version, fmt::format("schema v{} incomplete: {}", version, e.what())};
  }
  return {version == kSchemaVersion ? State::Current : State::Older, version, ""};
}

// PRAGMA journal_mode needs an exclusive lock and reports SQLITE_BUSY at once instead of
// calling the busy handler, so it is retried here for up to the busy timeout.
std::string set_journal_mode(sql::Db& db, const char* mode, int busy_timeout_ms) {
  const std::string sql = std::string("PRAGMA journal_mode = ") + mode;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  for (int delay_ms = 1;; delay_ms = std::min(delay_ms * 2, 50)) {
    try {
      return db.query_text(sql);
    } catch (const sql::SqliteError& e) {
      if (!e.is_busy() || std::chrono::steady_clock::now() > deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
}

// Reads the file's identity in one read transaction: separate statements could straddle
// another process's schema creation and see a half-new picture.
Probe inspect(sql::Db& db) {
  try {
    sql::Transaction read(db, /*immediate=*/false);
    Probe p = inspect_snapshot(db);
    read.commit();
    return p;
  } catch (const sql::SqliteError& e) {
    if (!e.is_corruption()) throw;
    return {State::Damaged, 0, e.what()};
  }
}

// Applies every migration from the file's version to kSchemaVersion in one transaction.
// The version is read again inside it: another process may have migrated meanwhile.
void migrate(sql::Db& db) {
  sql::Transaction txn(db);
  int64_t version = db.query_int("PRAGMA user_version");
  if (version == 0) {
    db.exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
    db.exec(kSchemaV1);
    version = 1;
  }
  if (version == 1) {
    log(LogLevel::Info, "kernel cache {}: migrating schema v1 to v2", db.path().string());
    db.exec(kMigrateV1ToV2);
    version = 2;
  }
  if (version == 2) {
    log(LogLevel::Info, "kernel cache {}: migrating schema v2 to v3", db.path().string());
    db.exec(kMigrateV2ToV3);
    version = 3;
  }
  db.exec(fmt::format("PRAGMA user_version = {}", version));
  txn.commit();
}

// Holds an exclusive flock on the database's folder, so that processes that find the same
// damaged file reset it once, not each other's fresh databases.
class FolderLock {
 public:
  explicit FolderLock(const fs::path& folder) {
    fd_ = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FolderLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

bool writable(const fs::path& p) {
  return ::faccessat(AT_FDCWD, p.empty() ? "." : p.c_str(), W_OK, AT_EACCESS) == 0;
}

// Whether the cache file exists; Error(Cache) when something else (a folder, a FIFO) sits at
// its path: a cache that cannot be used, which callers treat as none, not a bad argument.
bool cache_file_exists(const fs::path& path) {
  try {
    return regular_file_exists(path);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidArgument) throw;
    MPK_THROW(Cache) << e.what();
  }
}

// Opens an existing file without writing to it. `asked` says whether the caller asked for
// read-only (else the file or its folder is write-protected), for the advice in errors.
std::unique_ptr<sql::Db> open_read_only(const fs::path& path, const OpenOptions& options, bool asked) {
  MPK_CHECK(cache_file_exists(path), NotFound) << "no kernel cache at " << path.string();
  std::unique_ptr<sql::Db> db;
  Probe p;
  try {
    db = std::make_unique<sql::Db>(path, sql::Access::ReadOnly, options.busy_timeout_ms);
    p = inspect(*db);
  } catch (const sql::SqliteError& e) {
    MPK_CHECK(!e.is_hot_journal(), Cache)
        << "kernel cache " << path.string() << " holds a transaction a writer left unfinished (a hot journal)"
        << (asked ? "; open it read-write once to roll it back" : " and cannot be rolled back here (write-protected)");
    // A WAL file whose -shm this user can neither read nor create (a folder it cannot write).
    if (!e.is_read_only_refusal()) throw;
    log(LogLevel::Debug, "kernel cache {}: {}; reading it as immutable", path.string(), e.what());
    db = std::make_unique<sql::Db>(path, sql::Access::Immutable, options.busy_timeout_ms);
    p = inspect(*db);
  }
  switch (p.state) {
    case State::Current: return db;
    case State::Empty: MPK_THROW(Cache) << "kernel cache " << path.string() << " is empty: not an mpk kernel cache";
    case State::Older:
      // v3 only added the tunings table: a v2 file's kernels read as they are (and it holds no
      // tuning results), so an export from 0.4 imports and a write-protected v2 cache serves.
      if (p.version >= kFirstReadableVersion) return db;
      MPK_THROW(Cache) << "kernel cache " << path.string() << " has schema v" << p.version
                       << (asked ? "; open it read-write once to migrate it to v"
                                 : " and cannot be migrated here (write-protected) to v")
                       << kSchemaVersion;
    case State::Damaged: {
      std::ostringstream m;
      m << "kernel cache " << path.string() << " is damaged (" << p.detail << ")"
        << (asked ? "; open it read-write to set it aside and start it afresh"
                  : " and cannot be set aside here (write-protected)");
      throw DamagedCacheError(m.str());
    }
    case State::Foreign:
    case State::Newer: MPK_THROW(Cache) << "kernel cache " << path.string() << ": " << p.detail;
  }
  MPK_THROW(Internal) << "unreachable";
}

void note_moved(const fs::path& path, std::optional<fs::path> to, const std::string& why,
                std::vector<MovedAside>* moved) {
  if (!to) return;
  if (moved) {
    moved->push_back({path, *to, why});
  } else {
    log(LogLevel::Warn, "kernel cache {} is unusable ({}); kept a copy at {} and started it afresh", path.string(),
        why, to->string());
  }
}

}  // namespace

fs::path keep_copy(const fs::path& path) {
  std::string base = path.string() + ".corrupt-" + std::to_string(std::time(nullptr));
  fs::path target = base;
  std::error_code ec;
  auto taken = [&](const fs::path& t) {
    for (const char* suffix : {"", "-wal", "-journal", "-shm"})
      if (fs::exists(t.string() + suffix, ec)) return true;
    return false;
  };
  for (int i = 1; taken(target); ++i) target = base + "-" + std::to_string(i);
  std::vector<fs::path> made;
  auto copy = [&](const fs::path& from, const fs::path& to) {
    std::error_code failed;
    fs::copy_file(from, to, failed);
    made.push_back(to);
    if (!failed) return;
    for (const fs::path& m : made) fs::remove(m, ec);  // no partial copy left behind
    MPK_THROW(Io) << "cannot keep a copy of damaged kernel cache " << path.string() << " at " << to.string() << ": "
                  << failed.message();
  };
  copy(path, target);
  // Committed transactions may still sit in the WAL: the copy reads as the file did only with
  // it beside it (salvage opens it so). A hot journal is kept for inspection.
  for (const char* suffix : {"-wal", "-journal"}) {
    fs::path companion = path.string() + suffix;
    if (fs::exists(companion, ec)) copy(companion, target.string() + suffix);
  }
  return target;
}

std::optional<fs::path> set_aside_if_damaged(sql::Db& db) {
  FolderLock lock(db.path().parent_path());
  if (db.file_moved()) return std::nullopt;
  // Another process that met the same damage may have reset the file meanwhile: check again
  // under the lock, so that a file is reset once and a fresh one never. integrity_check, not
  // quick_check: an index that disagrees with its table fails a lookup with SQLITE_CORRUPT
  // and only the full check sees it.
  State state = inspect(db).state;
  bool damaged = state == State::Damaged || state == State::Foreign;
  if (!damaged) {
    try {
      damaged = db.query_text("PRAGMA integrity_check(1)") != "ok";
    } catch (const sql::SqliteError& e) {
      if (!e.is_corruption()) throw;
      damaged = true;
    }
  }
  if (!damaged) return std::nullopt;
  fs::path copy;
  {
    // A read transaction where the file still allows one, so that no checkpoint restarts the
    // WAL between the copies of the file and of its WAL.
    bool reading = false;
    try {
      db.exec("BEGIN");
      reading = true;
      db.query_int("SELECT count(*) FROM sqlite_master");
    } catch (const sql::SqliteError&) {
    }
    try {
      copy = keep_copy(db.path());
    } catch (...) {
      if (reading) db.exec("ROLLBACK");
      throw;
    }
    if (reading) db.exec("ROLLBACK");
  }
  try {
    db.reset_database();
    // The schema at once, under the lock: another process never finds the file empty.
    migrate(db);
  } catch (...) {
    // The copy goes only where the file still holds what was copied: once the reset took
    // effect (even where its call or the schema's reported an error after), the copy is the
    // only place its entries are. Emptied: no application id, version or object; reset with
    // the schema written: ours, current, no entry.
    std::optional<bool> reset;
    try {
      const int64_t objects = db.query_int("SELECT count(*) FROM sqlite_master");
      const int64_t id = db.query_int("PRAGMA application_id"), version = db.query_int("PRAGMA user_version");
      reset = (objects == 0 && id == 0 && version == 0) ||
              (id == kApplicationId && version == kSchemaVersion &&
               db.query_int("SELECT count(*) FROM kernels") == 0);
    } catch (...) {
    }
    if (reset && !*reset) {
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-journal"}) fs::remove(copy.string() + suffix, ec);
      throw;
    }
    if (!reset) {  // not known: the copy stays, and is named
      log(LogLevel::Warn, "kernel cache {}: recovery failed; kept a copy of the damaged file at {}",
          db.path().string(), copy.string());
      throw;
    }
    // The caller opens it again, writes the schema if missing and salvages the copy.
    log(LogLevel::Debug, "kernel cache {}: reset, the rest of the recovery left to the next open",
        db.path().string());
  }
  return copy;
}

std::unique_ptr<sql::Db> open_database(const fs::path& given, const OpenOptions& options,
                                       std::vector<MovedAside>* moved_aside) {
  // Through a symbolic link, SQLite keeps -wal and -shm beside the file it points at: the
  // copies of a recovery and the folder lock must be taken there too.
  std::error_code canonical_error;
  fs::path path = fs::weakly_canonical(given, canonical_error);
  if (canonical_error) path = given;
  if (options.read_only) return open_read_only(path, options, /*asked=*/true);
  fs::path folder = path.parent_path();
  if (cache_file_exists(path)) {
    // Without write access to the file or its folder (WAL creates -wal and -shm there), the
    // file is still good for reading.
    if (!writable(path) || !writable(folder)) return open_read_only(path, options, /*asked=*/false);
  } else if (!folder.empty()) {
    std::error_code ec;
    fs::create_directories(folder, ec);
    MPK_CHECK(!ec, Io) << "cannot create kernel cache folder " << folder.string() << ": " << ec.message();
  }
  constexpr int kAttempts = 5;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    // Before the next attempt, while another opener initialises or recovers the file.
    auto back_off = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(5 * (attempt + 1))); };
    std::unique_ptr<sql::Db> db;
    std::string damage;  // an error that damage raised on the way (handled after the catch)
    try {
      db = std::make_unique<sql::Db>(path, sql::Access::ReadWrite, options.busy_timeout_ms);
      Probe p = inspect(*db);
      if (p.state == State::Newer)
        MPK_THROW(Cache) << "kernel cache " << path.string() << ": " << p.detail;
      if (p.state == State::Damaged || p.state == State::Foreign) {
        note_moved(path, set_aside_if_damaged(*db), p.detail, moved_aside);
        continue;
      }
      if (db->is_read_only()) return open_read_only(path, options, /*asked=*/false);
      if (p.state == State::Empty) {
        // Only effective before the first table exists; lets pruning return pages to the OS.
        db->exec("PRAGMA auto_vacuum = INCREMENTAL");
      }
      if (p.state != State::Current) migrate(*db);
      if (set_journal_mode(*db, "wal", options.busy_timeout_ms) != "wal")
        log(LogLevel::Warn, "kernel cache {}: WAL mode unavailable, using a rollback journal",
            path.string());
      // WAL keeps committed transactions across a process crash with NORMAL; only a power loss
      // may drop the last ones, which a cache can afford.
      db->exec("PRAGMA synchronous = NORMAL");
      return db;
    } catch (const sql::SqliteError& e) {
      // At any step, an I/O error means the file was replaced under this connection (open
      // again); a lock held past the busy timeout by another opener's initialisation or
      // recovery is retried the same way.
      if (e.is_file_moved() || e.is_busy()) {
        back_off();
        continue;
      }
      if (!e.is_corruption() || !db) throw;
      damage = e.what();
    }
    try {
      note_moved(path, set_aside_if_damaged(*db), damage, moved_aside);
    } catch (const sql::SqliteError& e) {
      if (!e.is_file_moved() && !e.is_busy()) throw;
      back_off();
    }
  }
  MPK_THROW(Cache) << "kernel cache " << path.string() << " could not be opened after " << kAttempts
                   << " recovery attempts";
}

}  // namespace mpk::cache
