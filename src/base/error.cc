#include "base/error.h"

namespace mpk {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
#define MPK_KIND(K) \
  case ErrorKind::K: return #K;
    MPK_KIND(InvalidArgument) MPK_KIND(NotFound) MPK_KIND(InvalidModel) MPK_KIND(Unsupported)
    MPK_KIND(NoDevice) MPK_KIND(Cuda) MPK_KIND(Compile) MPK_KIND(Cache) MPK_KIND(Capacity)
    MPK_KIND(OutOfMemory) MPK_KIND(BadState) MPK_KIND(Io) MPK_KIND(Timeout) MPK_KIND(Numerics) MPK_KIND(Internal)
#undef MPK_KIND
  }
  return "Unknown";
}

namespace detail {

ErrorStream::ErrorStream(ErrorKind kind, const char* file, int line, const char* cond)
    : kind_(kind) {
  if (cond) {
    // Internal checks name the place: the message is for mpk developers.
    std::string f = file;
    auto slash = f.find_last_of('/');
    os_ << "internal error at " << (slash == std::string::npos ? f : f.substr(slash + 1)) << ":"
        << line << ": check failed: " << cond << ": ";
  }
}

void Thrower::operator&(const ErrorStream& s) const { throw Error(s.kind(), s.str()); }

}  // namespace detail
}  // namespace mpk
