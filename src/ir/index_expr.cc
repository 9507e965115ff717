#include "ir/index_expr.h"

#include "base/error.h"

namespace mpk::ir {
namespace {

const char* op_text(IndexOp op) {
  switch (op) {
    case IndexOp::Add: return " + ";
    case IndexOp::Sub: return " - ";
    case IndexOp::Mul: return " * ";
    case IndexOp::Div: return " / ";
    case IndexOp::Mod: return " % ";
    case IndexOp::Xor: return " ^ ";
    case IndexOp::Shr: return " >> ";
    case IndexOp::And: return " & ";
    default: return "?";
  }
}

}  // namespace

IndexExpr::IndexExpr(int64_t value) : node_(std::make_shared<const Node>(Node{IndexOp::Const, value, {}, {}})) {}

IndexExpr IndexExpr::var(std::string name) {
  MPK_CHECK(!name.empty(), InvalidArgument) << "index variable without a name";
  return IndexExpr(std::make_shared<const Node>(Node{IndexOp::Var, 0, std::move(name), {}}));
}

IndexExpr IndexExpr::binary(IndexOp op, IndexExpr a, IndexExpr b) {
  MPK_CHECK(op != IndexOp::Const && op != IndexOp::Var, InvalidArgument) << "not a binary op";
  return IndexExpr(std::make_shared<const Node>(Node{op, 0, {}, {std::move(a), std::move(b)}}));
}

int64_t eval(const IndexExpr& e, const IndexEnv& env) {
  const IndexExpr::Node& n = e.node();
  if (n.op == IndexOp::Const) return n.value;
  if (n.op == IndexOp::Var) {
    auto it = env.find(n.name);
    MPK_CHECK(it != env.end(), InvalidArgument) << "index variable '" << n.name << "' is unbound";
    return it->second;
  }
  const int64_t a = eval(n.args[0], env), b = eval(n.args[1], env);
  int64_t r = 0;
  bool overflow = false;
  switch (n.op) {
    case IndexOp::Add: overflow = __builtin_add_overflow(a, b, &r); break;
    case IndexOp::Sub: overflow = __builtin_sub_overflow(a, b, &r); break;
    case IndexOp::Mul: overflow = __builtin_mul_overflow(a, b, &r); break;
    case IndexOp::Div:
    case IndexOp::Mod:
      MPK_CHECK(b != 0, InvalidArgument) << "division by zero in " << to_string(e);
      overflow = a == INT64_MIN && b == -1;
      if (!overflow) r = n.op == IndexOp::Div ? a / b : a % b;
      break;
    case IndexOp::Min: r = a < b ? a : b; break;
    case IndexOp::Max: r = a > b ? a : b; break;
    case IndexOp::Xor:
      MPK_CHECK(a >= 0 && b >= 0, InvalidArgument) << "xor of a negative value in " << to_string(e);
      r = a ^ b;
      break;
    case IndexOp::Shr:
      MPK_CHECK(a >= 0 && shift_in_domain(b), InvalidArgument) << "shift out of its domain in " << to_string(e);
      r = a >> b;
      break;
    case IndexOp::And:
      MPK_CHECK(a >= 0 && mask_in_domain(b), InvalidArgument)
          << "mask out of its domain in " << to_string(e);
      r = a & b;
      break;
    default: MPK_ICHECK(false) << "unknown index op";
  }
  MPK_CHECK(!overflow, InvalidArgument) << "64-bit overflow in " << to_string(e);
  return r;
}

namespace {

// Appends e's text: C source (`c`; `wide`: long long operands, every operation parenthesised;
// else int operands as they are) or the short form for messages. Built by appending: gcc 12
// warns falsely on chained operator+.
void print(const IndexExpr& e, bool c, std::string& out, bool wide = true) {
  const IndexExpr::Node& n = e.node();
  const bool cw = c && wide;  // operands cast to long long
  switch (n.op) {
    case IndexOp::Const:
      if (cw) out += '(';
      out += std::to_string(n.value);
      if (cw) out += "LL)";
      return;
    case IndexOp::Var:
      if (cw) out += "((long long)";
      out += n.name;
      if (cw) out += ')';
      return;
    case IndexOp::Min:
    case IndexOp::Max:
      out += n.op == IndexOp::Min ? "min(" : "max(";
      print(n.args[0], c, out, wide);
      out += ", ";
      print(n.args[1], c, out, wide);
      out += ')';
      return;
    case IndexOp::Shr:
      if (c) {
        // A shift of a value >= 0 (its domain) in C as an unsigned one: the same value, and the
        // compiler sees it cannot be negative (a signed warp index cost a kernel 16 bytes of
        // spill).
        out += wide ? "((long long)((unsigned long long)" : "((int)((unsigned)";
        print(n.args[0], c, out, wide);
        out += " >> ";
        print(n.args[1], c, out, wide);
        out += "))";
        return;
      }
      [[fallthrough]];
    default:
      out += '(';
      print(n.args[0], c, out, wide);
      out += op_text(n.op);
      print(n.args[1], c, out, wide);
      out += ')';
  }
}

}  // namespace

IndexExpr substitute(const IndexExpr& e, const std::map<std::string, IndexExpr>& with) {
  const IndexExpr::Node& n = e.node();
  switch (n.op) {
    case IndexOp::Const: return e;
    case IndexOp::Var: {
      auto it = with.find(n.name);
      return it == with.end() ? e : it->second;
    }
    default: return IndexExpr::binary(n.op, substitute(n.args[0], with), substitute(n.args[1], with));
  }
}

std::string to_c(const IndexExpr& e, CType type) {
  std::string s;
  print(e, true, s, type == CType::LongLong);
  return s;
}

std::string to_string(const IndexExpr& e) {
  std::string s;
  print(e, false, s);
  return s;
}

}  // namespace mpk::ir
