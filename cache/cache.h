// The kernel cache: a SQLite file mapping a CacheKey to a compiled kernel (Entry).
//
//   cache::Cache cache({});   // $MPK_CACHE_DIR/kernels.db or ~/.cache/mpk/kernels.db
//   cache::Entry e = cache.get_or_build(key, [&] { return compile_and_verify(task); });
//
// Guarantees: every load re-checks the cubin's SHA-256 (a bad entry is deleted, counted in
// corrupt_entries_dropped, and reported as a miss so the caller rebuilds); one transaction per
// publish; several processes may share one file (WAL, busy timeout); a damaged or foreign file
// is set aside (a copy kept as <path>.corrupt-<unix time>, the file emptied in place, never
// renamed under the other processes' connections), whether the damage is found on open or by
// any later operation (SQLite reports a malformed page), and the entries that still read back
// intact are copied from the copy into the emptied file (an I/O error part way leaves the
// entries in the file or in the copy: the copy is deleted only while the file still holds
// them). A read-only cache
// never changes the file; it opens even in a folder the user cannot write. A Cache object is
// thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "cache/tuning.h"

namespace mpk::cache {

// Error(Cache) for a damaged cache file that could not be set aside here (opened read-only, or
// write-protected): its own type, so that a verification reports it as damage found.
class DamagedCacheError : public Error {
 public:
  explicit DamagedCacheError(std::string message) : Error(ErrorKind::Cache, std::move(message)) {}
};

struct CacheOptions {
  std::filesystem::path path;  // empty: default_cache_path()
  // SQLITE_OPEN_READONLY: publishes throw Error(Cache), loads do not update last_used, and
  // a missing, old or damaged file is an error instead of being created, migrated or replaced.
  // A file that this process may not write, or in a folder it may not write, is opened
  // read-only even when this is false (with a warning).
  bool read_only = false;
  uint64_t max_bytes = 0;       // payload budget enforced after each publish/import; 0: none
  int busy_timeout_ms = 10000;  // how long a writer waits for another process's transaction
  int64_t touch_interval_s = 60;  // a hit rewrites last_used only when older than this
  std::function<int64_t()> clock;  // unix seconds; empty: the system clock (tests inject one)
};

// What this Cache object has done since it was opened.
struct CacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t publishes = 0;          // entries written
  uint64_t publishes_kept_existing = 0;  // publishes that found a better entry already there
  uint64_t publish_failures = 0;   // get_or_build could not store what it built
  uint64_t builds = 0;             // builder calls made by get_or_build
  uint64_t build_waits = 0;        // get_or_build calls that joined a build in progress
  uint64_t corrupt_entries_dropped = 0;
  uint64_t pruned_entries = 0;
  uint64_t files_moved_aside = 0;  // damaged files set aside (copied) and started afresh
};

struct CacheStats {
  std::string path;
  bool read_only = false;
  int schema_version = 0;
  uint64_t entries = 0;
  uint64_t verified_entries = 0;
  uint64_t tunings = 0;
  uint64_t payload_bytes = 0;  // what max_bytes limits (see entry_bytes)
  uint64_t file_bytes = 0;     // database pages, without the WAL
  uint64_t free_bytes = 0;     // unused pages inside the file
  uint64_t wal_bytes = 0;
  int64_t oldest_use = 0;  // unix seconds; 0 when empty
  int64_t newest_use = 0;
  uint64_t corrupt_entries_dropped_total = 0;  // by every process, since the file was created
  CacheCounters session;
};

struct PruneResult {
  uint64_t removed_entries = 0;
  uint64_t removed_bytes = 0;
  uint64_t remaining_entries = 0;
  uint64_t remaining_bytes = 0;
};

struct VerifyResult {
  uint64_t checked = 0;
  std::vector<std::string> bad_keys;  // dropped unless the cache is read-only
  bool integrity_ok = true;           // SQLite's quick_check, and every row could be read
  std::string integrity_message;
  // Copies of the damaged files this Cache set aside (on open, in verify, or in any operation
  // since the last verify); `checked` counts the entries of the fresh file.
  std::vector<std::string> moved_aside;
  bool damage_found() const { return !bad_keys.empty() || !integrity_ok || !moved_aside.empty(); }
};

