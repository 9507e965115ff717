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

// A switch in the environment that moves an option one way: `flag` becomes `to` where $name is
// `to`'s value ("1" on, "0" off); the other value leaves it as the caller set it; anything else
// is logged and ignored (a misspelt "off" must not pass silently).
void env_switch(const char* name, bool to, bool& flag) {
  const char* v = env(name);
  if (!v) return;
  const std::string s(v);
  if (s == (to ? "1" : "0"))
    flag = to;
  else if (s != "0" && s != "1")
    log(LogLevel::Warn, "{}='{}' is neither 0 nor 1; ignored", name, s);
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
  env_switch("MPK_SHARE_ACTIVATIONS", true, o.share_activations);
  env_switch("MPK_PREFILL_OVERLAP", false, o.prefill_overlap);
  env_switch("MPK_PREFILL_FUSED_ROPE", false, o.prefill_fused_rope);
  env_switch("MPK_PREFILL_STREAMK", true, o.prefill_streamk);
  return o;
}

}  // namespace mpk::rt
