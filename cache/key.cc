#include "cache/key.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache/sha256.h"
#include "cuda/nvrtc.h"

namespace mpk::cache {

std::string canonical_key_text(const CacheKey& key) {
  MPK_CHECK(!key.task.op_kind.empty(), InvalidArgument) << "cache key: empty op kind";
  MPK_CHECK(!key.arch.empty(), InvalidArgument) << "cache key: empty arch";
  // nlohmann::json keeps object members sorted, so dump() is canonical.
  nlohmann::json task = {{"op", key.task.op_kind},
                         {"fused", key.task.fused_ops},
                         {"shapes", key.task.shapes},
                         {"dtypes", key.task.dtypes},
                         {"layout", key.task.layout}};
  nlohmann::json j = {{"format", kKeyFormat},
                      {"task", std::move(task)},
                      {"arch", key.arch},
                      {"nvrtc", key.nvrtc_version},
                      {"driver", key.driver_version},
                      {"codegen", key.codegen_version},
                      {"options", cuda::canonical_options(key.compile_options)},
                      {"source", key.source_hash}};
  try {
    return j.dump();
  } catch (const nlohmann::json::type_error& e) {
    MPK_THROW(InvalidArgument) << "cache key: a field is not valid UTF-8 (" << e.what() << ")";
  }
}

std::string key_digest(const CacheKey& key) { return sha256_hex(canonical_key_text(key)); }

}  // namespace mpk::cache
