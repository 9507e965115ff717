#include "cache/key.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache/sha256.h"

namespace mpk::cache {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Trims and collapses inner whitespace runs into one space.
std::string squeeze(const std::string& s) {
  std::string out;
  bool pending_space = false;
  for (char c : s) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

// A flag that may take its value from the next token.
bool is_bare_flag(const std::string& s) { return !s.empty() && s[0] == '-' && s.find('=') == std::string::npos; }

}  // namespace

std::vector<std::string> canonical_options(const std::vector<std::string>& options) {
  std::vector<std::string> out;
  bool last_takes_value = false;
  for (const std::string& raw : options) {
    std::string opt = squeeze(raw);
    if (opt.empty()) continue;
    size_t space = opt.find(' ');
    if (space != std::string::npos && is_bare_flag(opt.substr(0, space))) opt[space] = '=';
    if (opt[0] != '-' && last_takes_value) {
      out.back() += '=' + opt;
      last_takes_value = false;
      continue;
    }
    last_takes_value = is_bare_flag(opt);
    out.push_back(std::move(opt));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

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
                      {"options", canonical_options(key.compile_options)},
                      {"source", key.source_hash}};
  try {
    return j.dump();
  } catch (const nlohmann::json::type_error& e) {
    MPK_THROW(InvalidArgument) << "cache key: a field is not valid UTF-8 (" << e.what() << ")";
  }
}

std::string key_digest(const CacheKey& key) { return sha256_hex(canonical_key_text(key)); }

}  // namespace mpk::cache
