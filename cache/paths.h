// Where the cache lives, what may be opened as a cache file, and how big it may grow by default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

namespace mpk::cache {

inline constexpr uint64_t kDefaultMaxBytes = uint64_t(2) << 30;  // 2 GiB of payload

inline constexpr const char* kCacheFileName = "kernels.db";

// The one rule for the default kernel cache folder: $MPK_CACHE_DIR when set, else
// $HOME/.cache/mpk, else <home directory in the password database>/.cache/mpk. Never a shared
// folder such as /tmp, where another user could plant kernels. Throws Error(Cache) when none
// of these gives a folder.
std::filesystem::path default_cache_dir();

// default_cache_dir() / kCacheFileName.
std::filesystem::path default_cache_path();

// true when a regular file is at `path`, false when nothing is; throws Error(InvalidArgument)
// naming what is there otherwise, Error(Io) when it cannot be told (a symlink loop, a folder
// that cannot be searched).
bool regular_file_exists(const std::filesystem::path& path, const char* what = "kernel cache");

// "4096", "512K", "64M", "2G", "1T" (binary units, optional trailing "B"/"iB"); nullopt when
// the text is not such a size or overflows.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// $MPK_CACHE_MAX_BYTES (parse_byte_size syntax) or kDefaultMaxBytes; warns on a bad value.
uint64_t default_max_bytes();

}  // namespace mpk::cache
