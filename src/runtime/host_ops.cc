#include "runtime/host_ops.h"

#include "base/error.h"
#include "ref/kernels.h"

namespace mpk::rt {

bool host_runs(ir::OpKind kind) {
  return kind == ir::OpKind::GeluTanhMul || kind == ir::OpKind::SiluMul || kind == ir::OpKind::Add;
}

void run_host_op(const ir::Op& op, const std::vector<std::vector<float>>& inputs, std::vector<float>& out) {
  MPK_ICHECK(host_runs(op.kind)) << "the host fallback does not run " << ir::op_name(op.kind);
  MPK_ICHECK(inputs.size() == 2 && inputs[0].size() == out.size() && inputs[1].size() == out.size())
      << ir::op_name(op.kind) << ": inputs of " << out.size() << " elements expected";
  const auto n = int64_t(out.size());
  switch (op.kind) {
    case ir::OpKind::GeluTanhMul: ref::gelu_tanh_mul(inputs[0].data(), inputs[1].data(), n, out.data()); break;
    case ir::OpKind::SiluMul: ref::silu_mul(inputs[0].data(), inputs[1].data(), n, out.data()); break;
    case ir::OpKind::Add: ref::add(inputs[0].data(), inputs[1].data(), n, out.data()); break;
    default: break;
  }
}

}  // namespace mpk::rt
