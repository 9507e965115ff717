#include "cache/cache.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache_impl.h"
#include "cache/paths.h"
#include "cache/schema.h"
#include "cache/sha256.h"

namespace mpk::cache {
namespace {

// Fills everything publish owns; the caller's provenance fields win when set.
void prepare_entry(const CacheKey& key, Entry& e, int64_t now) {
  MPK_CHECK(!e.cubin.empty(), InvalidArgument) << "kernel cache: refusing to publish an empty cubin";
  MPK_CHECK(nlohmann::json::accept(e.params_json), InvalidArgument)
      << "kernel cache: params_json is not valid JSON: " << e.params_json.substr(0, 80);
  MPK_CHECK(nlohmann::json::accept(e.verification_json), InvalidArgument)
      << "kernel cache: verification_json is not valid JSON: " << e.verification_json.substr(0, 80);
  e.key_text = canonical_key_text(key);
  e.key = sha256_hex(e.key_text);
  e.checksum = sha256_hex(e.cubin.data(), e.cubin.size());
  Provenance local = local_provenance(now);
  if (e.provenance.host.empty()) e.provenance.host = local.host;
  if (e.provenance.unix_time == 0) e.provenance.unix_time = now;
  if (e.provenance.mpk_version.empty()) e.provenance.mpk_version = local.mpk_version;
  e.last_used = now;
}

}  // namespace

CacheCounters AtomicCounters::snapshot() const {
  CacheCounters c;
  c.hits = hits;
  c.misses = misses;
  c.publishes = publishes;
  c.publishes_kept_existing = publishes_kept_existing;
  c.publish_failures = publish_failures;
  c.builds = builds;
  c.build_waits = build_waits;
  c.corrupt_entries_dropped = corrupt_entries_dropped;
  c.pruned_entries = pruned_entries;
  c.files_moved_aside = files_moved_aside;
  return c;
}

EntryInfo read_info(const sql::Stmt& s) {
  EntryInfo info;
  info.key = s.text(1);
  info.key_text = s.text(2);
  info.checksum = s.text(3);
  info.params_json = s.text(4);
  info.time_us = s.opt_real(5);
  info.verification_json = s.text(6);
  info.provenance = {s.text(7), s.int64(8), s.text(9)};
  info.last_used = s.int64(10);
  info.bytes = uint64_t(s.int64(11));
  info.cubin_bytes = uint64_t(s.int64(12));
  info.verified = is_verified(info.verification_json);
  return info;
}

Entry read_entry(const sql::Stmt& s) {
  Entry e;
  e.key = s.text(1);
  e.key_text = s.text(2);
  e.checksum = s.text(3);
  e.params_json = s.text(4);
  e.time_us = s.opt_real(5);
  e.verification_json = s.text(6);
  e.provenance = {s.text(7), s.int64(8), s.text(9)};
  e.last_used = s.int64(10);
  e.cubin = s.blob(kInfoColumnCount);
  return e;
}

bool entry_is_intact(const Entry& e) {
  if (e.cubin.empty() || sha256_hex(e.cubin.data(), e.cubin.size()) != e.checksum) return false;
  return e.key_text.empty() || sha256_hex(e.key_text) == e.key;
}

int64_t Cache::Impl::now() const { return options.clock ? options.clock() : int64_t(std::time(nullptr)); }

Cache::Impl::StmtRef Cache::Impl::stmt(const char* sql) {
  auto& slot = statements[sql];
  if (!slot) slot = std::make_unique<sql::Stmt>(*db, sql);
  return StmtRef{*slot};
}

std::optional<Entry> Cache::Impl::load_locked(std::string_view key) {
  int64_t id = 0;
  Entry e;
  {
    auto s = stmt("SELECT " MPK_CACHE_INFO_COLUMNS ", b.data FROM kernels k "
                  "LEFT JOIN blobs b ON b.id = k.id WHERE k.key = ?1");
    s->bind(1, key);
    if (!s->step()) return std::nullopt;
    id = s->int64(0);
    e = read_entry(*s);
  }
  if (!entry_is_intact(e)) {
    log(LogLevel::Warn, "kernel cache {}: entry {} fails its checksum; {}", db->path().string(), e.key,
        read_only ? "ignoring it (read-only cache)" : "dropping it");
    if (!read_only) drop_locked({id});
    ++counters.corrupt_entries_dropped;
    return std::nullopt;
  }
  int64_t t = now();
  if (!read_only && t - e.last_used >= options.touch_interval_s) {
    // Best effort: a busy database must not turn a hit into an error.
    try {
      auto s = stmt("UPDATE kernels SET last_used = ?1 WHERE id = ?2");
      s->bind(1, t).bind(2, id).run();
      e.last_used = t;
    } catch (const sql::SqliteError& err) {
      if (err.is_corruption()) throw;
      log(LogLevel::Debug, "kernel cache: last_used not updated: {}", err.what());
    }
  }
  return e;
}

void Cache::Impl::drop_locked(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  sql::Transaction txn(*db);
  int64_t dropped = 0;
  for (int64_t id : ids) {
    auto s = stmt("DELETE FROM kernels WHERE id = ?1");
    s->bind(1, id).run();
    dropped += db->changes();
  }
  auto s = stmt("UPDATE meta SET value = value + ?1 WHERE name = 'corrupt_entries_dropped'");
  s->bind(1, dropped).run();
  txn.commit();
}

StoreOutcome Cache::Impl::store_locked(const Entry& e, Conflict conflict) {
  std::optional<int64_t> old_id;
  {
    auto s = stmt("SELECT id, verification, time_us FROM kernels WHERE key = ?1");
    s->bind(1, e.key);
    if (s->step()) {
      old_id = s->int64(0);
      bool old_verified = is_verified(s->text(1));
      std::optional<double> old_time = s->opt_real(2);
      bool new_verified = is_verified(e.verification_json);
      bool keep = conflict == Conflict::KeepExisting ||
                  (conflict == Conflict::ReplaceUnlessWorse
                       ? is_better(old_verified, old_time, new_verified, e.time_us)
                       : !is_better(new_verified, e.time_us, old_verified, old_time));
      if (keep) return StoreOutcome::KeptExisting;
    }
  }
  if (old_id) stmt("DELETE FROM kernels WHERE id = ?1")->bind(1, *old_id).run();
  int64_t id = 0;
  {
    auto s = stmt(
        "INSERT INTO kernels (key, key_text, checksum, params, time_us, verification, host, "
        "created, mpk_version, last_used, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
        "RETURNING id");
    s->bind(1, e.key).bind(2, e.key_text).bind(3, e.checksum).bind(4, e.params_json);
    s->bind(5, e.time_us).bind(6, e.verification_json).bind(7, e.provenance.host);
    s->bind(8, e.provenance.unix_time).bind(9, e.provenance.mpk_version).bind(10, e.last_used);
    s->bind(11, int64_t(entry_bytes(e)));
    MPK_ICHECK(s->step()) << "INSERT RETURNING gave no row";
    id = s->int64(0);
    s->run();
  }
  stmt("INSERT INTO blobs (id, data) VALUES (?1, ?2)")->bind(1, id).bind_blob(2, e.cubin.data(), e.cubin.size()).run();
  return old_id ? StoreOutcome::Replaced : StoreOutcome::Added;
}

uint64_t Cache::Impl::total_bytes_locked() {
  auto s = stmt("SELECT value FROM meta WHERE name = 'total_bytes'");
  return s->step() ? uint64_t(s->int64(0)) : 0;
}

Cache::Cache(CacheOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& I = *impl_;
  if (options.path.empty()) options.path = default_cache_path();
  I.options = std::move(options);
  I.read_only = I.options.read_only;
  std::lock_guard lock(I.mu);
  I.open_locked({});
  if (I.db->is_read_only() && !I.read_only) {
    I.read_only = true;
    log(LogLevel::Warn, "kernel cache {} (or its folder) is write-protected: using it read-only",
        I.options.path.string());
  }
}

Cache::~Cache() = default;

std::optional<Entry> Cache::load(const CacheKey& key) { return load(key_digest(key)); }

std::optional<Entry> Cache::load(std::string_view digest) {
  Impl& I = *impl_;
  std::optional<Entry> e = I.with_db([&] { return I.load_locked(digest); });
  ++(e ? I.counters.hits : I.counters.misses);
  return e;
}

bool Cache::publish(const CacheKey& key, Entry entry) {
  Impl& I = *impl_;
  MPK_CHECK(!I.read_only, Cache) << "kernel cache " << I.options.path.string() << " is read-only: publish refused";
  prepare_entry(key, entry, I.now());
  StoreOutcome outcome = I.with_db([&] {
    sql::Transaction txn(*I.db);
    StoreOutcome o = I.store_locked(entry, Conflict::ReplaceUnlessWorse);
    txn.commit();
    return o;
  });
  if (outcome == StoreOutcome::KeptExisting) {
    ++I.counters.publishes_kept_existing;
    return false;
  }
  ++I.counters.publishes;
  // The entry is stored; a failed prune only delays eviction to the next publish.
  try {
    I.with_db([&] {
      if (I.options.max_bytes && I.total_bytes_locked() > I.options.max_bytes)
        I.prune_locked(I.options.max_bytes, entry.key);
    });
  } catch (const Error& e) {
    log(LogLevel::Warn, "kernel cache: pruning after publish failed: {}", e.what());
  }
  return true;
}

Entry Cache::get_or_build(const CacheKey& key, const std::function<Entry()>& build) {
  Impl& I = *impl_;
  std::string digest = key_digest(key);
  std::promise<Entry> promise;
  std::shared_future<Entry> result;
  bool owner = false;
  {
    std::lock_guard lock(I.inflight_mu);
    auto it = I.inflight.find(digest);
    if (it != I.inflight.end()) {
      ++I.counters.build_waits;
      result = it->second;
    } else {
      result = promise.get_future().share();
      I.inflight.emplace(digest, result);
      owner = true;
    }
  }
  if (!owner) return result.get();

  try {
    std::optional<Entry> hit;
    try {
      hit = load(digest);
    } catch (const Error& e) {
      log(LogLevel::Warn, "kernel cache: load failed, rebuilding: {}", e.what());
    }
    if (hit) {
      promise.set_value(std::move(*hit));
    } else {
      Entry built = build();
      ++I.counters.builds;
      prepare_entry(key, built, I.now());
      if (I.read_only) {
        log(LogLevel::Debug, "kernel cache is read-only: entry {} not stored", built.key);
      } else {
        try {
          publish(key, built);
        } catch (const Error& e) {
          ++I.counters.publish_failures;
          log(LogLevel::Warn, "kernel cache: could not store entry {}: {}", built.key, e.what());
        }
      }
      promise.set_value(std::move(built));
    }
  } catch (...) {
    promise.set_exception(std::current_exception());
  }
  {
    std::lock_guard lock(I.inflight_mu);
    I.inflight.erase(digest);
  }
  return result.get();
}

CacheCounters Cache::counters() const { return impl_->counters.snapshot(); }
const std::filesystem::path& Cache::path() const { return impl_->options.path; }
bool Cache::read_only() const { return impl_->read_only; }

}  // namespace mpk::cache
