#include "cache/paths.h"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace mpk::cache {
namespace fs = std::filesystem;
namespace {

const char* type_name(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block:
    case fs::file_type::character: return "a device";
    default: return "something other than a file";
  }
}

}  // namespace

std::filesystem::path default_cache_dir() {
  if (const char* dir = std::getenv("MPK_CACHE_DIR"); dir && *dir) return dir;
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "mpk";
  // Services and containers often run without HOME; the account's home still applies.
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  bool ok = getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && pw.pw_dir &&
            pw.pw_dir[0] == '/';
  MPK_CHECK(ok, Cache) << "no kernel cache folder: MPK_CACHE_DIR and HOME are unset and user " << geteuid()
                       << " has no home directory; set MPK_CACHE_DIR";
  return std::filesystem::path(pw.pw_dir) / ".cache" / "mpk";
}

std::filesystem::path default_cache_path() { return default_cache_dir() / kCacheFileName; }

bool regular_file_exists(const fs::path& path, const char* what) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return false;
  MPK_CHECK(!ec, Io) << what << " " << path.string() << ": " << ec.message();
  MPK_CHECK(st.type() == fs::file_type::regular, InvalidArgument)
      << what << " " << path.string() << " is " << type_name(st.type()) << ", not a regular file";
  return true;
}

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  size_t i = 0;
  uint64_t value = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    uint64_t digit = uint64_t(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string unit;
  for (; i < text.size(); ++i) unit += char(std::toupper(static_cast<unsigned char>(text[i])));
  int shift = 0;
  if (!unit.empty() && unit.find_first_of("KMGT") == 0) {
    shift = unit[0] == 'K' ? 10 : unit[0] == 'M' ? 20 : unit[0] == 'G' ? 30 : 40;
    unit.erase(0, 1);
    if (unit == "I" || unit == "IB") unit.clear();
  }
  if (!unit.empty() && unit != "B") return std::nullopt;
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

uint64_t default_max_bytes() {
  const char* env = std::getenv("MPK_CACHE_MAX_BYTES");
  if (!env || !*env) return kDefaultMaxBytes;
  if (auto v = parse_byte_size(env)) return *v;
  log(LogLevel::Warn, "MPK_CACHE_MAX_BYTES='{}' is not a size; using {} bytes", env, kDefaultMaxBytes);
  return kDefaultMaxBytes;
}

}  // namespace mpk::cache
