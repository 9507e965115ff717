// The mpk-tune subcommands. Each writes its report (a table, or JSON with Context::json) to
// Context::out and returns the process exit status.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

namespace mpk::tune {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;    // the command failed (message on stderr)
inline constexpr int kExitUsage = 2;    // bad arguments
inline constexpr int kExitDamaged = 3;  // verify found damage: bad entries, a damaged file
                                        // (set aside unless read-only), unreadable pages

struct Context {
  std::filesystem::path cache_path;
  bool json = false;
  bool read_only = false;
  std::ostream& out;
};

// Every command but import needs an existing cache file; a missing one is an error
// (Error(NotFound)) rather than silently creating it.
int cmd_list(const Context& ctx, size_t limit);
int cmd_show(const Context& ctx, const std::string& key_prefix);
int cmd_stats(const Context& ctx);
int cmd_prune(const Context& ctx, uint64_t max_bytes);
int cmd_export(const Context& ctx, const std::filesystem::path& file, bool force);
int cmd_import(const Context& ctx, const std::filesystem::path& file);
int cmd_verify(const Context& ctx);

}  // namespace mpk::tune
