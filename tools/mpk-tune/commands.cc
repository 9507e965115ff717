#include "commands.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache/cache.h"
#include "cache/paths.h"
#include "report.h"

namespace mpk::tune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

cache::Cache open_cache(const Context& ctx, bool create = false) {
  bool exists = cache::regular_file_exists(ctx.cache_path);
  MPK_CHECK(exists || create, NotFound) << "no kernel cache at " << ctx.cache_path.string();
  cache::CacheOptions o;
  o.path = ctx.cache_path;
  o.read_only = ctx.read_only;
  return cache::Cache(std::move(o));
}

// JSON text stored by the cache, as a JSON value (a string when it does not parse).
json parsed(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json(text) : j;
}

json key_json(const std::string& key_text) { return key_text.empty() ? json(nullptr) : parsed(key_text); }

// The op kind and arch for listings; "-" for entries migrated from v1 (no key text).
std::pair<std::string, std::string> op_and_arch(const std::string& key_text) {
  json k = key_json(key_text);
  if (!k.is_object()) return {"-", "-"};
  std::string op = k.contains("task") ? k["task"].value("op", "-") : "-";
  return {op, k.value("arch", "-")};
}

json entry_json(const cache::EntryInfo& e) {
  return {{"key", e.key},
          {"key_text", key_json(e.key_text)},
          {"checksum", e.checksum},
          {"cubin_bytes", e.cubin_bytes},
          {"bytes", e.bytes},
          {"time_us", e.time_us ? json(*e.time_us) : json(nullptr)},
          {"verified", e.verified},
          {"params", parsed(e.params_json)},
          {"verification", parsed(e.verification_json)},
          {"host", e.provenance.host},
          {"created", e.provenance.unix_time},
          {"mpk_version", e.provenance.mpk_version},
          {"last_used", e.last_used}};
}

void print_json(const Context& ctx, const json& j) { ctx.out << json_text(j, 2) << '\n'; }

std::string count_text(uint64_t n) { return fmt::format("{} {}", n, n == 1 ? "entry" : "entries"); }

}  // namespace

int cmd_list(const Context& ctx, size_t limit) {
  cache::Cache cache = open_cache(ctx);
  auto entries = cache.list(limit);
  if (ctx.json) {
    json arr = json::array();
    for (const auto& e : entries) arr.push_back(entry_json(e));
    print_json(ctx, {{"path", cache.path().string()}, {"entries", std::move(arr)}});
    return kExitOk;
  }
  Table t({"KEY", "OP", "ARCH", "CUBIN", "TIME_US", "VERIFIED", "LAST USED", "HOST"}, {3, 4});
  for (const auto& e : entries) {
    auto [op, arch] = op_and_arch(e.key_text);
    t.add({e.key.substr(0, 16), op, arch, human_bytes(e.cubin_bytes), time_us_text(e.time_us),
           e.verified ? "yes" : "no", utc_time(e.last_used), e.provenance.host});
  }
  t.print(ctx.out);
  ctx.out << count_text(entries.size()) << " in " << cache.path().string() << '\n';
  return kExitOk;
}

int cmd_show(const Context& ctx, const std::string& key_prefix) {
  cache::Cache cache = open_cache(ctx);
  MPK_CHECK(!key_prefix.empty(), InvalidArgument) << "empty key";
  auto keys = cache.find_keys(key_prefix, 2);
  MPK_CHECK(!keys.empty(), NotFound) << "no entry with key " << key_prefix;
  MPK_CHECK(keys.size() == 1, InvalidArgument) << "key prefix " << key_prefix << " is ambiguous (matches "
                                               << cache.find_keys(key_prefix).size() << " entries)";
  auto e = cache.info(keys[0]);
  MPK_CHECK(e.has_value(), NotFound) << "entry " << keys[0] << " disappeared";
  if (ctx.json) {
    print_json(ctx, entry_json(*e));
    return kExitOk;
  }
  Table t({"FIELD", "VALUE"});
  t.add({"key", e->key});
  t.add({"checksum", e->checksum});
  t.add({"cubin", fmt::format("{} ({} bytes)", human_bytes(e->cubin_bytes), e->cubin_bytes)});
  t.add({"time_us", time_us_text(e->time_us)});
  t.add({"verified", e->verified ? "yes" : "no"});
  t.add({"built", fmt::format("{} on {} by mpk {}", utc_time(e->provenance.unix_time), e->provenance.host,
                              e->provenance.mpk_version)});
  t.add({"last used", utc_time(e->last_used)});
  t.print(ctx.out);
  json k = key_json(e->key_text);
  ctx.out << "key text:\n" << (k.is_null() ? std::string("  (not recorded: entry from schema v1)") : k.dump(2)) << '\n';
  ctx.out << "params:\n" << parsed(e->params_json).dump(2) << '\n';
  ctx.out << "verification:\n" << parsed(e->verification_json).dump(2) << '\n';
  return kExitOk;
}

