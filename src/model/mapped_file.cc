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

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    MPK_CHECK(err != ENOENT, NotFound) << path.string() << ": file not found";
    MPK_THROW(Io) << path.string() << ": cannot open: " << std::strerror(err);
  }
  FdCloser closer{fd};
  struct stat st {};
  MPK_CHECK(::fstat(fd, &st) == 0, Io) << path.string() << ": fstat failed: " << std::strerror(errno);
  MPK_CHECK(S_ISREG(st.st_mode), InvalidModel) << path.string() << ": not a regular file";
  size_ = size_t(st.st_size);
  if (size_ == 0) return;  // mmap rejects length 0
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  MPK_CHECK(p != MAP_FAILED, Io) << path.string() << ": mmap of " << size_
                                 << " bytes failed: " << std::strerror(errno);
  data_ = static_cast<const std::byte*>(p);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace mpk::model
