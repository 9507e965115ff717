// The tunings table: publish, look up, list, and what export, import and salvage copy of it.
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/cache_impl.h"
#include "cache/sha256.h"

namespace mpk::cache {
namespace {

#define MPK_TUNING_COLUMNS \
  "signature, signature_text, params, record, time_us, default_time_us, host, created, mpk_version"

Tuning read_tuning(const sql::Stmt& s) {
  Tuning t;
  t.signature = s.text(0);
  t.signature_text = s.text(1);
  t.params_json = s.text(2);
  t.record_json = s.text(3);
  t.time_us = s.real(4);
  t.default_time_us = s.real(5);
  t.provenance = {s.text(6), s.int64(7), s.text(8)};
  return t;
}

bool json_object(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object();
}

bool positive(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

bool tuning_is_intact(const Tuning& t) {
  return is_sha256_hex(t.signature) && sha256_hex(t.signature_text) == t.signature &&
         json_object(t.signature_text) && json_object(t.params_json) && json_object(t.record_json) &&
         positive(t.time_us) && positive(t.default_time_us);
}

bool Cache::Impl::store_tuning_locked(const Tuning& t, bool newer_only) {
  if (newer_only) {
    auto s = stmt("SELECT created FROM tunings WHERE signature = ?1");
    s->bind(1, t.signature);
    if (s->step() && s->int64(0) >= t.provenance.unix_time) return false;
  }
  auto s = stmt("INSERT OR REPLACE INTO tunings (" MPK_TUNING_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  s->bind(1, t.signature)
      .bind(2, t.signature_text)
      .bind(3, t.params_json)
      .bind(4, t.record_json)
      .bind(5, t.time_us)
      .bind(6, t.default_time_us)
      .bind(7, t.provenance.host)
      .bind(8, t.provenance.unix_time)
      .bind(9, t.provenance.mpk_version)
      .run();
  return true;
}

std::vector<Tuning> read_tunings(sql::Db& db, bool partial) {
  std::vector<Tuning> out;
  try {
    if (db.query_int("PRAGMA user_version") < 3) return out;  // a v2 file: no tunings table
    sql::Stmt s(db, "SELECT " MPK_TUNING_COLUMNS " FROM tunings ORDER BY created DESC, signature");
    while (s.step()) {
      Tuning t = read_tuning(s);
      if (tuning_is_intact(t)) out.push_back(std::move(t));
    }
  } catch (const sql::SqliteError& e) {
    // Damage (or a file replaced under this connection) goes to the caller, whose with_db sets
    // the file aside and salvages it, unless a partial list is what it asked for.
    if (!partial) throw;
    log(LogLevel::Debug, "kernel cache: reading tuning results stopped: {}", e.what());
  }
  return out;
}

void Cache::publish_tuning(Tuning t) {
  Impl& I = *impl_;
  MPK_CHECK(!I.read_only, Cache) << "kernel cache " << path().string() << " is read-only: tuning result not stored";
  t.signature = sha256_hex(t.signature_text);
  Provenance local = local_provenance(I.now());
  if (t.provenance.host.empty()) t.provenance.host = local.host;
  if (t.provenance.unix_time == 0) t.provenance.unix_time = local.unix_time;
  if (t.provenance.mpk_version.empty()) t.provenance.mpk_version = local.mpk_version;
  MPK_CHECK(tuning_is_intact(t), InvalidArgument)
      << "kernel cache: tuning result with a field that is not a JSON object or a positive time";
  I.with_db([&] {
    sql::Transaction txn(*I.db);
    I.store_tuning_locked(t, /*newer_only=*/false);
    txn.commit();
  });
}

std::optional<Tuning> Cache::tuning(std::string_view signature) {
  Impl& I = *impl_;
  return I.with_db([&]() -> std::optional<Tuning> {
    if (I.db->query_int("PRAGMA user_version") < 3) return std::nullopt;  // a v2 file, read-only
    auto read = [&]() -> std::optional<Tuning> {
      auto s = I.stmt("SELECT " MPK_TUNING_COLUMNS " FROM tunings WHERE signature = ?1");
      s->bind(1, signature);
      if (!s->step()) return std::nullopt;
      return read_tuning(*s);
    };
    std::optional<Tuning> t = read();
    if (!t || tuning_is_intact(*t)) return t;
    log(LogLevel::Warn, "kernel cache {}: tuning result {} is damaged; {}", path().string(), t->signature,
        I.read_only ? "ignoring it (read-only cache)" : "dropping it");
    if (!I.read_only) {
      // Read again under the write lock: a good result another process published since is
      // never the one dropped. Loads that find a good result take no lock.
      sql::Transaction txn(*I.db);
      if (const std::optional<Tuning> again = read(); again && !tuning_is_intact(*again)) {
        I.stmt("DELETE FROM tunings WHERE signature = ?1")->bind(1, signature).run();
        ++I.counters.corrupt_entries_dropped;
      }
      txn.commit();
    }
    return std::nullopt;
  });
}

std::vector<Tuning> Cache::tunings() {
  Impl& I = *impl_;
  return I.with_db([&] { return read_tunings(*I.db); });
}

bool Cache::erase_tuning(std::string_view signature) {
  Impl& I = *impl_;
  MPK_CHECK(!I.read_only, Cache) << "kernel cache " << path().string() << " is read-only";
  return I.with_db([&] {
    I.stmt("DELETE FROM tunings WHERE signature = ?1")->bind(1, signature).run();
    return I.db->changes() > 0;
  });
}

}  // namespace mpk::cache
