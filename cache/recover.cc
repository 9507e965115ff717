// Damage met after the open: setting the file aside, salvaging what still reads back intact,
// and reading a damaged file row by row.
#include <sqlite3.h>
#include <sys/statvfs.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache_impl.h"
#include "cache/schema.h"
#include "cache/sha256.h"

namespace mpk::cache {
namespace fs = std::filesystem;
namespace {

// Bounds the memory a salvage holds in cubins before writing them.
constexpr uint64_t kSalvageBatchBytes = uint64_t(32) << 20;

// Row ids listed from both ends of the table: a damaged page stops a listing, so the
// second direction reaches the rows behind it.
std::vector<int64_t> readable_ids(sql::Db& db, bool& incomplete) {
  std::set<int64_t> ids;
  for (const char* q : {"SELECT id FROM kernels ORDER BY id", "SELECT id FROM kernels ORDER BY id DESC"}) {
    try {
      sql::Stmt s(db, q);
      while (s.step())
        if (!ids.insert(s.int64(0)).second) break;  // met the other direction's rows
    } catch (const sql::SqliteError&) {
      incomplete = true;
    }
  }
  return {ids.begin(), ids.end()};
}

}  // namespace

bool entry_is_sound(const Entry& e) {
  return entry_is_intact(e) && is_sha256_hex(e.key) && nlohmann::json::accept(e.params_json) &&
         nlohmann::json::accept(e.verification_json) && (!e.time_us || (std::isfinite(*e.time_us) && *e.time_us > 0));
}

ScanLoss scan_readable(sql::Db& db, const std::function<void(Entry&&, bool ok)>& visit) {
  ScanLoss loss;
  std::vector<int64_t> ids = readable_ids(db, loss.incomplete);
  sql::Stmt one(db, "SELECT " MPK_CACHE_INFO_COLUMNS ", b.data FROM kernels k "
                    "LEFT JOIN blobs b ON b.id = k.id WHERE k.id = ?1");
  for (int64_t id : ids) {
    Entry e;
    try {
      one.reset();
      one.bind(1, id);
      if (!one.step()) continue;
      e = read_entry(one);
    } catch (const sql::SqliteError&) {
      ++loss.rows;
      continue;
    }
    bool ok = entry_is_intact(e);
    visit(std::move(e), ok);
  }
  return loss;
}

uint64_t Cache::Impl::salvage_locked(const fs::path& from) {
  std::vector<Entry> batch;
  uint64_t batch_bytes = 0, kept = 0;
  auto flush = [&] {
    sql::Transaction txn(*db);
    for (const Entry& e : batch)
      if (store_locked(e, Conflict::ReplaceIfBetter) != StoreOutcome::KeptExisting) ++kept;
    txn.commit();
    batch.clear();
    batch_bytes = 0;
  };
  try {
    // Without a WAL to replay, immutable reads leave nothing beside the file (no -shm).
    std::error_code ec;
    bool wal = fs::file_size(from.string() + "-wal", ec) > 0 && !ec;
    sql::Db src(from, wal ? sql::Access::ReadOnly : sql::Access::Immutable, 0);
    // Only our own current schema is read; anything else has nothing to give.
    if (src.query_int("PRAGMA application_id") != kApplicationId ||
        src.query_int("PRAGMA user_version") < kFirstReadableVersion)
      return 0;
    scan_readable(src, [&](Entry&& e, bool) {
      if (!entry_is_sound(e)) return;
      batch_bytes += e.cubin.size();
      batch.push_back(std::move(e));
      if (batch_bytes >= kSalvageBatchBytes) flush();
    });
    if (!batch.empty()) flush();
    const std::vector<Tuning> tunings = read_tunings(src, /*partial=*/true);
    sql::Transaction txn(*db);
    for (const Tuning& t : tunings) store_tuning_locked(t, /*newer_only=*/true);
    txn.commit();
  } catch (const Error& e) {
    // The fresh file stays as it is: a cache may lose entries, never serve a wrong one.
    log(LogLevel::Debug, "kernel cache: salvaging {} stopped: {}", from.string(), e.what());
  }
  return kept;
}

void Cache::Impl::open_locked(std::vector<MovedAside> moved) {
  statements.clear();
  db.reset();
  try {
    db = open_database(options.path, {read_only, options.busy_timeout_ms}, &moved);
  } catch (const Error& e) {
    // Copies already kept are not salvaged by this open: say where they are.
    for (const MovedAside& m : moved)
      log(LogLevel::Warn, "kernel cache {} is unusable ({}); kept a copy at {}, not salvaged: {}", m.from.string(),
          m.why, m.to.string(), e.what());
    throw;
  }
  for (const MovedAside& m : moved) {
    uint64_t kept = salvage_locked(m.to);
    ++counters.files_moved_aside;
    moved_unreported.push_back(m.to.string());
    log(LogLevel::Warn, "kernel cache {} is unusable ({}); kept a copy at {} and started it afresh{}",
        m.from.string(), m.why, m.to.string(),
        kept ? fmt::format(" with the {} intact entries it held", kept) : std::string());
  }
}

bool Cache::Impl::repair_locked(const sql::SqliteError& e) {
  if (!db) return false;
  if (db->file_moved() || e.is_file_moved()) {
    open_locked({});
    return true;
  }
  if (read_only || e.is_busy() || e.is_read_only_refusal() || !damaged_locked(e)) return false;
  statements.clear();
  std::vector<MovedAside> moved;
  // Another process may have reset the file since: then this only reopens.
  if (auto to = set_aside_if_damaged(*db)) moved.push_back({options.path, *to, e.what()});
  open_locked(std::move(moved));
  return true;
}

bool Cache::Impl::damaged_locked(const sql::SqliteError& e) {
  if (e.is_corruption()) return true;
  // Damage also shows as other errors (a page that looks full, an index that disagrees with
  // its table). Those are told apart by checking the file, which reads all of it: not for a
  // disk that is really full.
  int primary = e.code() & 0xff;
  bool suspect = primary == SQLITE_CONSTRAINT || primary == SQLITE_MISMATCH || primary == SQLITE_TOOBIG ||
                 primary == SQLITE_RANGE || primary == SQLITE_FORMAT || primary == SQLITE_INTERNAL;
  if (primary == SQLITE_FULL) {
    struct statvfs fs_stat {};
    fs::path folder = options.path.parent_path();
    suspect = ::statvfs(folder.empty() ? "." : folder.c_str(), &fs_stat) == 0 &&
              uint64_t(fs_stat.f_bavail) * fs_stat.f_frsize >= (uint64_t(64) << 20);
  }
  if (!suspect) return false;
  try {
    return db->query_text("PRAGMA quick_check") != "ok";
  } catch (const sql::SqliteError& q) {
    return q.is_corruption();
  }
}

}  // namespace mpk::cache
