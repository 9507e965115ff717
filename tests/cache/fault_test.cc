// Fault injection: a publish and an import with a failed read, write or fsync at every point
// they reach the disk. Afterwards (reopened without faults) every entry is complete and
// intact or absent, and nothing stored before is lost.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/sha256.h"
#include "faulty_vfs.h"
#include "test_util.h"

namespace mpk::cache {
namespace {

using namespace testing;

// Which versions of an entry may be found: the cubins, in any order; an empty list means
// the entry must be absent.
using Allowed = std::map<int, std::vector<std::vector<uint8_t>>>;

// Reopens `db` without faults and checks every key of `allowed`: a key with one version must
// hold it; with several, it holds one of them or (when "absent" is listed as an empty cubin)
// nothing. Returns a description of the first violation, or "".
std::string check(const fs::path& db, const Allowed& allowed) {
  Cache cache(options_at(db));
  VerifyResult v = cache.verify();
  if (v.damage_found()) return "verify found damage: " + v.integrity_message;
  for (const auto& [k, versions] : allowed) {
    auto e = cache.load(make_key(k));
    bool may_be_absent = false;
    for (const auto& cubin : versions) may_be_absent |= cubin.empty();
    if (!e) {
      if (!may_be_absent) return "entry " + std::to_string(k) + " was lost";
      continue;
    }
    if (sha256_hex(e->cubin.data(), e->cubin.size()) != e->checksum)
      return "entry " + std::to_string(k) + " fails its checksum";
    bool known = false;
    for (const auto& cubin : versions) known |= !cubin.empty() && e->cubin == cubin;
    if (!known) return "entry " + std::to_string(k) + " holds a cubin nobody stored";
  }
  return "";
}

// Runs `op` once to count its I/O calls, then once per call failing it (once, then from
// there on), each time from the state `prepare` makes and checked by `verify` (a description of
// the first violation, or ""). Returns the count.
int64_t fail_every_call(const std::function<void()>& prepare, const std::function<void()>& op,
                        const std::function<std::string()>& verify) {
  LogCapture quiet;
  int64_t total = 0;
  {
    prepare();
    FaultyVfs vfs;
    vfs.fail_at(0, false);
    op();
    total = vfs.calls();
  }
  EXPECT_EQ(verify(), "") << "without faults";
  EXPECT_GT(total, 10);
  for (bool sticky : {false, true}) {
    for (int64_t k = 1; k <= total; ++k) {
      SCOPED_TRACE(::testing::Message() << "call " << k << " of " << total << (sticky ? ", and every later one" : ""));
      prepare();
      {
        FaultyVfs vfs;
        vfs.fail_at(k, sticky);
        try {
          op();
        } catch (const Error&) {
          // A failed operation is fine; what it leaves behind is checked below.
        } catch (const std::exception& e) {
          ADD_FAILURE() << "not an mpk::Error: " << e.what();
        }
      }
      const std::string violation = verify();
      if (!violation.empty()) {
        ADD_FAILURE() << violation;
        return total;
      }
    }
  }
  return total;
}

void inject_everywhere(const fs::path& db, const std::string& pristine, const std::function<void()>& op,
                       const Allowed& allowed) {
  const int64_t total = fail_every_call([&] { write_database(db, pristine); }, op, [&]() -> std::string {
    if (std::string v = check(db, allowed); !v.empty()) return v;
    return moved_aside_in(db.parent_path()).empty() ? "" : "an I/O error was taken for damage";
  });
  std::printf("%lld I/O calls (reads, writes, fsyncs, truncates)\n", static_cast<long long>(total));
}

constexpr int kStored = 6;

Entry stored_entry(int k) { return make_entry(3000 + 2000 * size_t(k), uint64_t(k), 10.0); }

std::string pristine_cache(const fs::path& db) {
  {
    Cache cache(options_at(db));
    for (int k = 0; k < kStored; ++k) cache.publish(make_key(k), stored_entry(k));
  }
  return read_bytes(db);  // closed cleanly: everything is in the main file
}

TEST(CacheFaults, PublishIsAllOrNothingAtEveryFailedCall) {
  TempDir dir;
  fs::path db = dir / "kernels.db";
  std::string pristine = pristine_cache(db);
  Entry added = make_entry(20000, 100, 5.0);      // spans overflow pages
  Entry better = make_entry(9000, 102, 1.0);      // replaces entry 2 (faster)
  Allowed allowed;
  for (int k = 0; k < kStored; ++k) allowed[k] = {stored_entry(k).cubin};
  allowed[2].push_back(better.cubin);
  allowed[100] = {added.cubin, {}};
  auto op = [&] {
    Cache cache(options_at(db));
    cache.publish(make_key(100), added);
    cache.publish(make_key(2), better);
  };
  inject_everywhere(db, pristine, op, allowed);
}

TEST(CacheFaults, ImportIsAllOrNothingPerEntryAtEveryFailedCall) {
  TempDir dir;
  fs::path db = dir / "kernels.db";
  std::string pristine = pristine_cache(db);
  // The source: three new entries and a better version of entry 3.
  fs::path source = dir / "source.db";
  Allowed allowed;
  for (int k = 0; k < kStored; ++k) allowed[k] = {stored_entry(k).cubin};
  {
    Cache src(options_at(dir / "build.db"));
    for (int k = 200; k < 203; ++k) {
      Entry e = make_entry(7000 + size_t(k), uint64_t(k), 2.0);
      src.publish(make_key(k), e);
      allowed[k] = {e.cubin, {}};
    }
    Entry better = make_entry(4000, 303, 0.5);
    src.publish(make_key(3), better);
    allowed[3].push_back(better.cubin);
    src.export_to(source);
  }
  std::string source_bytes = read_bytes(source);
  auto op = [&] {
    Cache cache(options_at(db));
    cache.import_from(source);
  };
  inject_everywhere(db, pristine, op, allowed);
  EXPECT_EQ(read_bytes(source), source_bytes) << "import changed its source";
}

// An export over an earlier one, with a failed read, write or fsync at every point: the target
// is the earlier export, byte for byte, or a complete new one, and no partial file is left.
TEST(CacheFaults, ExportReplacesTheEarlierFileWholeOrNotAtEveryFailedCall) {
  TempDir dir;
  fs::path db = dir / "kernels.db", out = dir / "export.db";
  std::string pristine = pristine_cache(db);
  {
    Cache older(options_at(dir / "older.db"));
    older.publish(make_key(0), stored_entry(0));
    older.export_to(out);
  }
  const std::string earlier = read_bytes(out);
  const int64_t total = fail_every_call(
      [&] {
        write_database(db, pristine);
        write_database(out, earlier);
      },
      [&] {
        Cache cache(options_at(db));
        cache.export_to(out, /*overwrite=*/true);
      },
      [&]() -> std::string {
        for (const auto& e : fs::directory_iterator(dir.path()))
          if (e.path().filename().string().find(".part-") != std::string::npos)
            return "a partial export was left: " + e.path().string();
        if (!moved_aside_in(dir.path()).empty()) return "an I/O error was taken for damage";
        if (read_bytes(out) == earlier) return "";
        CacheOptions o = options_at(out);
        o.read_only = true;
        Cache exported(o);
        for (int k = 0; k < kStored; ++k) {
          auto e = exported.load(make_key(k));
          if (!e || e->cubin != stored_entry(k).cubin) return "the new export lacks entry " + std::to_string(k);
        }
        return "";
      });
  std::printf("%lld I/O calls in an export\n", static_cast<long long>(total));
}

// Recovery of a damaged file (an index page's free-byte count flipped: every entry still reads
// back) with a failed read, write or fsync at every point it reaches the disk through SQLite: a
// failed recovery is an Error, and a later open without faults recovers every entry, from the
// file or from the copy it kept. (The copy itself is made by the file system, not SQLite: a
// failed copy leaves the file as it was, CacheRecovery covers that path's cleanup.)
TEST(CacheFaults, RecoveryLosesNoEntryAtEveryFailedCall) {
  TempDir dir;
  fs::path db = dir / "kernels.db";
  std::string damaged;
  {
    {
      Cache cache(options_at(db));
      for (int k = 0; k < 12; ++k) cache.publish(make_key(k), make_entry(6000, uint64_t(k)));
    }
    damaged = read_bytes(db);
    int64_t root = RawDb(db).query_int("SELECT rootpage FROM sqlite_master WHERE name = 'kernels_last_used'");
    size_t page = (size_t(uint8_t(damaged[16])) << 8) | uint8_t(damaged[17]);
    ASSERT_GT(root, 1);
    damaged[(size_t(root) - 1) * page + 7] ^= 0x21;
  }
  auto reset_folder = [&] {
    for (const fs::path& p : moved_aside_in(dir.path()))
      for (const char* suffix : {"", "-wal", "-journal", "-shm"}) fs::remove(p.string() + suffix);
    write_database(db, damaged);
  };
  auto op = [&] {
    Cache cache(options_at(db));
    (void)cache.verify();
  };
  // After a fault-free open (which finishes a recovery left undone), every entry loads from the
  // cache or from a copy kept of the file. (A copy whose salvage a later error stopped is named
  // in a warning; later opens do not salvage it.)
  auto all_entries_back = [&]() -> std::string {
    std::vector<std::unique_ptr<Cache>> places;
    places.push_back(std::make_unique<Cache>(options_at(db)));
    VerifyResult v = places[0]->verify();
    if (v.damage_found() && v.moved_aside.empty()) return "damage left in place: " + v.integrity_message;
    for (const fs::path& copy : moved_aside_in(dir.path())) {
      CacheOptions o = options_at(copy);
      o.read_only = true;
      places.push_back(std::make_unique<Cache>(o));
    }
    for (int k = 0; k < 12; ++k) {
      bool found = false;
      for (const auto& c : places)
        if (auto e = c->load(make_key(k))) {
          if (e->cubin != make_entry(6000, uint64_t(k)).cubin) return "entry " + std::to_string(k) + " differs";
          found = true;
        }
      if (!found) return "entry " + std::to_string(k) + " was lost";
    }
    return "";
  };
  const int64_t total = fail_every_call(reset_folder, op, [&]() -> std::string {
    if (moved_aside_in(dir.path()).size() > 2) return "more than two copies kept";
    return all_entries_back();
  });
  std::printf("%lld I/O calls in a recovery\n", static_cast<long long>(total));
  reset_folder();
  op();
  EXPECT_EQ(moved_aside_in(dir.path()).size(), 1u) << "the damage was not met";
}

}  // namespace
}  // namespace mpk::cache
