// A point in time after which work that has not started is cancelled.
#pragma once

#include <chrono>

namespace mpk::cuda {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // The default deadline never passes.
  Deadline() = default;
  static Deadline never() { return Deadline(); }
  static Deadline at(Clock::time_point t) { return Deadline(t); }
  static Deadline after(Clock::duration d) { return Deadline(Clock::now() + d); }

  bool is_never() const { return when_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= when_; }
  Clock::time_point when() const { return when_; }

 private:
  explicit Deadline(Clock::time_point t) : when_(t) {}
  Clock::time_point when_ = Clock::time_point::max();
};

}  // namespace mpk::cuda
