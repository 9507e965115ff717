#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace mpk::model {
namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace

RegularFile::RegularFile(const std::filesystem::path& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    MPK_CHECK(err != ENOENT, NotFound) << path.string() << ": file not found";
    MPK_CHECK(err != ELOOP, InvalidModel)
        << path.string() << ": too many levels of symbolic links (a symlink loop?)";
    MPK_CHECK(err != EACCES && err != EPERM, Io) << path.string() << ": permission denied";
    MPK_THROW(Io) << path.string() << ": cannot open: " << std::strerror(err);
  }
  fd_ = fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    MPK_THROW(Io) << path.string() << ": fstat failed: " << std::strerror(err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    MPK_THROW(InvalidModel) << path.string() << ": not a regular file ("
                            << file_type_name(st.st_mode) << ")";
  }
  size_ = size_t(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t RegularFile::read_at(size_t offset, void* dst, size_t n) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(dst) + done, n - done, off_t(offset + done));
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    MPK_CHECK(r >= 0, Io) << path_.string() << ": read failed: " << std::strerror(errno);
    if (r == 0) break;  // end of file
    done += size_t(r);
  }
  return done;
}

MappedFile::MappedFile(const std::filesystem::path& path) : file_(path) {
  size_ = file_.size();
  if (size_ == 0) return;  // mmap rejects length 0
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file_.fd(), 0);
  MPK_CHECK(p != MAP_FAILED, Io) << path.string() << ": mmap of " << size_
                                 << " bytes failed: " << std::strerror(errno);
  data_ = static_cast<const std::byte*>(p);
}

MappedFile::~MappedFile() { release(); }

void MappedFile::make_resident() {
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  MPK_CHECK(p != MAP_FAILED, OutOfMemory)
      << path().string() << ": cannot allocate " << size_ << " bytes for the weights";
  size_t got = 0;
  try {
    got = file_.read_at(0, p, size_);
  } catch (...) {
    ::munmap(p, size_);
    throw;
  }
  if (got != size_) {
    ::munmap(p, size_);
    MPK_THROW(Io) << path().string() << ": file is now " << got << " bytes, was " << size_
                  << " when loaded (truncated after load?)";
  }
  ::mprotect(p, size_, PROT_READ);
  ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = static_cast<const std::byte*>(p);
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
}

}  // namespace mpk::model
