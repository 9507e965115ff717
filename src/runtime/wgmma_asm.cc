#include "runtime/wgmma_asm.h"

#include <fmt/format.h>

#include "base/error.h"

namespace mpk::rt {

std::string wgmma_function(const std::string& name, int n, bool a_in_registers) {
  MPK_CHECK(n >= 8 && n <= 256 && n % 8 == 0, InvalidArgument) << "wgmma m64n" << n << "k16";
  const int regs = n / 2;
  std::string d_list, d_operands;
  for (int i = 0; i < regs; ++i) {
    d_list += fmt::format("{}%{}", i ? ", " : "", i);
    d_operands += fmt::format("{}\"+f\"(d[{}])", i == 0 ? "" : i % 8 == 0 ? ",\n        " : ", ", i);
  }
  // Operands after the accumulators: A's registers or descriptor, B's descriptor, then the
  // predicate's source (scale-d: 0 makes d = A B).
  const int p = a_in_registers ? regs + 5 : regs + 2;
  const std::string signature =
      a_in_registers ? fmt::format("{}(float (&d)[{}], const unsigned (&a)[4], unsigned long long db)", name, regs)
                     : fmt::format("{}(float (&d)[{}], unsigned long long da, unsigned long long db, int accumulate)",
                                   name, regs);
  const std::string args =
      a_in_registers
          ? fmt::format("{{%{}, %{}, %{}, %{}}}, %{}, p, 1, 1, 1", regs, regs + 1, regs + 2, regs + 3, regs + 4)
          : fmt::format("%{}, %{}, p, 1, 1, 0, 0", regs, regs + 1);
  const std::string inputs = a_in_registers ? "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(1)"
                                            : "\"l\"(da), \"l\"(db), \"r\"(accumulate)";
  return fmt::format(
      "__device__ __forceinline__ void {} {{\n"
      "  asm volatile(\n"
      "      \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"\n"
      "      \"wgmma.mma_async.sync.aligned.m64n{}k16.f32.bf16.bf16 \"\n"
      "      \"{{{}}}, {};\\n}}\\n\"\n"
      "      : {}\n"
      "      : {});\n"
      "}}\n",
      signature, p, n, d_list, args, d_operands, inputs);
}

}  // namespace mpk::rt
