#include "base/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace mpk {
namespace {

std::mutex g_mu;
std::shared_ptr<const LogSink> g_sink;
const void* g_owner = nullptr;

LogLevel level_from_env() {
  const char* e = std::getenv("MPK_LOG");
  if (!e) return LogLevel::Warn;
  if (!std::strcmp(e, "debug")) return LogLevel::Debug;
  if (!std::strcmp(e, "info")) return LogLevel::Info;
  if (!std::strcmp(e, "error")) return LogLevel::Error;
  return LogLevel::Warn;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warning";
    case LogLevel::Error: return "error";
  }
  return "?";
}

}  // namespace

void set_log_sink(LogSink sink, const void* owner) {
  auto next = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  std::lock_guard lock(g_mu);
  g_sink = std::move(next);
  g_owner = owner;
}

void clear_log_sink(const void* owner) {
  std::lock_guard lock(g_mu);
  if (g_owner != owner) return;
  g_sink.reset();
  g_owner = nullptr;
}

bool log_enabled(LogLevel level) {
  static const LogLevel min = level_from_env();
  return level >= min;
}

void log_message(LogLevel level, const std::string& message) {
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard lock(g_mu);
    sink = g_sink;
  }
  if (sink) {
    (*sink)(level, message);
  } else {
    std::fprintf(stderr, "mpk %s: %s\n", level_name(level), message.c_str());
  }
}

}  // namespace mpk
