// The environment, read in one place: resolve_environment fills what the caller of the runtime
// left unset, once per model load; nothing below it calls getenv for these settings.
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "cache/paths.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

RuntimeOptions resolve_environment(RuntimeOptions o) {
  if (o.cache_dir.empty()) {
    try {
      o.cache_dir = cache::default_cache_dir();
    } catch (const Error& e) {
      // No cache location: the GPU backend compiles without a cache (and says so).
      log(LogLevel::Warn, "{}", e.what());
    }
  }
  if (o.mk_params.empty())
    if (const char* v = env("MPK_MK_PARAMS")) o.mk_params = v;
  if (o.prefetch_bytes < 0) {
    o.prefetch_bytes = kDefaultPrefetchBytes;
    if (const char* v = env("MPK_PREFETCH_BYTES")) {
      const std::optional<uint64_t> b = cache::parse_byte_size(v);  // "32768", "32K", ...
      if (b && *b <= uint64_t(1) << 40)
        o.prefetch_bytes = (long long)*b;
      else
        log(LogLevel::Warn, "MPK_PREFETCH_BYTES='{}' is not a byte count; using {}", v,
            kDefaultPrefetchBytes);
    }
  }
  if (const char* v = env("MPK_SHARE_ACTIVATIONS"); v && std::string(v) == "1")
    o.share_activations = true;
  if (const char* v = env("MPK_PREFILL_OVERLAP"); v && std::string(v) == "0") o.prefill_overlap = false;
  if (const char* v = env("MPK_PREFILL_FUSED_ROPE"); v && std::string(v) == "0") o.prefill_fused_rope = false;
  return o;
}

}  // namespace mpk::rt