int cmd_stats(const Context& ctx) {
  cache::Cache cache = open_cache(ctx);
  cache::CacheStats st = cache.stats();
  if (ctx.json) {
    print_json(ctx, {{"path", st.path},
                     {"read_only", st.read_only},
                     {"schema_version", st.schema_version},
                     {"entries", st.entries},
                     {"verified_entries", st.verified_entries},
                     {"tunings", st.tunings},
                     {"payload_bytes", st.payload_bytes},
                     {"file_bytes", st.file_bytes},
                     {"free_bytes", st.free_bytes},
                     {"wal_bytes", st.wal_bytes},
                     {"oldest_use", st.oldest_use},
                     {"newest_use", st.newest_use},
                     {"corrupt_entries_dropped", st.corrupt_entries_dropped_total}});
    return kExitOk;
  }
  Table t({"STAT", "VALUE"});
  t.add({"path", st.path + (st.read_only ? " (read-only)" : "")});
  t.add({"schema version", std::to_string(st.schema_version)});
  t.add({"entries", fmt::format("{} ({} verified)", st.entries, st.verified_entries)});
  t.add({"tuning results", std::to_string(st.tunings)});
  t.add({"payload", human_bytes(st.payload_bytes)});
  t.add({"file", fmt::format("{} ({} free, WAL {})", human_bytes(st.file_bytes), human_bytes(st.free_bytes),
                             human_bytes(st.wal_bytes))});
  t.add({"least recent use", utc_time(st.oldest_use)});
  t.add({"most recent use", utc_time(st.newest_use)});
  t.add({"corrupt entries dropped", std::to_string(st.corrupt_entries_dropped_total)});
  t.print(ctx.out);
  return kExitOk;
}

int cmd_prune(const Context& ctx, uint64_t max_bytes) {
  cache::Cache cache = open_cache(ctx);
  cache::PruneResult r = cache.prune(max_bytes);
  if (ctx.json) {
    print_json(ctx, {{"max_bytes", max_bytes},
                     {"removed_entries", r.removed_entries},
                     {"removed_bytes", r.removed_bytes},
                     {"remaining_entries", r.remaining_entries},
                     {"remaining_bytes", r.remaining_bytes}});
    return kExitOk;
  }
  ctx.out << fmt::format("pruned to {}: removed {} ({}), remaining {} ({})\n", human_bytes(max_bytes),
                         count_text(r.removed_entries), human_bytes(r.removed_bytes), count_text(r.remaining_entries),
                         human_bytes(r.remaining_bytes));
  return kExitOk;
}

namespace {

int print_transfer(const Context& ctx, const char* what, const fs::path& file, const cache::TransferResult& r) {
  if (ctx.json) {
    print_json(ctx, {{"file", file.string()},
                     {"added", r.added},
                     {"tunings", r.tunings},
                     {"replaced", r.replaced},
                     {"kept_existing", r.kept_existing},
                     {"skipped_corrupt", r.skipped_corrupt}});
    return kExitOk;
  }
  Table t({what, "ENTRIES"}, {1});
  t.add({"added", std::to_string(r.added)});
  t.add({"replaced (better)", std::to_string(r.replaced)});
  t.add({"kept existing", std::to_string(r.kept_existing)});
  t.add({"skipped (damaged)", std::to_string(r.skipped_corrupt)});
  t.add({"tuning results", std::to_string(r.tunings)});
  t.print(ctx.out);
  return kExitOk;
}

}  // namespace

int cmd_export(const Context& ctx, const fs::path& file, bool force) {
  cache::Cache cache = open_cache(ctx);
  return print_transfer(ctx, "EXPORT", file, cache.export_to(file, force));
}

int cmd_import(const Context& ctx, const fs::path& file) {
  // Checked before the target cache is created.
  MPK_CHECK(cache::regular_file_exists(file, "import source"), NotFound) << "no file " << file.string();
  cache::Cache cache = open_cache(ctx, /*create=*/true);
  return print_transfer(ctx, "IMPORT", file, cache.import_from(file));
}

namespace {

int verify_report(const Context& ctx, cache::Cache& cache) {
  // A file set aside on open counts as damage found: the fresh file's clean report alone
  // would hide it.
  cache::VerifyResult r = cache.verify();
  if (ctx.json) {
    print_json(ctx, {{"checked", r.checked},
                     {"bad", r.bad_keys.size()},
                     {"bad_keys", r.bad_keys},
                     {"dropped", !cache.read_only()},
                     {"integrity_ok", r.integrity_ok},
                     {"integrity", r.integrity_message},
                     {"moved_aside", r.moved_aside},
                     {"damage_found", r.damage_found()}});
  } else {
    for (const auto& m : r.moved_aside)
      ctx.out << "damaged file set aside (a copy kept at " << m << "); its intact entries kept\n";
    ctx.out << fmt::format("checked {}: {} bad{}\n", count_text(r.checked), r.bad_keys.size(),
                           r.bad_keys.empty() ? "" : cache.read_only() ? " (read-only: kept)" : " (dropped)");
    for (const auto& k : r.bad_keys) ctx.out << "  bad " << k << '\n';
    ctx.out << "database integrity: " << r.integrity_message << '\n';
  }
  return r.damage_found() ? kExitDamaged : kExitOk;
}

}  // namespace

int cmd_verify(const Context& ctx) {
  try {
    cache::Cache cache = open_cache(ctx);
    return verify_report(ctx, cache);
  } catch (const cache::DamagedCacheError& e) {
    // Read-only or write-protected: the damage cannot be set aside, but it is what verify is
    // asked to find.
    if (ctx.json)
      print_json(ctx, {{"checked", 0}, {"bad", 0}, {"bad_keys", json::array()}, {"dropped", false},
                       {"integrity_ok", false}, {"integrity", e.what()}, {"moved_aside", json::array()},
                       {"damage_found", true}});
    else
      ctx.out << "database integrity: " << e.what() << '\n';
    return kExitDamaged;
  }
}

}  // namespace mpk::tune
