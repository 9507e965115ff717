#include "report.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace mpk::tune {

Table::Table(std::vector<std::string> header, std::vector<size_t> right) : right_(header.size(), false) {
  for (size_t c : right)
    if (c < right_.size()) right_[c] = true;
  rows_.push_back(std::move(header));
}

void Table::add(std::vector<std::string> row) {
  row.resize(right_.size());
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(right_.size(), 0);
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows_) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      std::string pad(width[c] - row[c].size(), ' ');
      line += right_[c] ? pad + row[c] : (c + 1 == row.size() ? row[c] : row[c] + pad);
    }
    out << line << '\n';
  }
}

std::string human_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string utc_time(int64_t unix_seconds) {
  if (unix_seconds == 0) return "-";
  std::time_t t = std::time_t(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

std::string time_us_text(std::optional<double> t) { return t ? fmt::format("{:.2f}", *t) : "-"; }

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mpk::tune
