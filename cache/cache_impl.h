// Internals shared by the files that implement Cache (not part of its interface).
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/cache.h"
#include "cache/schema.h"
#include "cache/sqlite_db.h"

namespace mpk::cache {

// Metadata columns in the order read_info expects (`k` is kernels, `b` blobs); a query that
// also wants the cubin selects b.data right after them, as column kInfoColumnCount.
#define MPK_CACHE_INFO_COLUMNS                                                              \
  "k.id, k.key, k.key_text, k.checksum, k.params, k.time_us, k.verification, k.host, "      \
  "k.created, k.mpk_version, k.last_used, k.bytes, length(b.data)"
inline constexpr int kInfoColumnCount = 13;

struct AtomicCounters {
  std::atomic<uint64_t> hits{0}, misses{0}, publishes{0}, publishes_kept_existing{0},
      publish_failures{0}, builds{0}, build_waits{0}, corrupt_entries_dropped{0}, pruned_entries{0},
      files_moved_aside{0};
  CacheCounters snapshot() const;
};

enum class Conflict {
  ReplaceUnlessWorse,  // publish: the newcomer wins ties
  ReplaceIfBetter,     // import: the existing entry wins ties
  KeepExisting,        // never replace (an entry whose key cannot be checked: no key text)
};
enum class StoreOutcome { Added, Replaced, KeptExisting };

struct Cache::Impl {
  CacheOptions options;
  bool read_only = false;
  AtomicCounters counters;

  std::mutex mu;  // guards db, statements and moved_unreported
  std::unique_ptr<sql::Db> db;  // null only after a failed reopen; with_db opens it again
  std::unordered_map<const char*, std::unique_ptr<sql::Stmt>> statements;
  std::vector<std::string> moved_unreported;  // copies of files set aside since the last verify()

  std::mutex inflight_mu;
  std::unordered_map<std::string, std::shared_future<Entry>> inflight;

  int64_t now() const;
  // A prepared statement for a string literal, reset when the returned handle goes away.
  struct StmtRef {
    sql::Stmt& stmt;
    ~StmtRef() { stmt.reset(); }
    sql::Stmt* operator->() { return &stmt; }
    sql::Stmt& operator*() { return stmt; }
  };
  StmtRef stmt(const char* sql);

  // Runs op() with `mu` held. Page-level damage met on the way (SQLITE_CORRUPT/NOTADB) sets
  // the file aside (a copy kept, the file started afresh), keeps its intact entries and, with
  // `retry`, runs op() once more; a file replaced meanwhile, or an I/O error, is reopened the
  // same way. A read-only cache changes nothing: its damage is thrown.
  template <class F>
  auto with_db(F&& op, bool retry = true) -> decltype(op()) {
    std::lock_guard lock(mu);
    if (!db) open_locked({});
    try {
      return op();
    } catch (const sql::SqliteError& e) {
      if (!repair_locked(e) || !retry) throw;
    }
    return op();
  }

  // All below expect `mu` held.
  // (Re)opens the file; reports and salvages `moved` and whatever the open sets aside.
  void open_locked(std::vector<MovedAside> moved);
  // Handles an error met by an operation: true when the file was replaced or reopened.
  bool repair_locked(const sql::SqliteError& e);
  // `e` comes from a damaged file: SQLITE_CORRUPT/NOTADB, or an error that damage can also
  // cause when quick_check then finds damage.
  bool damaged_locked(const sql::SqliteError& e);
  // Copies the entries of a damaged file's copy that still read back intact; returns how many.
  uint64_t salvage_locked(const std::filesystem::path& from);
  std::optional<Entry> load_locked(std::string_view key);
  // Deletes damaged entries by row id (ids are never reused) and counts them in meta.
  void drop_locked(const std::vector<int64_t>& ids);
  // Writes a checked tuning result inside the caller's transaction; `newer_only`: only over an
  // older result (import), else always. Returns whether it was written.
  bool store_tuning_locked(const Tuning& t, bool newer_only);
  // Takes `mu` and stores intact tuning results over older ones, in one transaction; returns
  // how many were written.
  uint64_t store_tunings(const std::vector<Tuning>& tunings);
  // Writes one complete entry inside the caller's transaction.
  StoreOutcome store_locked(const Entry& e, Conflict conflict);
  uint64_t total_bytes_locked();
  // Takes `mu` and stores a batch of complete entries in one transaction, counting outcomes.
  void store_batch(const std::vector<Entry>& batch, Conflict conflict, TransferResult& result);
  PruneResult prune_locked(uint64_t max_bytes, std::string_view keep_key);
  // Checksums, then quick_check, into `r`; a failed quick_check is thrown as corruption
  // unless read-only.
  void verify_locked(VerifyResult& r);
  // Calls visit(id, entry, ok) for every entry, cubin included, in one read transaction; ok
  // is false on a checksum or key mismatch (or a missing cubin).
  void scan_locked(const std::function<void(int64_t id, Entry&&, bool ok)>& visit);
};

// What scan_readable could not read.
struct ScanLoss {
  uint64_t rows = 0;        // rows listed but unreadable
  bool incomplete = false;  // the listing itself broke off: rows beyond it are unknown
};

// Calls visit(entry, ok) for every entry of `db` that can be read, each row on its own and the
// table listed from both ends, so damage costs only the rows it hits. For reading damaged
// files; ok as in scan_locked.
ScanLoss scan_readable(sql::Db& db, const std::function<void(Entry&&, bool ok)>& visit);
// The intact tuning results of `db`, read in one statement. Damage that stops the statement
// throws, unless `partial` (a damaged file read for what it still holds), where it ends the list.
std::vector<Tuning> read_tunings(sql::Db& db, bool partial = false);

EntryInfo read_info(const sql::Stmt& s);
// read_info's columns followed by the cubin.
Entry read_entry(const sql::Stmt& s);
// The checksum and key of a stored entry match its content.
bool entry_is_intact(const Entry& e);
// Worth taking from another file (salvage, import): intact, under a key of the right form, with
// JSON fields that parse and a measured time that is a positive number when present.
bool entry_is_sound(const Entry& e);

}  // namespace mpk::cache
