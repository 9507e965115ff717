#include "cache/sqlite_db.h"

#include <sqlite3.h>

#include <cctype>
#include <cstring>
#include <string>

namespace mpk::cache::sql {

bool SqliteError::is_corruption() const {
  int primary = code_ & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

bool SqliteError::is_file_moved() const {
  return (code_ & 0xff) == SQLITE_IOERR || code_ == SQLITE_READONLY_DBMOVED;
}

bool SqliteError::is_read_only_refusal() const {
  int primary = code_ & 0xff;
  return (primary == SQLITE_READONLY && !is_hot_journal()) || primary == SQLITE_CANTOPEN;
}

bool SqliteError::is_hot_journal() const { return code_ == SQLITE_READONLY_ROLLBACK; }

bool SqliteError::is_busy() const {
  int primary = code_ & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

namespace {

// A URI naming `path` (RFC 3986 percent-encoding, so '?', '#' and '%' in names are safe).
std::string file_uri(const std::filesystem::path& path, const char* query) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string p = path.string();
  // "file://" + an absolute path: an empty authority, so a path starting "//" stays a path.
  std::string uri = path.is_absolute() ? "file://" : "file:";
  for (unsigned char c : p) {
    if (std::isalnum(c) || std::strchr("/-._~", c)) {
      uri += char(c);
    } else {
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 15];
    }
  }
  return uri + "?" + query;
}

}  // namespace

Db::Db(const std::filesystem::path& path, Access access, int busy_timeout_ms) : path_(path) {
  // Each Db is used under its owner's lock; SQLite's own mutexes would only add cost.
  int flags = SQLITE_OPEN_NOMUTEX;
  std::string name = path.string();
  if (access == Access::ReadWrite) {
    flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  } else {
    flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
    name = file_uri(path, access == Access::ReadOnly ? "mode=ro" : "mode=ro&immutable=1");
  }
  int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw SqliteError(rc, "cannot open kernel cache " + path.string() + ": " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

Db::~Db() { sqlite3_close_v2(db_); }

void Db::fail(int rc, std::string_view what) const {
  throw SqliteError(rc, "kernel cache " + path_.string() + ": " + std::string(what) + ": " +
                            sqlite3_errmsg(db_));
}

void Db::exec(std::string_view sql) {
  std::string s(sql);
  int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(rc, s.substr(0, 60));
}

int64_t Db::query_int(std::string_view sql) {
  Stmt s(*this, sql);
  return s.step() ? s.int64(0) : 0;
}

std::string Db::query_text(std::string_view sql) {
  Stmt s(*this, sql);
  return s.step() ? s.text(0) : std::string();
}

bool Db::is_read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

bool Db::file_moved() {
  int moved = 0;
  return sqlite3_file_control(db_, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved;
}

void Db::reset_database() {
  int rc = sqlite3_db_config(db_, SQLITE_DBCONFIG_RESET_DATABASE, 1, nullptr);
  if (rc != SQLITE_OK) fail(rc, "reset database");
  try {
    exec("VACUUM");
  } catch (...) {
    sqlite3_db_config(db_, SQLITE_DBCONFIG_RESET_DATABASE, 0, nullptr);
    throw;
  }
  sqlite3_db_config(db_, SQLITE_DBCONFIG_RESET_DATABASE, 0, nullptr);
}

int64_t Db::changes() const { return sqlite3_changes64(db_); }

Stmt::Stmt(Db& db, std::string_view sql) : db_(db) {
  int rc = sqlite3_prepare_v3(db.handle(), sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail(rc, "prepare '" + std::string(sql.substr(0, 60)) + "'");
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt& Stmt::bind(int i, int64_t v) {
  int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK) db_.fail(rc, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, double v) {
  int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK) db_.fail(rc, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, std::optional<double> v) {
  if (v) return bind(i, *v);
  int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK) db_.fail(rc, "bind");
  return *this;
}

Stmt& Stmt::bind(int i, std::string_view text) {
  int rc = sqlite3_bind_text64(stmt_, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) db_.fail(rc, "bind");
  return *this;
}

Stmt& Stmt::bind_blob(int i, const void* data, size_t size) {
  // A zero-length blob must still be a blob, not NULL.
  int rc = sqlite3_bind_blob64(stmt_, i, size ? data : "", size, SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail(rc, "bind");
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);
  db_.fail(rc, "step '" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "'");
}

void Stmt::run() {
  while (step()) {
  }
}

void Stmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Stmt::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
int64_t Stmt::int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(stmt_, col); }

std::optional<double> Stmt::opt_real(int col) const {
  if (is_null(col)) return std::nullopt;
  return real(col);
}

std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : std::string();
}

std::vector<uint8_t> Stmt::blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
  return p ? std::vector<uint8_t>(p, p + sqlite3_column_bytes(stmt_, col)) : std::vector<uint8_t>();
}

size_t Stmt::bytes(int col) const { return size_t(sqlite3_column_bytes(stmt_, col)); }

Transaction::Transaction(Db& db, bool immediate) : db_(db) {
  db_.exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN");
}

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace mpk::cache::sql
