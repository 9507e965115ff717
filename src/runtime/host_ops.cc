#include "runtime/host_ops.h"

#include "base/error.h"
#include "ref/kernels.h"

namespace mpk::rt {

bool host_runs(ir::OpKind kind) {
  return ref::is_binary_elementwise(kind);  // what the reference's one dispatch runs
}

void run_host_op(const ir::Op& op, const std::vector<const float*>& inputs, int64_t n, float* out) {
  MPK_ICHECK(host_runs(op.kind)) << "the host fallback does not run " << ir::op_name(op.kind);
  MPK_ICHECK(inputs.size() == op.inputs.size() && inputs.size() == 2)
      << ir::op_name(op.kind) << ": " << inputs.size() << " inputs";
  MPK_ICHECK(ref::binary_elementwise(op.kind, inputs[0], inputs[1], n, out)) << ir::op_name(op.kind);
}

}  // namespace mpk::rt
