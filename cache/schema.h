// The cache's on-disk schema, its migrations, and opening a database file safely.
//
// Schema history (PRAGMA user_version):
//   v1  one table kernels(key, blob, checksum, params, time_us, verification, host, created,
//       mpk_version), the cubin inline.
//   v2  kernels holds metadata only (+ key_text, last_used, bytes) and the cubins move to
//       blobs(id, data), so listings and LRU pruning never read the cubins; meta(name, value)
//       keeps the running payload total (maintained by triggers) and the count of corrupt
//       entries dropped.
//   v3  tunings(signature, ...): the code parameters a tuning run chose for one model on one
//       kind of machine (cache/tuning.h), beside the kernels they were compiled into.
// Every version carries PRAGMA application_id = kApplicationId. A fresh file is created by
// running every migration from an empty database, so fresh and migrated schemas are the same.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/sqlite_db.h"

namespace mpk::cache {

inline constexpr int kSchemaVersion = 3;
// The oldest schema read in place without migrating (read-only opens, imports, salvage): v2's
// tables are v3's but for tunings.
inline constexpr int kFirstReadableVersion = 2;
inline constexpr int32_t kApplicationId = 0x6d706b63;  // "mpkc"

// The v1 schema, kept to test the migration path.
extern const char* const kSchemaV1;

struct OpenOptions {
  bool read_only = false;
  int busy_timeout_ms = 10000;
};

// Opens the database at `path`, creating or migrating it to kSchemaVersion.
// Read-write: a file that is not SQLite, is damaged, or belongs to something else is set
// aside (see set_aside_if_damaged) and started afresh (with a warning, or, when moved_aside is
// given, appended to it for the caller to report); a newer schema throws Error(Cache). A file
// this process may not write, or in a folder it may not write, is opened read-only as below
// instead (the result's is_read_only() tells).
// Read-only: a missing file throws Error(NotFound), anything but the current schema throws
// Error(Cache) and nothing on disk is touched. A WAL-mode file is read with mode=ro when its
// -shm can be read or created, else as immutable (a shared cache in a folder the user cannot
// write): then it needs no -wal, -shm or locks and must not be written meanwhile.
// Anything but a regular file at `path` throws Error(InvalidArgument) (a FIFO would block,
// a folder reads as an I/O error).
// Sets WAL mode (read-write), synchronous=NORMAL, and the busy timeout.
// A damaged or foreign file set aside: `to` is the copy kept of it.
struct MovedAside {
  std::filesystem::path from, to;
  std::string why;
};

std::unique_ptr<sql::Db> open_database(const std::filesystem::path& path, const OpenOptions& options,
                                       std::vector<MovedAside>* moved_aside = nullptr);

// Copies a damaged database file (with its -wal and -journal) to
// `<path>.corrupt-<unix time>[-n]`; returns the copy's path. Throws Error(Io), leaving no
// partial copy, when a copy fails (a full disk: the file stays as it was).
std::filesystem::path keep_copy(const std::filesystem::path& path);

// Under the folder lock, checks `db`'s file again (its schema, then integrity_check) and, when
// it is still damaged or foreign, keeps a copy of it, empties it in place and creates the
// current schema in it; returns the copy. nullopt: the file was replaced, or another process
// has already reset it. When the copy fails, or the reset fails leaving the file as it was, the
// error is thrown and no copy is left; when an error came after the reset took effect (the
// file empty, or holding only the fresh schema), the copy is returned (the caller's next open
// writes the schema if missing and salvages it); when what the file holds after a failure
// cannot be read, the error is thrown and the copy kept and named in a warning (its entries
// may be nowhere else).
// The file is never renamed: a connection another process still holds on a renamed file
// would take the new file's -journal for its own hot journal and roll it back into the old
// one, or checkpoint into the old one and delete the new one's WAL. An in-place reset keeps
// every connection on the one file, under SQLite's locks.
std::optional<std::filesystem::path> set_aside_if_damaged(sql::Db& db);

}  // namespace mpk::cache
