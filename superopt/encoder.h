// Index expressions (ir/index_expr.h) as Z3 terms, internal to superopt/: C truncating
// division and remainder, every intermediate value inside the C type's range as a side
// condition.
#pragma once

#include <z3++.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/error.h"
#include "ir/index_expr.h"

namespace mpk::superopt {

constexpr int64_t kI64Min = INT64_MIN, kI64Max = INT64_MAX;

// An expression translated to Z3: its value and the conditions under which C evaluates it
// without undefined behaviour (divisors non-zero, every intermediate inside int64).
struct Term {
  z3::expr value;
  z3::expr defined;
};

class Encoder {
 public:
  // `bits`: the C type's width (64: long long, 32: int); every intermediate value must fit.
  explicit Encoder(z3::context& ctx, int bits = 64)
      : ctx_(ctx), lo_(bits == 32 ? INT32_MIN : kI64Min), hi_(bits == 32 ? INT32_MAX : kI64Max) {}

  // Declares that variable `name` never exceeds `max` where the caller binds it (an upper
  // bound for the choice of xor encoding below).
  void bound(const std::string& name, int64_t max) { bounds_[name] = max; }

  Term encode(const ir::IndexExpr& e, const std::map<std::string, z3::expr>& vars) {
    const ir::IndexExpr::Node& n = e.node();
    switch (n.op) {
      case ir::IndexOp::Const: return {ctx_.int_val(n.value), ctx_.bool_val(true)};
      case ir::IndexOp::Var: {
        auto it = vars.find(n.name);
        MPK_CHECK(it != vars.end(), InvalidArgument) << "index variable '" << n.name << "' is unbound";
        return {it->second, ctx_.bool_val(true)};
      }
      default: break;
    }
    const Term a = encode(n.args[0], vars), b = encode(n.args[1], vars);
    z3::expr v = a.value;
    z3::expr ok = a.defined && b.defined;
    switch (n.op) {
      case ir::IndexOp::Add: v = a.value + b.value; break;
      case ir::IndexOp::Sub: v = a.value - b.value; break;
      case ir::IndexOp::Mul: v = a.value * b.value; break;
      case ir::IndexOp::Div:
      case ir::IndexOp::Mod: {
        // C truncates toward zero; Z3's div rounds toward -infinity for a positive divisor.
        const z3::expr qa = z3::ite(a.value >= 0, a.value, -a.value);
        const z3::expr qb = z3::ite(b.value >= 0, b.value, -b.value);
        const z3::expr q = z3::ite((a.value >= 0) == (b.value > 0), qa / qb, -(qa / qb));
        v = n.op == ir::IndexOp::Div ? q : a.value - b.value * q;
        ok = ok && b.value != 0;
        break;
      }
      case ir::IndexOp::Min: v = z3::ite(a.value <= b.value, a.value, b.value); break;
      case ir::IndexOp::Max: v = z3::ite(a.value >= b.value, a.value, b.value); break;
      case ir::IndexOp::Xor: {  // bitwise over the type's width, defined for operands >= 0 only
        const std::optional<int64_t> ua = upper_bound(n.args[0]), ub = upper_bound(n.args[1]);
        if (ua && ub && std::max(*ua, *ub) < 256) {
          // Operands of a few bits (a chunk index, a row mod 8): bit i of the result is
          // (a / 2^i + b / 2^i) % 2, linear arithmetic that Z3 decides far faster than the
          // bit-vector conversion below. Equal for operands >= 0, the only defined ones.
          v = ctx_.int_val(0);
          for (int64_t bit = 1; bit <= std::max(*ua, *ub); bit *= 2)
            v = v + (a.value / ctx_.int_val(bit) + b.value / ctx_.int_val(bit)) % 2 * ctx_.int_val(bit);
        } else {
          const unsigned w = lo_ == INT32_MIN ? 32 : 64;
          v = z3::bv2int(z3::int2bv(w, a.value) ^ z3::int2bv(w, b.value), false);
        }
        ok = ok && a.value >= 0 && b.value >= 0;
        break;
      }
      case ir::IndexOp::Shr:
      case ir::IndexOp::And: {  // a >= 0 by a constant: as a / 2^k and a % (m + 1) above
        const ir::IndexExpr& k = n.args[1];
        const int64_t c = k.op() == ir::IndexOp::Const ? k.node().value : -1;
        const bool shift = n.op == ir::IndexOp::Shr;
        // A shift of an int by its width or more is undefined in C: below the type's bits.
        const int64_t max_shift = lo_ == INT32_MIN ? 31 : 62;
        MPK_CHECK(shift ? ir::shift_in_domain(c) && c <= max_shift : ir::mask_in_domain(c), InvalidArgument)
            << (shift ? "a shift by " : "a mask ") << ir::to_string(k) << ": a constant "
            << (shift ? "in [0, " + std::to_string(max_shift) + "]" : std::string("2^k - 1")) << " only";
        const ir::IndexExpr m(shift ? int64_t{1} << c : c + 1);
        const Term t = encode(shift ? n.args[0] / m : n.args[0] % m, vars);
        v = t.value;
        ok = t.defined && a.value >= 0;
        break;
      }
      default: MPK_ICHECK(false) << "unknown index op";
    }
    ok = ok && v >= ctx_.int_val(lo_) && v <= ctx_.int_val(hi_);
    return {v, ok};
  }

 private:
  // An upper bound of e's value that holds whatever its variables (C semantics), where one
  // follows from its constants and declared bounds: x % m < m and x / m <= bound(x) / m for a
  // constant m > 0.
  std::optional<int64_t> upper_bound(const ir::IndexExpr& e) const {
    const ir::IndexExpr::Node& n = e.node();
    auto divisor = [&]() -> std::optional<int64_t> {
      const ir::IndexExpr& d = n.args[1];
      if (d.op() == ir::IndexOp::Const && d.node().value > 0) return d.node().value;
      return std::nullopt;
    };
    switch (n.op) {
      case ir::IndexOp::Const: return n.value >= 0 ? std::optional<int64_t>(n.value) : std::nullopt;
      case ir::IndexOp::Var: {
        auto it = bounds_.find(n.name);
        return it == bounds_.end() ? std::nullopt : std::optional<int64_t>(it->second);
      }
      case ir::IndexOp::Mod:
        if (auto m = divisor()) return *m - 1;
        return std::nullopt;
      case ir::IndexOp::Div:
        if (auto m = divisor())
          if (auto x = upper_bound(n.args[0])) return *x / *m;
        return std::nullopt;
      case ir::IndexOp::And:
        if (auto m = divisor()) return *m;
        return std::nullopt;
      case ir::IndexOp::Shr:
        if (auto k = divisor(); k && ir::shift_in_domain(*k))
          if (auto x = upper_bound(n.args[0])) return *x >> *k;
        return std::nullopt;
      default: return std::nullopt;
    }
  }

  z3::context& ctx_;
  int64_t lo_, hi_;
  std::map<std::string, int64_t> bounds_;
};


}  // namespace mpk::superopt
