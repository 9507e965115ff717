// The kernel cache key: everything that can change the compiled cubin or its validity.
//
// The key is the lower-case hex SHA-256 of canonical_key_text(key), a compact JSON object
// with sorted member names:
//
//   {"arch":"sm_90a","codegen":"3","driver":"13000","format":"mpk-kernel-key/2",
//    "nvrtc":"13.0","options":["--include-path=/b","--include-path=/a","--std=c++17"],
//    "source":"<hex>",
//    "task":{"dtypes":["bf16","bf16"],"fused":["rmsnorm"],"layout":"row_major",
//            "op":"gemv","shapes":[[4096,4096],[4096]]}}
//
// Every field is part of the text, so changing any one of them changes the key. Lists keep
// their order (operand order and fusion order are meaningful); the compile options are in
// cuda::canonical_options form, the one NVRTC is given, which keeps the order that changes
// the result (include paths, the last -D/-U of a macro). Changing this format invalidates
// every cached entry: bump kKeyFormat when it changes.
//   v1 sorted the options, so include-path order was not part of the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpk::cache {

inline constexpr const char* kKeyFormat = "mpk-kernel-key/2";

// What a task computes, independent of how it is compiled.
struct TaskSignature {
  std::string op_kind;                       // e.g. "gemv"; required
  std::vector<std::string> fused_ops;        // fused epilogues/prologues, in application order
  std::vector<std::vector<int64_t>> shapes;  // operand shapes, in operand order
  std::vector<std::string> dtypes;           // operand dtypes ("bf16", ...), in operand order
  std::string layout;                        // e.g. "row_major"
};

struct CacheKey {
  TaskSignature task;
  std::string arch;             // exact target: "sm_90a" and "sm_90" are different keys; required
  std::string nvrtc_version;    // as reported by the caller's NVRTC, e.g. "13.0"
  std::string driver_version;   // as reported by the caller's driver, e.g. "13000"
  std::string codegen_version;  // version of mpk's code generator
  std::vector<std::string> compile_options;  // NVRTC options, any spelling (see above)
  std::string source_hash;                   // hash of the emitted CUDA source
};

// The canonical serialization described above. Throws Error(InvalidArgument) when op_kind or
// arch is empty, a string is not valid UTF-8, or an option is malformed.
std::string canonical_key_text(const CacheKey& key);

// Hex SHA-256 of canonical_key_text(key): the primary key of the cache.
std::string key_digest(const CacheKey& key);

}  // namespace mpk::cache
