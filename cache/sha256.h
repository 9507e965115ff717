// SHA-256 through OpenSSL's EVP interface, as lower-case hex.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mpk::cache {

// Hex SHA-256 (64 lower-case characters) of `size` bytes at `data`.
std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(std::string_view s) { return sha256_hex(s.data(), s.size()); }

// True for a 64-character lower-case hex string, the shape of every key and checksum.
bool is_sha256_hex(std::string_view s);

}  // namespace mpk::cache
