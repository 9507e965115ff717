// A read-only memory mapping of one whole file.
#pragma once

#include <cstddef>
#include <filesystem>

namespace mpk::model {

class MappedFile {
 public:
  // Maps `path` read-only. Error(NotFound) when it does not exist, Error(InvalidModel) when it
  // is not a regular file, Error(Io) when open/fstat/mmap fail. An empty file maps to
  // data() == nullptr, size() == 0.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mpk::model
