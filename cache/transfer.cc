// Export and import. The exchange format is a cache database file itself (schema v2): it can
// be opened in place, copied between machines, and merged with import.
#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/cache_impl.h"

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

// Streams the good entries of `source` (its mutex held) into `sink` in batches.
void copy_entries(Cache::Impl& source, TransferResult& result, const std::function<void(Entry&)>& adjust,
                  const std::function<void(const std::vector<Entry>&)>& sink) {
  std::vector<Entry> batch;
  uint64_t batch_bytes = 0;
  std::lock_guard lock(source.mu);
  source.scan_locked([&](int64_t, Entry&& e, bool ok) {
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

void Cache::Impl::store_batch(const std::vector<Entry>& batch, Conflict conflict, TransferResult& result) {
  std::lock_guard lock(mu);
  sql::Transaction txn(*db);
  TransferResult r;
  for (const Entry& e : batch) {
    switch (store_locked(e, conflict)) {
      case StoreOutcome::Added: ++r.added; break;
      case StoreOutcome::Replaced: ++r.replaced; break;
      case StoreOutcome::KeptExisting: ++r.kept_existing; break;
    }
  }
  txn.commit();
  result.added += r.added;
  result.replaced += r.replaced;
  result.kept_existing += r.kept_existing;
}

TransferResult Cache::export_to(const fs::path& file, bool overwrite) {
  MPK_CHECK(!file.empty(), InvalidArgument) << "export: empty file name";
  MPK_CHECK(!same_file(file, path()), InvalidArgument) << "export: " << file.string() << " is this cache";
  std::error_code ec;
  if (fs::exists(file, ec)) {
    MPK_CHECK(overwrite, InvalidArgument) << "export: " << file.string() << " already exists";
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(file.string() + suffix, ec);
  }
  CacheOptions dest_options;
  dest_options.path = file;
  dest_options.busy_timeout_ms = impl_->options.busy_timeout_ms;
  Cache dest(std::move(dest_options));
  TransferResult result;
  copy_entries(
      *impl_, result, [](Entry&) {},
      [&](const std::vector<Entry>& batch) { dest.impl_->store_batch(batch, Conflict::ReplaceIfBetter, result); });
  // A rollback journal leaves one self-contained file that read-only users can open without
  // creating -wal/-shm companions; opening it read-write turns WAL back on.
  std::lock_guard lock(dest.impl_->mu);
  dest.impl_->db->query_text("PRAGMA journal_mode = DELETE");
  return result;
}

TransferResult Cache::import_from(const fs::path& file) {
  Impl& I = *impl_;
  MPK_CHECK(!I.read_only, Cache) << "kernel cache " << path().string() << " is read-only: import refused";
  MPK_CHECK(!same_file(file, path()), InvalidArgument) << "import: " << file.string() << " is this cache";
  CacheOptions source_options;
  source_options.path = file;
  source_options.read_only = true;
  Cache source(std::move(source_options));
  TransferResult result;
  int64_t now = I.now();
  copy_entries(
      *source.impl_, result, [&](Entry& e) { e.last_used = now; },
      [&](const std::vector<Entry>& batch) { I.store_batch(batch, Conflict::ReplaceIfBetter, result); });
  if (I.options.max_bytes) {
    std::lock_guard lock(I.mu);
    if (I.total_bytes_locked() > I.options.max_bytes) I.prune_locked(I.options.max_bytes, {});
  }
  return result;
}

}  // namespace mpk::cache
