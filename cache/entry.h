// What the cache stores for one key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpk::cache {

// Where and when an entry was built.
struct Provenance {
  std::string host;
  int64_t unix_time = 0;  // seconds
  std::string mpk_version;
};

// One cached kernel. A builder fills the first four fields; publish fills the rest (it keeps a
// provenance the caller set).
struct Entry {
  std::vector<uint8_t> cubin;
  std::string params_json = "{}";        // chosen candidate parameters (JSON text)
  std::optional<double> time_us;         // measured kernel time; absent when not timed
  std::string verification_json = "{}";  // verification record (JSON text), see is_verified
  Provenance provenance;

  std::string key;        // hex SHA-256 of key_text
  std::string key_text;   // canonical key serialization; empty for entries migrated from v1
  std::string checksum;   // hex SHA-256 of cubin, checked on every load
  int64_t last_used = 0;  // unix seconds of the last load or publish (LRU pruning)
};

// An entry without its cubin: what listings return.
struct EntryInfo {
  std::string key;
  std::string key_text;
  std::string checksum;
  std::string params_json;
  std::optional<double> time_us;
  std::string verification_json;
  Provenance provenance;
  int64_t last_used = 0;
  uint64_t cubin_bytes = 0;
  uint64_t bytes = 0;  // what the entry counts against the byte budget
  bool verified = false;
};

// An entry is verified when its verification record is a JSON object whose "passed" member
// is true (the verifier writes the details next to it).
bool is_verified(const std::string& verification_json);

// The conflict rule of import (and of publish, with ties going to the newcomer): a verified
// entry beats an unverified one; between equals the faster measured time wins, and a timed
// entry beats an untimed one. True when `a` is strictly better than `b`.
bool is_better(bool a_verified, std::optional<double> a_time_us, bool b_verified,
               std::optional<double> b_time_us);

// Bytes an entry counts against the byte budget: cubin plus its text fields.
uint64_t entry_bytes(const Entry& e);

// This host, the current time and this mpk version.
Provenance local_provenance(int64_t unix_time);

}  // namespace mpk::cache
