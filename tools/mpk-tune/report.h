// Plain-text tables and value formatting for mpk-tune.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mpk::tune {

// `j` as text for --json output; bytes that are not UTF-8 (a path) are replaced, not thrown on.
std::string json_text(const nlohmann::json& j, int indent = -1);

// Columns padded to their widest cell; columns listed in `right` are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<size_t> right = {});
  void add(std::vector<std::string> row);
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

std::string human_bytes(uint64_t bytes);               // "35.2 KiB"
std::string utc_time(int64_t unix_seconds);            // "2024-05-01 12:00:00Z"; "-" for 0
std::string time_us_text(std::optional<double> t);     // "12.50"; "-" when absent

}  // namespace mpk::tune
