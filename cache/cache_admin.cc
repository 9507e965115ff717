// Listing, statistics, pruning and verification: the maintenance side of Cache.
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/cache_impl.h"
#include "cache/schema.h"

namespace mpk::cache {
namespace {

// SQLite's LIMIT takes -1 for "no limit".
int64_t sql_limit(size_t limit) { return limit ? int64_t(limit) : -1; }

}  // namespace

std::vector<EntryInfo> Cache::list(size_t limit) {
  Impl& I = *impl_;
  return I.with_db([&] {
    std::vector<EntryInfo> out;
    auto s = I.stmt("SELECT " MPK_CACHE_INFO_COLUMNS " FROM kernels k LEFT JOIN blobs b ON b.id = k.id "
                    "ORDER BY k.last_used DESC, k.id DESC LIMIT ?1");
    s->bind(1, sql_limit(limit));
    while (s->step()) out.push_back(read_info(*s));
    return out;
  });
}

std::optional<EntryInfo> Cache::info(std::string_view digest) {
  Impl& I = *impl_;
  return I.with_db([&]() -> std::optional<EntryInfo> {
    auto s = I.stmt("SELECT " MPK_CACHE_INFO_COLUMNS " FROM kernels k LEFT JOIN blobs b ON b.id = k.id "
                    "WHERE k.key = ?1");
    s->bind(1, digest);
    if (!s->step()) return std::nullopt;
    return read_info(*s);
  });
}

std::vector<std::string> Cache::find_keys(std::string_view prefix, size_t limit) {
  std::string lower;
  for (char c : prefix) {
    char l = char(std::tolower(static_cast<unsigned char>(c)));
    MPK_CHECK((l >= '0' && l <= '9') || (l >= 'a' && l <= 'f'), InvalidArgument)
        << "key prefix '" << prefix << "' is not hexadecimal";
    lower += l;
  }
  Impl& I = *impl_;
  return I.with_db([&] {
    // Keys are lower-case hex, so every key with this prefix sorts in [prefix, prefix + "g").
    auto s = I.stmt("SELECT key FROM kernels WHERE key >= ?1 AND key < ?2 ORDER BY key LIMIT ?3");
    s->bind(1, lower).bind(2, lower + "g").bind(3, sql_limit(limit));
    std::vector<std::string> keys;
    while (s->step()) keys.push_back(s->text(0));
    return keys;
  });
}

bool Cache::erase(std::string_view digest) {
  Impl& I = *impl_;
  MPK_CHECK(!I.read_only, Cache) << "kernel cache " << I.options.path.string() << " is read-only: erase refused";
  return I.with_db([&] {
    sql::Transaction txn(*I.db);
    I.stmt("DELETE FROM kernels WHERE key = ?1")->bind(1, digest).run();
    bool erased = I.db->changes() > 0;
    txn.commit();
    return erased;
  });
}

namespace {

void stats_locked(Cache::Impl& I, CacheStats& st) {
  // One read transaction, so the numbers agree with each other.
  sql::Transaction txn(*I.db, /*immediate=*/false);
  st.verified_entries = 0;
  st.schema_version = int(I.db->query_int("PRAGMA user_version"));
  {
    auto s = I.stmt("SELECT count(*), coalesce(min(last_used), 0), coalesce(max(last_used), 0) FROM kernels");
    s->step();
    st.entries = uint64_t(s->int64(0));
    st.oldest_use = s->int64(1);
    st.newest_use = s->int64(2);
  }
  {
    auto s = I.stmt("SELECT verification FROM kernels");
    while (s->step()) st.verified_entries += is_verified(s->text(0));
  }
  st.payload_bytes = I.total_bytes_locked();
  // A v2 file opened read-only has no tunings table.
  if (st.schema_version >= 3) st.tunings = uint64_t(I.db->query_int("SELECT count(*) FROM tunings"));
  {
    auto s = I.stmt("SELECT value FROM meta WHERE name = 'corrupt_entries_dropped'");
    if (s->step()) st.corrupt_entries_dropped_total = uint64_t(s->int64(0));
  }
  uint64_t page = uint64_t(I.db->query_int("PRAGMA page_size"));
  st.file_bytes = page * uint64_t(I.db->query_int("PRAGMA page_count"));
  st.free_bytes = page * uint64_t(I.db->query_int("PRAGMA freelist_count"));
  txn.commit();
}

}  // namespace

CacheStats Cache::stats() {
  Impl& I = *impl_;
  CacheStats st;
  st.path = I.options.path.string();
  st.read_only = I.read_only;
  I.with_db([&] { stats_locked(I, st); });
  st.session = I.counters.snapshot();
  std::error_code ec;
  auto wal = std::filesystem::file_size(I.options.path.string() + "-wal", ec);
  st.wal_bytes = ec ? 0 : wal;
  return st;
}

PruneResult Cache::Impl::prune_locked(uint64_t max_bytes, std::string_view keep_key) {
  PruneResult r;
  {
    sql::Transaction txn(*db);
    uint64_t total = total_bytes_locked();
    std::vector<int64_t> victims;
    if (total > max_bytes) {
      auto s = stmt("SELECT id, key, bytes FROM kernels ORDER BY last_used, id");
      while (total - r.removed_bytes > max_bytes && s->step()) {
        if (s->text(1) == keep_key) continue;
        victims.push_back(s->int64(0));
        r.removed_bytes += uint64_t(s->int64(2));
      }
    }
    for (int64_t id : victims) stmt("DELETE FROM kernels WHERE id = ?1")->bind(1, id).run();
    r.removed_entries = victims.size();
    r.remaining_bytes = total_bytes_locked();
    r.remaining_entries = uint64_t(db->query_int("SELECT count(*) FROM kernels"));
    txn.commit();
  }
  counters.pruned_entries += r.removed_entries;
  if (r.removed_entries) {
    // Returns freed pages to the file system (a no-op for files created before v2).
    try {
      db->exec("PRAGMA incremental_vacuum");
    } catch (const sql::SqliteError& e) {
      log(LogLevel::Debug, "kernel cache: incremental_vacuum failed: {}", e.what());
    }
  }
  return r;
}

PruneResult Cache::prune(uint64_t max_bytes) {
  Impl& I = *impl_;
  MPK_CHECK(!I.read_only, Cache) << "kernel cache " << I.options.path.string() << " is read-only: prune refused";
  return I.with_db([&] { return I.prune_locked(max_bytes, {}); });
}

void Cache::Impl::scan_locked(const std::function<void(int64_t id, Entry&&, bool ok)>& visit) {
  sql::Transaction txn(*db, /*immediate=*/false);
  {
    auto s = stmt("SELECT " MPK_CACHE_INFO_COLUMNS ", b.data FROM kernels k "
                  "LEFT JOIN blobs b ON b.id = k.id ORDER BY k.id");
    while (s->step()) {
      Entry e = read_entry(*s);
      bool ok = entry_is_intact(e);
      visit(s->int64(0), std::move(e), ok);
    }
  }
  txn.commit();
}

void Cache::Impl::verify_locked(VerifyResult& r) {
  r.checked = 0;
  std::vector<int64_t> ids;
  scan_locked([&](int64_t id, Entry&& e, bool ok) {
    ++r.checked;
    if (ok) return;
    r.bad_keys.push_back(e.key);
    ids.push_back(id);
  });
  if (!ids.empty()) {
    if (!read_only) drop_locked(ids);
    counters.corrupt_entries_dropped += ids.size();
    log(LogLevel::Warn, "kernel cache {}: {} of {} entries fail their checksum{}", options.path.string(),
        ids.size(), r.checked, read_only ? " (read-only: kept)" : "; dropped");
  }
  std::string check = db->query_text("PRAGMA quick_check");
  for (char& c : check)
    if (c == '\n') c = ' ';
  r.integrity_ok = check == "ok";
  r.integrity_message = check;
  // Damage outside the entries read (an index, the free list) is damage all the same.
  if (!r.integrity_ok && !read_only)
    throw sql::SqliteError(SQLITE_CORRUPT, "kernel cache " + options.path.string() + ": quick_check: " + check);
}

VerifyResult Cache::verify() {
  Impl& I = *impl_;
  VerifyResult r;  // bad entries found before the file is set aside stay reported
  try {
    I.with_db([&] { I.verify_locked(r); });
  } catch (const sql::SqliteError& e) {
    // Read-only: the damage stays where it is, and is reported.
    if (!e.is_corruption()) throw;
    r.integrity_ok = false;
    r.integrity_message = e.what();
  }
  std::lock_guard lock(I.mu);
  r.moved_aside = std::move(I.moved_unreported);
  I.moved_unreported.clear();
  return r;
}

}  // namespace mpk::cache
