// Export and import. The exchange format is a cache database file itself (the current schema): it can
// be opened in place, copied between machines, and merged with import.
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/cache_impl.h"
#include "cache/paths.h"

namespace mpk::cache {
namespace fs = std::filesystem;
namespace {

// Batches bound both the transaction length and the memory held by cubins in flight.
constexpr size_t kBatchEntries = 256;
constexpr uint64_t kBatchBytes = uint64_t(32) << 20;

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec) && !ec;
}

using Visit = std::function<void(Entry&&, bool ok)>;
using Scan = std::function<void(const Visit&)>;

// Streams the good entries that `scan` visits into `sink` in batches.
void copy_entries(const Scan& scan, TransferResult& result, const std::function<void(Entry&)>& adjust,
                  const std::function<void(const std::vector<Entry>&)>& sink) {
  std::vector<Entry> batch;
  uint64_t batch_bytes = 0;
  scan([&](Entry&& e, bool ok) {
    if (!ok) {
      ++result.skipped_corrupt;
      log(LogLevel::Warn, "kernel cache transfer: skipping damaged entry {}", e.key);
      return;
    }
    adjust(e);
    batch_bytes += e.cubin.size();
    batch.push_back(std::move(e));
    if (batch.size() >= kBatchEntries || batch_bytes >= kBatchBytes) {
      sink(batch);
      batch.clear();
      batch_bytes = 0;
    }
  });
  if (!batch.empty()) sink(batch);
}

}  // namespace

uint64_t Cache::Impl::store_tunings(const std::vector<Tuning>& tunings) {
  return with_db([&] {
    sql::Transaction txn(*db);
    uint64_t stored = 0;
    for (const Tuning& t : tunings) stored += store_tuning_locked(t, /*newer_only=*/true);
    txn.commit();
    return stored;
  });
}

void Cache::Impl::store_batch(const std::vector<Entry>& batch, Conflict conflict, TransferResult& result) {
  TransferResult r = with_db([&] {
    sql::Transaction txn(*db);
    TransferResult counts;
    for (const Entry& e : batch) {
      // Without its key text (migrated from v1), an entry's key cannot be checked: it may fill
      // a free key but never replace an entry, whatever its record says.
      switch (store_locked(e, e.key_text.empty() ? Conflict::KeepExisting : conflict)) {
        case StoreOutcome::Added: ++counts.added; break;
        case StoreOutcome::Replaced: ++counts.replaced; break;
        case StoreOutcome::KeptExisting: ++counts.kept_existing; break;
      }
    }
    txn.commit();
    return counts;
  });
  result.added += r.added;
  result.replaced += r.replaced;
  result.kept_existing += r.kept_existing;
}

namespace {

// Removes a database file's companions, and with `file_too` the file.
void remove_database_files(const fs::path& file, bool file_too = true) {
  std::error_code ec;
  for (const char* suffix : {"-wal", "-shm", "-journal"}) fs::remove(file.string() + suffix, ec);
  if (file_too) fs::remove(file, ec);
}

}  // namespace

TransferResult Cache::export_to(const fs::path& file, bool overwrite) {
  MPK_CHECK(!file.empty(), InvalidArgument) << "export: empty file name";
  MPK_CHECK(!same_file(file, path()), InvalidArgument) << "export: " << file.string() << " is this cache";
  // A missing folder is more likely a typo than a wish to create it.
  fs::path folder = file.parent_path();
  std::error_code ec;
  MPK_CHECK(folder.empty() || fs::is_directory(folder, ec), NotFound)
      << "export: folder " << folder.string() << " does not exist";
  MPK_CHECK(!regular_file_exists(file, "export target") || overwrite, InvalidArgument)
      << "export: " << file.string() << " already exists";
  // Written beside the target and renamed over it once complete: an export that fails part way
  // (a full disk, damage met in this cache) leaves the previous file as it was and no partial one.
  const fs::path part = file.string() + ".part-" + std::to_string(::getpid());
  remove_database_files(part);
  TransferResult result;
  try {
    result = export_into(part);
    // Closed cleanly, the file stands alone; a companion left means it did not close (a failed
    // write or sync on the way), and the file may need what the companion holds.
    for (const char* suffix : {"-wal", "-journal"}) {
      const fs::path companion = part.string() + suffix;
      MPK_CHECK(!fs::exists(companion, ec), Io)
          << "export: " << file.string() << " could not be completed (" << companion.filename().string()
          << " left behind)";
    }
    // A companion of the target (an earlier export's, or a stray one) must not be read with the
    // new file; the file itself is replaced by the rename, in one step.
    remove_database_files(file, /*file_too=*/false);
    std::error_code renamed;
    fs::rename(part, file, renamed);
    MPK_CHECK(!renamed, Io) << "export: cannot move " << part.string() << " to " << file.string() << ": "
                            << renamed.message();
  } catch (...) {
    remove_database_files(part);
    throw;
  }
  return result;
}

