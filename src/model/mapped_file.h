// Files of a model directory: opened safely (RegularFile) and mapped or read whole (MappedFile).
#pragma once

#include <cstddef>
#include <filesystem>

namespace mpk::model {

// An open regular file. Opening never blocks (a FIFO or device is rejected after a
// non-blocking open), and each failure says what happened. Errors: NotFound (no such file),
// Io (permission denied, fstat or read failure), InvalidModel (a symlink loop, a directory or
// anything that is not a regular file).
class RegularFile {
 public:
  explicit RegularFile(const std::filesystem::path& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  int fd() const { return fd_; }
  size_t size() const { return size_; }  // at open
  const std::filesystem::path& path() const { return path_; }
  // Reads up to n bytes at `offset` (pread, retried on EINTR); fewer only at end of file.
  // Error(Io) on a read failure.
  size_t read_at(size_t offset, void* dst, size_t n) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  size_t size_ = 0;
};

// A whole file in memory, read-only: first memory-mapped; make_resident() replaces the mapping
// by a private copy read with pread, so that the contents no longer depend on the file (a
// mapped file truncated by someone else raises SIGBUS on access, which no library can catch).
class MappedFile {
 public:
  // Opens (RegularFile's errors) and maps `path`; Error(Io) when mmap fails. An empty file
  // maps to data() == nullptr, size() == 0.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return file_.path(); }

  // Reads the file into anonymous memory and drops the mapping; data() changes. Error(Io) when
  // the file is now shorter than it was at open (it was truncated) or cannot be read.
  void make_resident();
  // Drops the contents (data() becomes nullptr): for callers that copied what they need.
  void release();

 private:
  RegularFile file_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mpk::model
