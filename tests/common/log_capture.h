// Warnings logged while a LogCapture is alive, kept off the console (tests that expect them).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"

namespace mpk {

// Collects warnings while alive (and keeps expected ones off the console).
class LogCapture {
 public:
  LogCapture() {
    set_log_sink([this](LogLevel level, const std::string& msg) {
      std::lock_guard lock(mu_);
      if (level >= LogLevel::Warn) lines_.push_back(msg);
    });
  }
  ~LogCapture() { set_log_sink({}); }
  std::string text() {
    std::lock_guard lock(mu_);
    std::string all;
    for (auto& l : lines_) all += l + "\n";
    return all;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace mpk