TransferResult Cache::export_into(const fs::path& file) {
  CacheOptions dest_options;
  dest_options.path = file;
  dest_options.busy_timeout_ms = impl_->options.busy_timeout_ms;
  Cache dest(std::move(dest_options));
  TransferResult result;
  // Damage met while reading sets this cache's file aside; the export is not run again on
  // the fresh file, whose entries went to the destination already.
  Impl& I = *impl_;
  Scan scan = [&](const Visit& visit) {
    I.with_db([&] { I.scan_locked([&](int64_t, Entry&& e, bool ok) { visit(std::move(e), ok); }); },
              /*retry=*/false);
  };
  copy_entries(
      scan, result, [](Entry&) {},
      [&](const std::vector<Entry>& batch) { dest.impl_->store_batch(batch, Conflict::ReplaceIfBetter, result); });
  result.tunings = dest.impl_->store_tunings(I.with_db([&] { return read_tunings(*I.db); }, /*retry=*/false));
  // A rollback journal leaves one self-contained file that read-only users can open without
  // creating -wal/-shm companions; opening it read-write turns WAL back on.
  std::lock_guard lock(dest.impl_->mu);
  dest.impl_->db->query_text("PRAGMA journal_mode = DELETE");
  return result;
}

TransferResult Cache::import_from(const fs::path& file) {
  Impl& I = *impl_;
  MPK_CHECK(!I.read_only, Cache) << "kernel cache " << path().string() << " is read-only: import refused";
  MPK_CHECK(regular_file_exists(file, "import source"), NotFound) << "import: no file " << file.string();
  MPK_CHECK(!same_file(file, path()), InvalidArgument) << "import: " << file.string() << " is this cache";
  CacheOptions source_options;
  source_options.path = file;
  source_options.read_only = true;
  Cache source(std::move(source_options));
  TransferResult result;
  int64_t now = I.now();
  // The source is read row by row: a damaged source gives what it still holds intact.
  Impl& S = *source.impl_;
  ScanLoss loss;
  // Only sound entries (as salvage takes them).
  Scan scan = [&](const Visit& visit) {
    std::lock_guard lock(S.mu);
    sql::Transaction read(*S.db, /*immediate=*/false);
    loss = scan_readable(*S.db, [&](Entry&& e, bool ok) {
      const bool sound = ok && entry_is_sound(e);
      visit(std::move(e), sound);
    });
  };
  copy_entries(
      scan, result, [&](Entry& e) { e.last_used = now; },
      [&](const std::vector<Entry>& batch) { I.store_batch(batch, Conflict::ReplaceIfBetter, result); });
  std::vector<Tuning> tunings;
  {
    std::lock_guard lock(S.mu);
    tunings = read_tunings(*S.db, /*partial=*/true);
  }
  result.tunings = I.store_tunings(tunings);
  if (loss.rows || loss.incomplete) {
    result.skipped_corrupt += loss.rows + (loss.incomplete ? 1 : 0);
    log(LogLevel::Warn, "kernel cache import: {} is damaged: {} entries could not be read{}", file.string(),
        loss.rows, loss.incomplete ? ", and the list of entries broke off" : "");
  }
  if (I.options.max_bytes) {
    I.with_db([&] {
      if (I.total_bytes_locked() > I.options.max_bytes) I.prune_locked(I.options.max_bytes, {});
    });
  }
  return result;
}

}  // namespace mpk::cache
