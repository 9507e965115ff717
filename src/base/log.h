// Process-wide logging. Default: warnings and errors to stderr; MPK_LOG=debug|info|warn|error
// sets the level. A runtime may install a sink (mpk_runtime_config.log_callback).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>

namespace mpk {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

using LogSink = std::function<void(LogLevel, const std::string&)>;

// Replaces the sink; an empty function restores stderr. `owner` tags it so that
// clear_log_sink(owner) removes it only while it is still the one installed. Thread-safe; the
// sink is called outside mpk's lock, so it may call back into mpk.
void set_log_sink(LogSink sink, const void* owner = nullptr);
void clear_log_sink(const void* owner);
bool log_enabled(LogLevel level);
void log_message(LogLevel level, const std::string& message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(level)) log_message(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mpk
