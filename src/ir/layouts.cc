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

const LinearItems& linear_items_formula() {
  static const LinearItems f = [] {
    const IndexExpr it = IndexExpr::var("it"), ks = IndexExpr::var("ks"), rows = IndexExpr::var("rows");
    const IndexExpr p = IndexExpr::var("p"), total = IndexExpr::var("total"), r = IndexExpr::var("r");
    const IndexExpr g = IndexExpr::var("g");
    return LinearItems{it / ks * rows, it % ks, p * total + r, g * ks + p};
  }();
  return f;
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
  const LinearItems& li = linear_items_formula();
  s += "__device__ __forceinline__ int mk_lin_row0(int it, int ks, int rows) { return " +
       to_c(li.row0, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ int mk_lin_part(int it, int ks) { return " +
       to_c(li.part, CType::Int) + "; }\n";
  s += "__device__ __forceinline__ int mk_lin_slot(int p, int total, int r) { return " +
       to_c(li.slot, CType::Int) + "; }\n";
  return s;
}

}  // namespace mpk::ir
