// Typed reads of parsed JSON whose errors name the file and the key (internal to src/model).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace mpk::model::detail {

using Json = nlohmann::json;

// Parses `text`; Error(InvalidModel) carrying the parser's message on bad JSON.
Json parse_json(std::string_view text, const std::string& origin);

// The largest JSON file mpk reads (config.json, the shard index): real ones are kilobytes.
constexpr size_t kMaxJsonFileBytes = size_t(64) << 20;

// Reads a whole regular file of at most `max_bytes` (RegularFile's errors; Error(InvalidModel)
// when it is larger).
std::string read_text_file(const std::filesystem::path& path, size_t max_bytes);

// Reads and parses a JSON file: read_text_file's errors, Error(InvalidModel) when it is not JSON.
Json read_json_file(const std::filesystem::path& path);

// A short, printable rendering of a value for error messages; never recursive (containers are
// described by their size), so any nesting depth is safe.
std::string describe(const Json& v);

// `s` with control characters and NUL escaped as \xNN: names read from files are printed
// whole (a C string would end at a NUL) and cannot inject terminal escapes.
std::string printable(std::string_view s);

// Reads the keys of one JSON object. `prefix` is prepended to key names in messages
// ("rope_scaling." for a nested object). A key whose value is null counts as absent.
class ObjectReader {
 public:
  ObjectReader(const Json& obj, std::string origin, std::string prefix = "");

  const Json* get(std::string_view key) const;  // nullptr when absent or null
  bool has(std::string_view key) const { return get(key) != nullptr; }
  const Json& object() const { return obj_; }
  const std::string& origin() const { return origin_; }
  std::string key_name(std::string_view key) const { return prefix_ + std::string(key); }

  // Required positive integer that fits an int.
  int positive_int(std::string_view key) const;
  std::optional<int> opt_positive_int(std::string_view key) const;
  std::optional<double> opt_number(std::string_view key) const;
  std::optional<bool> opt_bool(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;

 private:
  const Json& obj_;
  std::string origin_;
  std::string prefix_;
};

// An integer value (signed or unsigned JSON number within int64), else Error(InvalidModel)
// naming `what`.
int64_t as_int64(const Json& v, const std::string& origin, const std::string& what);

}  // namespace mpk::model::detail
