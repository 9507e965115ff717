#include "ir/layouts.h"

namespace mpk::ir {

const EvenSplit& even_split_formula() {
  static const EvenSplit f = [] {
    const IndexExpr c = IndexExpr::var("c"), len = IndexExpr::var("len"), parts = IndexExpr::var("parts");
    return EvenSplit{c * len / parts, (c + 1) * len / parts};
  }();
  return f;
}

std::pair<int64_t, int64_t> even_split(int64_t len, int64_t parts, int64_t c) {
  const IndexEnv env = {{"c", c}, {"len", len}, {"parts", parts}};
  const EvenSplit& f = even_split_formula();
  return {eval(f.begin, env), eval(f.end, env)};
}

std::string layout_device_functions() {
  const EvenSplit& f = even_split_formula();
  std::string s = "// Printed from src/ir/layouts.cc (proved by superopt/): do not edit.\n";
  for (const auto& [name, e] : {std::pair{"begin", &f.begin}, std::pair{"end", &f.end}}) {
    s += "__device__ __forceinline__ long long mk_even_split_";
    s += name;
    s += "(long long c, long long len, long long parts) { return ";
    s += to_c(*e);
    s += "; }\n";
  }
  return s;
}

}  // namespace mpk::ir
