#include "cache/entry.h"

#include <unistd.h>

#include <climits>
#include <nlohmann/json.hpp>

namespace mpk::cache {

bool is_verified(const std::string& verification_json) {
  auto j = nlohmann::json::parse(verification_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto it = j.find("passed");
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

bool is_better(bool a_verified, std::optional<double> a_time_us, bool b_verified,
               std::optional<double> b_time_us) {
  if (a_verified != b_verified) return a_verified;
  if (!a_time_us) return false;
  return !b_time_us || *a_time_us < *b_time_us;
}

uint64_t entry_bytes(const Entry& e) {
  return e.cubin.size() + e.key_text.size() + e.params_json.size() + e.verification_json.size();
}

Provenance local_provenance(int64_t unix_time) {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return Provenance{host, unix_time, MPK_CACHE_MPK_VERSION};
}

}  // namespace mpk::cache
