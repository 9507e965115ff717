// Kernel compilation with NVRTC: CUDA C++ source → CUBIN for one architecture.
//
// Works without a GPU or a driver. Thread-safe: any number of compiles may run at once.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cuda/deadline.h"

namespace mpk::cuda {

struct CompileRequest {
  std::string source;
  std::string name = "kernel.cu";  // file name in diagnostics
  std::string arch = "sm_90a";     // a real target: sm_<NN>, sm_<NN>a or sm_<NN>f
  // NVRTC options in any accepted spelling ("-DX=1", "--define-macro X=1", "-I dir", ...),
  // except the architecture, which is `arch`.
  std::vector<std::string> options;
};

struct CompileResult {
  std::vector<std::uint8_t> cubin;   // an ELF image for `arch`
  std::string log;                   // NVRTC's log (warnings); empty when clean
  std::string arch;
  std::vector<std::string> options;  // exactly what NVRTC was given
  double compile_ms = 0;
};

// Compiles one source. The toolkit headers (cuda_include_dir()) are on the include path
// after the caller's own. Throws Error(Compile) on failure, with the NVRTC log and the exact
// options in the message (and a note when the toolkit headers were not found);
// Error(InvalidArgument) for a malformed arch or option; Error(Unsupported) for an arch this
// NVRTC cannot target. The same request always gives the same bytes.
CompileResult compile(const CompileRequest& request);

// Compiles in parallel (oneTBB). Entry i is the result of request i or its error (never
// thrown). Requests not started when `deadline` passes are not compiled and get
// Error(Timeout); a compile already running is not interrupted.
std::vector<Expected<CompileResult>> compile_batch(const std::vector<CompileRequest>& requests,
                                                   Deadline deadline = Deadline::never());

// The canonical form of an option list, as the kernel cache keys it, and as compile() passes
// it on. Rules:
//  - whitespace is trimmed; "-x v", "-x=v", "--x v", "--x=v", "-x" "v" (two entries) and the
//    attached short forms "-DNAME", "-Idir", "-UNAME" all become "--<long-name>=v"; a
//    separate entry is taken as the value when the option takes one, or, for an option NVRTC
//    does not list, when it does not start with '-'; unlisted options keep their dashes;
//    short aliases become long names ("-G" → "--device-debug", "-arch" → "--gpu-architecture");
//  - macros are folded to their final state (last -D/-U of a name wins), one entry per name;
//  - include paths and pre-includes keep their first-occurrence order, later repeats dropped;
//  - other exact repeats are dropped;
//  - entries are ordered by option name; entries of one name keep their relative order.
// Throws InvalidArgument for a value with no option or an option missing its value.
std::vector<std::string> canonical_options(const std::vector<std::string>& options);

// What ptxas reports about an entry point when compiled with "--ptxas-options=-v" (the
// compile log's "ptxas info" lines). Fields stay -1 when the log does not say.
struct PtxasInfo {
  int registers = -1;
  int spill_store_bytes = -1, spill_load_bytes = -1;
  int stack_bytes = -1;
  int static_smem_bytes = -1;
  int barriers = -1;
};
// The figures ptxas printed for `entry` in `log` (all -1 when it printed none for it).
PtxasInfo parse_ptxas_info(const std::string& log, const std::string& entry);

// NVRTC's version as (major, minor), e.g. (13, 0).
std::pair<int, int> nvrtc_version();

// The real architectures this NVRTC can target, e.g. {"sm_75", "sm_80", ..., "sm_121"}.
std::vector<std::string> nvrtc_supported_archs();

// Where the CUDA headers (cuda_bf16.h, ...) are searched, in order: $CUDA_HOME and
// $CUDA_PATH include dirs, then include dirs next to the loaded libnvrtc, then the toolkit
// include dir found when mpk was configured.
std::vector<std::string> cuda_include_candidates();

// The first candidate that holds cuda_bf16.h (looked up once per process). Throws NotFound
// listing the places searched.
const std::string& cuda_include_dir();

}  // namespace mpk::cuda
