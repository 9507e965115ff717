// Errors inside mpk. C++ code throws mpk::Error; the C API maps its kind to an mpk_status.
//
//   MPK_CHECK(n <= vocab, InvalidArgument) << "token id " << n << " >= vocab " << vocab;
//   MPK_ICHECK(ptr != nullptr) << "internal invariant";
//
// Routine failures inside searches are values (Expected<T>), not exceptions.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace mpk {

// One kind per documented mpk_status (src/include/mpk/mpk.h), same order of meaning.
enum class ErrorKind {
  InvalidArgument,   // bad argument from the caller
  NotFound,          // a file or entry does not exist
  InvalidModel,      // malformed config.json / safetensors / tensor set
  Unsupported,       // well-formed but not supported (architecture, dtype, option)
  NoDevice,          // no CUDA driver or no GPU
  Cuda,              // a CUDA driver call failed
  Compile,           // NVRTC failed; message carries the log and the options
  Cache,             // the kernel cache failed
  Capacity,          // a capacity was exceeded (KV cache, buffer)
  OutOfMemory,
  BadState,          // call not valid in the object's current state
  Io,                // read/write/mmap failure
  Timeout,           // a deadline passed (cancelled work)
  Numerics,          // logits or a chosen token came from NaN/Inf values
  Internal,          // an mpk bug
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message)
      : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
// Collects the message of a failed check; Thrower turns it into an exception. `&` binds
// looser than `<<`, so the whole message is streamed before the throw.
class ErrorStream {
 public:
  ErrorStream(ErrorKind kind, const char* file, int line, const char* cond);
  template <typename T>
  ErrorStream& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  ErrorKind kind() const { return kind_; }
  std::string str() const { return os_.str(); }
  std::string where() const { return where_; }

 private:
  ErrorKind kind_;
  std::string where_;
  std::ostringstream os_;
};

struct Thrower {
  [[noreturn]] void operator&(const ErrorStream& s) const;
};
}  // namespace detail

// Throws mpk::Error of the given kind with the streamed message.
#define MPK_THROW(KIND) \
  ::mpk::detail::Thrower() & ::mpk::detail::ErrorStream(::mpk::ErrorKind::KIND, __FILE__, __LINE__, nullptr)
// User-facing check: the message should say what was wrong and what was expected.
#define MPK_CHECK(COND, KIND) \
  if (COND) {                 \
  } else                      \
    ::mpk::detail::Thrower() & ::mpk::detail::ErrorStream(::mpk::ErrorKind::KIND, __FILE__, __LINE__, nullptr)
// Internal invariant: failure is an mpk bug and reports file, line and condition.
#define MPK_ICHECK(COND) \
  if (COND) {            \
  } else                 \
    ::mpk::detail::Thrower() & ::mpk::detail::ErrorStream(::mpk::ErrorKind::Internal, __FILE__, __LINE__, #COND)

// A value or an error, for routine failures that are not exceptional.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error error) : v_(std::move(error)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() {
    if (!ok()) throw std::get<1>(v_);
    return std::get<0>(v_);
  }
  const T& value() const {
    if (!ok()) throw std::get<1>(v_);
    return std::get<0>(v_);
  }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace mpk
