#include "ir/graph.h"

#include <array>
#include <sstream>

#include "base/error.h"

namespace mpk::ir {
namespace {

constexpr std::array<OpInfo, kNumOpKinds> kOpInfo = {{
#define MPK_IR_OP(kind, name, inputs, weights, doc) {name, inputs, weights, doc},
#include "ir/ops.def"
#undef MPK_IR_OP
}};

// Shape checks of validate(); `op` is described in messages.
class OpChecker {
 public:
  OpChecker(const Graph& g, size_t index) : g_(g), op_(g.ops[index]), index_(index) {}

  void check() {
    const Op& op = op_;
    const OpInfo& info = op_info(op.kind);
    const Attrs& a = op.attrs;
    switch (op.kind) {
      case OpKind::Embedding: {
        expect_dtype(in(0), DType::I32);
        expect(in(0).shape == Shape{kTokens}, "tokens must be [T]");
        const Shape& w = weight().shape;
        expect(w.size() == 2, "the table must be 2-D");
        expect_act(out(), kTokens, w.at(1));
        break;
      }
      case OpKind::RmsNorm: {
        expect(a.eps > 0, "eps must be positive");
        int64_t h = cols(in(0));
        expect(weight().shape == Shape{h}, "weight must be [" + std::to_string(h) + "]");
        expect_act(out(), rows(in(0)), h);
        break;
      }
      case OpKind::Linear: {
        const Shape& w = weight().shape;
        expect(w.size() == 2 && w[1] == cols(in(0)), "weight must be [N, " +
                                                         std::to_string(cols(in(0))) + "]");
        if (op.bias >= 0) expect(g_.weight(op.bias).shape == Shape{w[0]}, "bias must be [N]");
        expect_act(out(), rows(in(0)), w[0]);
        break;
      }
      case OpKind::HeadRmsNorm: {
        expect(a.eps > 0, "eps must be positive");
        expect_heads(in(0), a.num_heads, a.head_dim);
        expect(weight().shape == Shape{a.head_dim}, "weight must be [head_dim]");
        expect_act(out(), rows(in(0)), cols(in(0)));
        break;
      }
      case OpKind::Rope: {
        expect(a.head_dim % 2 == 0, "head_dim must be even");
        expect(a.rope_theta > 0, "rope_theta must be positive");
        expect_heads(in(0), a.num_heads, a.head_dim);
        expect_positions(in(1), rows(in(0)));
        expect_act(out(), rows(in(0)), cols(in(0)));
        break;
      }
      case OpKind::Attention: {
        const KvCacheDesc& kv = g_.kv_cache;
        expect(a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0,
               "num_heads must be a multiple of num_kv_heads");
        expect(op.layer >= 0 && op.layer < kv.num_layers, "layer outside the KV cache");
        expect(a.num_kv_heads == kv.num_kv_heads && a.head_dim == kv.head_dim,
               "kv heads / head_dim differ from the KV cache");
        expect(a.scale > 0, "scale must be positive");
        int64_t r = rows(in(0));
        expect_heads(in(0), a.num_heads, a.head_dim);
        expect_heads(in(1), a.num_kv_heads, a.head_dim);
        expect_heads(in(2), a.num_kv_heads, a.head_dim);
        expect(rows(in(1)) == r && rows(in(2)) == r, "q, k, v must have the same rows");
        expect_positions(in(3), r);
        expect_act(out(), r, cols(in(0)));
        break;
      }
      case OpKind::SiluMul:
      case OpKind::GeluTanhMul:
      case OpKind::Add:
        expect(in(0).shape == in(1).shape, "both inputs must have the same shape");
        expect_act(out(), rows(in(0)), cols(in(0)));
        break;
      case OpKind::LastRow:
        expect(rows(in(0)) == kTokens, "input must be [T, N]");
        expect_act(out(), 1, cols(in(0)));
        break;
      case OpKind::Argmax:
        expect(in(0).shape.size() == 2 && in(0).shape[0] == 1, "input must be [1, N]");
        expect_dtype(in(0), DType::F32);
        expect_dtype(out(), DType::I32);
        expect(out().shape == Shape{1}, "output must be [1]");
        break;
    }
    (void)info;
  }

 private:
  std::string where() const {
    std::ostringstream os;
    os << "op #" << index_ << " (" << op_name(op_.kind) << " -> "
       << (op_.output >= 0 && size_t(op_.output) < g_.tensors.size() ? g_.tensor(op_.output).name
                                                                      : "?")
       << ")";
    return os.str();
  }
  void expect(bool cond, const std::string& what) const {
    MPK_CHECK(cond, InvalidArgument) << "invalid graph: " << where() << ": " << what;
  }
  const TensorDesc& in(int i) const { return g_.tensor(op_.inputs.at(size_t(i))); }
  const TensorDesc& out() const { return g_.tensor(op_.output); }
  const WeightRef& weight() const { return g_.weight(op_.weight); }
  int64_t rows(const TensorDesc& t) const {
    expect(t.shape.size() == 2 && (t.shape[0] == kTokens || t.shape[0] == 1),
           "'" + t.name + "' must be [T or 1, N], is " + shape_str(t.shape));
    return t.shape[0];
  }
  int64_t cols(const TensorDesc& t) const {
    rows(t);
    return t.shape[1];
  }
  void expect_dtype(const TensorDesc& t, DType d) const {
    expect(t.dtype == d, "'" + t.name + "' must be " + dtype_name(d));
  }
  void expect_act(const TensorDesc& t, int64_t r, int64_t c) const {
    expect_dtype(t, DType::F32);
    expect(t.shape == Shape{r, c}, "output '" + t.name + "' must be " + shape_str({r, c}) +
                                       ", is " + shape_str(t.shape));
  }
  void expect_heads(const TensorDesc& t, int heads, int head_dim) const {
    expect(heads > 0 && head_dim > 0 && cols(t) == int64_t(heads) * head_dim,
           "'" + t.name + "' must have heads * head_dim columns");
  }
  void expect_positions(const TensorDesc& t, int64_t r) const {
    expect_dtype(t, DType::I32);
    expect(t.shape == Shape{r}, "positions must have one entry per row");
  }

