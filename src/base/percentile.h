// Nearest-rank percentiles, the one rule for every latency figure mpk reports (mpk-run, the
// benchmarks, and tools/bench/bench_common.py in Python).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace mpk {

// The smallest value with at least p% of the values at or below it; 0 for no values.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace mpk
