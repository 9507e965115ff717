// A SQLite VFS that wraps the default one and fails chosen I/O calls, for fault-injection
// tests. While installed it is the default VFS, so the cache uses it without knowing.
//
//   FaultyVfs vfs;                 // installed; counts reads, writes and syncs
//   vfs.fail_at(7, /*sticky=*/true);  // the 7th call and every later one fail
//   ... run cache operations ...
//   vfs.calls();                   // how many calls were made
//   // uninstalled when it goes out of scope: open every connection inside its lifetime
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace mpk::cache::testing {

class FaultyVfs {
 public:
  FaultyVfs() {
    base_ = sqlite3_vfs_find(nullptr);
    if (!base_) throw std::runtime_error("no default SQLite VFS");
    vfs_ = *base_;
    vfs_.zName = "mpk-faulty";
    vfs_.szOsFile = int(sizeof(File)) + base_->szOsFile;
    vfs_.pAppData = this;
    vfs_.xOpen = &open;
    vfs_.pNext = nullptr;
    if (sqlite3_vfs_register(&vfs_, 1) != SQLITE_OK) throw std::runtime_error("cannot register the VFS");
    active_ = this;
  }
  ~FaultyVfs() {
    sqlite3_vfs_register(base_, 1);
    sqlite3_vfs_unregister(&vfs_);
    active_ = nullptr;
  }
  FaultyVfs(const FaultyVfs&) = delete;
  FaultyVfs& operator=(const FaultyVfs&) = delete;

  // Fails call number `k` (1-based; 0: none), and with `sticky` every call after it too, as a
  // disk that stops working would.
  void fail_at(int64_t k, bool sticky) {
    fail_at_ = k;
    sticky_ = sticky;
    calls_ = 0;
    failed_ = 0;
  }
  int64_t calls() const { return calls_; }
  int64_t failed() const { return failed_; }

 private:
  // Our file object, followed in memory by the wrapped VFS's own.
  struct File {
    sqlite3_file base;
    sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
  };

  static File* self(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

  // Counts one I/O call; true when it must fail.
  static bool fault() {
    FaultyVfs* v = active_;
    if (!v) return false;
    int64_t n = ++v->calls_;
    bool fail = v->fail_at_ > 0 && (n == v->fail_at_ || (v->sticky_ && n > v->fail_at_));
    v->failed_ += fail;
    return fail;
  }

  static int open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out_flags) {
    auto* v = static_cast<FaultyVfs*>(vfs->pAppData);
    File* file = self(f);
    std::memset(file, 0, sizeof(File));
    int rc = v->base_->xOpen(v->base_, name, file->real(), flags, out_flags);
    file->base.pMethods = file->real()->pMethods ? &kMethods : nullptr;
    return rc;
  }

  static int close(sqlite3_file* f) { return self(f)->real()->pMethods->xClose(self(f)->real()); }
  static int read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
    if (fault()) return SQLITE_IOERR_READ;
    return self(f)->real()->pMethods->xRead(self(f)->real(), buf, n, off);
  }
  static int write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
    if (fault()) return SQLITE_IOERR_WRITE;
    return self(f)->real()->pMethods->xWrite(self(f)->real(), buf, n, off);
  }
  static int truncate(sqlite3_file* f, sqlite3_int64 size) {
    if (fault()) return SQLITE_IOERR_TRUNCATE;
    return self(f)->real()->pMethods->xTruncate(self(f)->real(), size);
  }
  static int sync(sqlite3_file* f, int flags) {
    if (fault()) return SQLITE_IOERR_FSYNC;
    return self(f)->real()->pMethods->xSync(self(f)->real(), flags);
  }
  static int file_size(sqlite3_file* f, sqlite3_int64* size) {
    return self(f)->real()->pMethods->xFileSize(self(f)->real(), size);
  }
  static int lock(sqlite3_file* f, int l) { return self(f)->real()->pMethods->xLock(self(f)->real(), l); }
  static int unlock(sqlite3_file* f, int l) { return self(f)->real()->pMethods->xUnlock(self(f)->real(), l); }
  static int check_lock(sqlite3_file* f, int* out) {
    return self(f)->real()->pMethods->xCheckReservedLock(self(f)->real(), out);
  }
  static int file_control(sqlite3_file* f, int op, void* arg) {
    return self(f)->real()->pMethods->xFileControl(self(f)->real(), op, arg);
  }
  static int sector_size(sqlite3_file* f) { return self(f)->real()->pMethods->xSectorSize(self(f)->real()); }
  static int device_flags(sqlite3_file* f) {
    return self(f)->real()->pMethods->xDeviceCharacteristics(self(f)->real());
  }
  static int shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** p) {
    return self(f)->real()->pMethods->xShmMap(self(f)->real(), page, size, extend, p);
  }
  static int shm_lock(sqlite3_file* f, int offset, int n, int flags) {
    return self(f)->real()->pMethods->xShmLock(self(f)->real(), offset, n, flags);
  }
  static void shm_barrier(sqlite3_file* f) { self(f)->real()->pMethods->xShmBarrier(self(f)->real()); }
  static int shm_unmap(sqlite3_file* f, int del) {
    return self(f)->real()->pMethods->xShmUnmap(self(f)->real(), del);
  }
  // Memory-mapped reads would bypass read(): refused, so SQLite reads through it.
  static int fetch(sqlite3_file*, sqlite3_int64, int, void** p) {
    *p = nullptr;
    return SQLITE_OK;
  }
  static int unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
    return self(f)->real()->pMethods->xUnfetch(self(f)->real(), off, p);
  }

  static constexpr sqlite3_io_methods kMethods = {
      3,           &close,      &read,         &write,     &truncate, &sync,    &file_size,
      &lock,       &unlock,     &check_lock,   &file_control, &sector_size, &device_flags,
      &shm_map,    &shm_lock,   &shm_barrier,  &shm_unmap, &fetch,    &unfetch,
  };

  static inline FaultyVfs* active_ = nullptr;
  sqlite3_vfs* base_ = nullptr;
  sqlite3_vfs vfs_{};
  int64_t fail_at_ = 0;
  bool sticky_ = false;
  int64_t calls_ = 0;
  int64_t failed_ = 0;
};

}  // namespace mpk::cache::testing
