// Integer index expressions: one description of a layout formula that the host evaluates, the
// device code prints (to_c) and the prover encodes (superopt/). Semantics are C's on 64-bit
// integers (`long long` on the device): truncating division and remainder. An expression is
// immutable and cheap to copy (shared nodes).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mpk::ir {

// Xor: bitwise on operands >= 0 only (a shared-memory swizzle); a negative operand is an error
// on the host and an undefined value to the prover. Shr and And: a >> k and a & m for a >= 0, k
// in [0, 62] and a mask m = 2^k - 1 (a thread's warp and lane: the compiler keeps them as the
// shift and mask the rest of the kernel computes, where a signed / 32 and % 32 cost registers);
// otherwise an error on the host. The prover takes constant k and m only, k below the width of
// the C type (at most 31 for int).
enum class IndexOp { Const, Var, Add, Sub, Mul, Div, Mod, Min, Max, Xor, Shr, And };

class IndexExpr {
 public:
  struct Node {
    IndexOp op;
    int64_t value = 0;   // Const
    std::string name;    // Var
    std::vector<IndexExpr> args;  // two for the binary ops
  };

  IndexExpr(int64_t value);  // a constant (implicit: `c + 1`)
  static IndexExpr var(std::string name);
  static IndexExpr binary(IndexOp op, IndexExpr a, IndexExpr b);

  const Node& node() const { return *node_; }
  IndexOp op() const { return node_->op; }

 private:
  explicit IndexExpr(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  std::shared_ptr<const Node> node_;
};

inline IndexExpr operator+(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Add, a, b); }
inline IndexExpr operator-(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Sub, a, b); }
inline IndexExpr operator*(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Mul, a, b); }
inline IndexExpr operator/(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Div, a, b); }
inline IndexExpr operator%(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Mod, a, b); }
inline IndexExpr min(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Min, a, b); }
inline IndexExpr max(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Max, a, b); }
inline IndexExpr operator^(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Xor, a, b); }
inline IndexExpr operator>>(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::Shr, a, b); }
inline IndexExpr operator&(IndexExpr a, IndexExpr b) { return IndexExpr::binary(IndexOp::And, a, b); }
// The domains of Shr's k and And's m, for the host and the prover alike.
inline bool shift_in_domain(int64_t k) { return k >= 0 && k <= 62; }
inline bool mask_in_domain(int64_t m) { return m >= 0 && m < INT64_MAX && (m & (m + 1)) == 0; }

using IndexEnv = std::map<std::string, int64_t>;

// The value under `env` with C semantics. Error(InvalidArgument) for an unbound variable, a
// division by zero or a 64-bit overflow (undefined behaviour in C: never a silent wrap).
int64_t eval(const IndexExpr& e, const IndexEnv& env);

// C source of the expression over `long long` operands (or `int` ones: the caller's variables
// and the literals as they are), variables printed as their names (the caller binds them),
// every operation parenthesised.
enum class CType { LongLong, Int };
std::string to_c(const IndexExpr& e, CType type = CType::LongLong);

// e with each variable named in `with` replaced by its expression (the others kept): how one
// formula's variable becomes another formula.
IndexExpr substitute(const IndexExpr& e, const std::map<std::string, IndexExpr>& with);

// "(c * n) / C"-like text for messages and tests.
std::string to_string(const IndexExpr& e);

}  // namespace mpk::ir