  const Graph& g_;
  const Op& op_;
  size_t index_;
};

}  // namespace

const OpInfo& op_info(OpKind kind) {
  size_t i = size_t(kind);
  MPK_ICHECK(i < kOpInfo.size()) << "op kind " << i;
  return kOpInfo[i];
}

std::optional<OpKind> op_kind_from_name(std::string_view name) {
  for (size_t i = 0; i < kOpInfo.size(); ++i)
    if (name == kOpInfo[i].name) return OpKind(i);
  return std::nullopt;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i] == kTokens ? "T" : std::to_string(shape[i]);
  }
  return s + "]";
}

const char* tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::Input: return "input";
    case TensorRole::Activation: return "activation";
    case TensorRole::Output: return "output";
  }
  return "?";
}

int Graph::find_tensor(std::string_view name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name) return int(i);
  return -1;
}

int Graph::find_weight(std::string_view name) const {
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].name == name) return int(i);
  return -1;
}

int64_t numel(const Shape& shape, int64_t num_tokens) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d == kTokens ? num_tokens : d;
  return n;
}

void validate(const Graph& g) {
  const size_t nt = g.tensors.size();
  auto tensor_ok = [&](int id) { return id >= 0 && size_t(id) < nt; };
  auto weight_ok = [&](int id) { return id >= 0 && size_t(id) < g.weights.size(); };
  MPK_CHECK(tensor_ok(g.tokens) && tensor_ok(g.positions) && tensor_ok(g.logits) &&
                tensor_ok(g.next_token),
            InvalidArgument)
      << "invalid graph: tokens / positions / logits / next_token ids out of range";
  MPK_CHECK(g.tensor(g.tokens).role == TensorRole::Input &&
                g.tensor(g.tokens).dtype == DType::I32 &&
                g.tensor(g.tokens).shape == Shape{kTokens} &&
                g.tensor(g.positions).role == TensorRole::Input &&
                g.tensor(g.positions).dtype == DType::I32 &&
                g.tensor(g.positions).shape == Shape{kTokens},
            InvalidArgument)
      << "invalid graph: tokens and positions must be i32[T] inputs";
  MPK_CHECK(g.kv_cache.num_layers >= 0, InvalidArgument) << "invalid graph: kv_cache layers";

  std::vector<bool> defined(nt, false);
  for (size_t i = 0; i < nt; ++i) defined[i] = g.tensors[i].role == TensorRole::Input;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const OpInfo& info = op_info(op.kind);
    auto fail = [&]() { return std::string("invalid graph: op #") + std::to_string(i) + " (" +
                               info.name + "): "; };
    MPK_CHECK(op.inputs.size() == size_t(info.num_inputs), InvalidArgument)
        << fail() << "has " << op.inputs.size() << " inputs, expected " << info.num_inputs;
    for (int id : op.inputs) {
      MPK_CHECK(tensor_ok(id), InvalidArgument) << fail() << "input id " << id << " out of range";
      MPK_CHECK(defined[size_t(id)], InvalidArgument)
          << fail() << "reads '" << g.tensor(id).name << "' before it is written";
    }
    MPK_CHECK(tensor_ok(op.output), InvalidArgument) << fail() << "output id out of range";
    MPK_CHECK(!defined[size_t(op.output)], InvalidArgument)
        << fail() << "'" << g.tensor(op.output).name << "' is written twice or is an input";
    defined[size_t(op.output)] = true;
    if (info.weights == 0) {
      MPK_CHECK(op.weight < 0 && op.bias < 0, InvalidArgument) << fail() << "takes no weight";
    } else {
      MPK_CHECK(weight_ok(op.weight), InvalidArgument) << fail() << "weight index out of range";
      MPK_CHECK(op.bias < 0 || (info.weights == 2 && weight_ok(op.bias)), InvalidArgument)
          << fail() << "bias index invalid";
    }
    OpChecker(g, i).check();
  }
  for (int id : {g.logits, g.next_token}) {
    MPK_CHECK(defined[size_t(id)] && g.tensor(id).role == TensorRole::Output, InvalidArgument)
        << "invalid graph: output '" << g.tensor(id).name << "' is never written";
  }
  MPK_CHECK(g.tensor(g.logits).dtype == DType::F32 && g.tensor(g.logits).shape.size() == 2 &&
                g.tensor(g.logits).shape[0] == 1,
            InvalidArgument)
      << "invalid graph: logits must be f32[1, V]";
}

}  // namespace mpk::ir
