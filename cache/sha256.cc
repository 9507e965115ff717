#include "cache/sha256.h"

#include <openssl/evp.h>

#include "base/error.h"

namespace mpk::cache {

std::string sha256_hex(const void* data, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  MPK_CHECK(EVP_Digest(data, size, md, &md_len, EVP_sha256(), nullptr) == 1, Internal)
      << "OpenSSL SHA-256 failed";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * md_len, '0');
  for (unsigned int i = 0; i < md_len; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace mpk::cache