// Export and import counts. An export file is itself a cache database (current schema), so it can
// be opened directly, copied to another machine, or imported.
struct TransferResult {
  uint64_t tunings = 0;  // tuning results copied (an import keeps the newer one per signature)
  uint64_t added = 0;
  uint64_t replaced = 0;         // an existing entry lost the conflict rule (is_better)
  uint64_t kept_existing = 0;    // the existing entry was at least as good
  uint64_t skipped_corrupt = 0;  // checksum or key mismatch in the source; not copied
};

class Cache {
 public:
  // Opens or creates the cache file (see open_database in schema.h for recovery rules).
  // Throws Error(Cache), Error(NotFound) (read-only, missing file) or Error(Io).
  explicit Cache(CacheOptions options);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The entry for `key`, or nullopt on a miss. A checksum mismatch drops the entry and is a miss.
  std::optional<Entry> load(const CacheKey& key);
  std::optional<Entry> load(std::string_view digest);

  // Stores `entry` under `key` in one transaction, filling key, key_text, checksum, last_used
  // and any provenance field left empty. An existing entry is replaced unless it is strictly
  // better (is_better); returns false when it was kept. Throws Error(Cache) when read-only and
  // Error(InvalidArgument) when a JSON field is not valid JSON.
  bool publish(const CacheKey& key, Entry entry);

  // load(key), or on a miss build() then publish. Concurrent calls for one key in this Cache
  // object wait for a single build and all get its result (or its exception). A failed or
  // refused publish (read-only cache) is logged and counted; the built entry is still returned.
  Entry get_or_build(const CacheKey& key, const std::function<Entry()>& build);

  // Entries without cubins, most recently used first; limit 0: all.
  std::vector<EntryInfo> list(size_t limit = 0);
  std::optional<EntryInfo> info(std::string_view digest);
  // Keys starting with `prefix` (hex, any case), sorted; at most `limit` (0: all).
  std::vector<std::string> find_keys(std::string_view prefix, size_t limit = 0);
  // Deletes one entry; false when absent. Throws Error(Cache) when read-only.
  bool erase(std::string_view digest);

  CacheStats stats();
  // Deletes least-recently-used entries until the payload fits `max_bytes`.
  PruneResult prune(uint64_t max_bytes);
  // Re-checks every checksum (and key against key_text) and drops the bad entries, then runs
  // SQLite's quick_check; a file that fails it is set aside like any page-level damage.
  VerifyResult verify();

  // Writes every good entry to a new cache file `file` (refuses an existing one unless
  // overwrite, and a missing folder: Error(NotFound)). Entries keep their provenance and
  // last_used. The file is written beside `file` and renamed over it when complete: a failed
  // export leaves what was there.
  TransferResult export_to(const std::filesystem::path& file, bool overwrite = false);
  // Merges the entries of a cache file (opened read-only, left untouched). On conflict the
  // better entry by is_better is kept, the existing one on a tie. Imported entries count as
  // used now. One transaction per batch of entries. Rows of a damaged source that cannot be
  // read, and entries that are not sound (a key not of SHA-256 form, JSON that does not parse,
  // a time that is not a positive number), count as skipped_corrupt; an entry without its key
  // text (migrated from v1: its key cannot be checked) never replaces one. Throws
  // Error(InvalidArgument) when `file` is not a regular file, Error(NotFound) when it is
  // missing.
  TransferResult import_from(const std::filesystem::path& file);

  // Tuning results (cache/tuning.h), one per signature. publish_tuning replaces the result
  // stored for its signature (a new search supersedes an old one); Error(InvalidArgument) for
  // fields that do not parse, Error(Cache) when read-only. tuning() drops (or, read-only,
  // ignores) a stored result that is not intact, like a kernel failing its checksum.
  void publish_tuning(Tuning t);
  std::optional<Tuning> tuning(std::string_view signature);
  std::vector<Tuning> tunings();  // newest first
  bool erase_tuning(std::string_view signature);

  CacheCounters counters() const;
  const std::filesystem::path& path() const;
  bool read_only() const;

  struct Impl;

 private:
  // export_to's work, into a new file.
  TransferResult export_into(const std::filesystem::path& file);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mpk::cache
