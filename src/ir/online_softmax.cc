#include "ir/online_softmax.h"

#include <cmath>

#include <fmt/format.h>

#include "base/error.h"

namespace mpk::ir {

RealExpr::RealExpr(double value) : node_(std::make_shared<Node>(Node{RealOp::Const, value, {}, {}})) {}

RealExpr RealExpr::var(std::string name) {
  return RealExpr(std::make_shared<Node>(Node{RealOp::Var, 0, std::move(name), {}}));
}

RealExpr RealExpr::binary(RealOp op, RealExpr a, RealExpr b) {
  MPK_CHECK(op != RealOp::Const && op != RealOp::Var && op != RealOp::Exp2, InvalidArgument)
      << "not a binary real op";
  return RealExpr(std::make_shared<Node>(Node{op, 0, {}, {std::move(a), std::move(b)}}));
}

RealExpr RealExpr::exp2(RealExpr x, Exp2Fn device_function) {
  return RealExpr(std::make_shared<Node>(Node{RealOp::Exp2, 0, {}, {std::move(x)}, device_function}));
}

const char* exp2_function_name(Exp2Fn fn) {
  switch (fn) {
    case Exp2Fn::PfEx2: return "pf_ex2";
    case Exp2Fn::Exp2f: return "exp2f";
  }
  MPK_ICHECK(false) << "unknown 2^x function";
  return "";
}

namespace {

std::string print(const RealExpr& e, bool c) {
  const RealExpr::Node& n = e.node();
  switch (n.op) {
    case RealOp::Const:
      // A C float literal needs a point: "-1.f", not "-1f".
      if (c && std::abs(n.value) < 1e15 && n.value == std::trunc(n.value)) return fmt::format("{}.f", int64_t(n.value));
      if (c) return fmt::format("{:.9g}f", n.value);
      return fmt::format("{:g}", n.value);
    case RealOp::Var: return n.name;
    case RealOp::Add: return "(" + print(n.args[0], c) + " + " + print(n.args[1], c) + ")";
    case RealOp::Mul: return "(" + print(n.args[0], c) + " * " + print(n.args[1], c) + ")";
    case RealOp::Weight: {
      const std::string m = print(n.args[0], c), M = print(n.args[1], c);
      return c ? "(" + m + " == MK_NEG_INF ? 0.f : expf(" + m + " - " + M + "))"
               : "weight(" + m + ", " + M + ")";
    }
    case RealOp::Exp2: return std::string(c ? exp2_function_name(n.fn) : "exp2") + "(" + print(n.args[0], c) + ")";
  }
  return "?";
}

}  // namespace

std::string to_c(const RealExpr& e) { return print(e, true); }
std::string to_string(const RealExpr& e) { return print(e, false); }

const OnlineSoftmax& online_softmax_formulas() {
  static const OnlineSoftmax f = [] {
    const RealExpr m = RealExpr::var("m"), M = RealExpr::var("M");
    const RealExpr a = RealExpr::var("a"), w = RealExpr::var("w"), p = RealExpr::var("p"),
                   v = RealExpr::var("v");
    return OnlineSoftmax{weight(m, M), a * w + p * v};
  }();
  return f;
}

namespace {

const char* const kPrinted = "// Printed from src/ir/online_softmax.cc (proved by superopt/): do not edit.\n";

// "__device__ __forceinline__ float <signature> { return <body>; }"
std::string device_function(const std::string& signature, const RealExpr& body) {
  return std::string("__device__ __forceinline__ float ") + signature + " { return " + to_c(body) + "; }\n";
}

}  // namespace

std::string online_softmax_device_functions(const OnlineSoftmax& f) {
  return kPrinted + device_function("mk_rescale(float m, float M)", f.weight) +
         device_function("mk_os_update(float a, float w, float p, float v)", f.update);
}

const PrefillSoftmax& prefill_softmax_formulas() {
  static const PrefillSoftmax f = [] {
    const RealExpr m = RealExpr::var("m"), M = RealExpr::var("M"), s = RealExpr::var("s"),
                   c = RealExpr::var("c");
    return PrefillSoftmax{RealExpr::exp2((m - M) * c), RealExpr::exp2(s * c - M * c),
                          online_softmax_formulas().update, true};
  }();
  return f;
}

const PrefillSoftmax& prefill_scaled_softmax_formulas() {
  static const PrefillSoftmax f = [] {
    const RealExpr m = RealExpr::var("m"), M = RealExpr::var("M"), s = RealExpr::var("s");
    return PrefillSoftmax{RealExpr::exp2(m - M, Exp2Fn::Exp2f), RealExpr::exp2(s - M, Exp2Fn::Exp2f),
                          online_softmax_formulas().update, false};
  }();
  return f;
}

std::string prefill_softmax_device_functions(const PrefillSoftmax& f, const std::string& prefix) {
  const char* c = f.scale_in_exponent ? ", float c" : "";
  return kPrinted + device_function(fmt::format("{}_rescale(float m, float M{})", prefix, c), f.rescale) +
         device_function(fmt::format("{}_weight(float s, float M{})", prefix, c), f.weight) +
         device_function(fmt::format("{}_update(float a, float w, float p, float v)", prefix), f.update);
}

std::string prefill_softmax_device_functions() {
  return prefill_softmax_device_functions(prefill_softmax_formulas(), "pf_os") +
         prefill_softmax_device_functions(prefill_scaled_softmax_formulas(), "pf_ss");
}

}  // namespace mpk::ir
