// A thin RAII layer over the SQLite C API for the cache's own use (not part of its interface).
// Every failure throws SqliteError, an Error(Cache) that keeps the SQLite result code.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace mpk::cache::sql {

class SqliteError : public Error {
 public:
  SqliteError(int code, std::string message) : Error(ErrorKind::Cache, std::move(message)), code_(code) {}
  int code() const { return code_; }  // extended result code
  // The file is not a database or its structure is damaged.
  bool is_corruption() const;
  // Another connection holds a conflicting lock.
  bool is_busy() const;
  // The file changed under this connection (replaced, or an I/O error): open it again rather
  // than judge its contents.
  bool is_file_moved() const;
  // A read-only connection could not read the file without writing beside it (a WAL file
  // whose -shm it can neither read nor create); not a hot journal (is_hot_journal).
  bool is_read_only_refusal() const;
  // A rollback journal a writer left mid-transaction: only a read-write open rolls it back, and
  // a read that ignored it would see the writer's uncommitted pages.
  bool is_hot_journal() const;

 private:
  int code_;
};

class Db;

// A prepared statement. Bind indices start at 1, column indices at 0.
class Stmt {
 public:
  Stmt(Db& db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::optional<double> v);
  Stmt& bind(int i, std::string_view text);
  Stmt& bind_blob(int i, const void* data, size_t size);

  // Advances; true while a row is available.
  bool step();
  // Runs to completion (for statements without result rows).
  void run();
  // Clears bindings and rewinds for reuse.
  void reset();

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::optional<double> opt_real(int col) const;
  std::string text(int col) const;
  std::vector<uint8_t> blob(int col) const;
  size_t bytes(int col) const;

 private:
  Db& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

enum class Access {
  ReadWrite,  // created when missing
  ReadOnly,   // mode=ro: sees other processes' commits; WAL needs a -shm it can read or create
  Immutable,  // immutable=1: no locks, no WAL, no -shm; for a file nobody writes meanwhile
};

class Db {
 public:
  // Opens the file with `access` and sets the busy timeout.
  Db(const std::filesystem::path& path, Access access, int busy_timeout_ms);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void exec(std::string_view sql);
  int64_t query_int(std::string_view sql);
  std::string query_text(std::string_view sql);
  // The connection cannot write (asked so, or the file is write-protected).
  bool is_read_only() const;
  // The file at path() is no longer the one this connection has open (renamed or deleted).
  bool file_moved();
  // Empties the database in place, whatever its state (SQLITE_DBCONFIG_RESET_DATABASE and
  // VACUUM, under SQLite's locks): other connections to the file stay valid and see it empty.
  void reset_database();
  int64_t changes() const;
  const std::filesystem::path& path() const { return path_; }
  sqlite3* handle() { return db_; }

  [[noreturn]] void fail(int rc, std::string_view what) const;

 private:
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

// One transaction; rolled back unless committed. BEGIN IMMEDIATE takes the write lock up
// front, so a writer waits in the busy handler instead of failing on lock upgrade.
class Transaction {
 public:
  explicit Transaction(Db& db, bool immediate = true);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Db& db_;
  bool open_ = true;
};

}  // namespace mpk::cache::sql
