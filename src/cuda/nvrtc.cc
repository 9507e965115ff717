#include "cuda/nvrtc.h"

#include <nvrtc.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "base/log.h"

namespace mpk::cuda {
namespace {

// Owns an nvrtcProgram.
class Program {
 public:
  Program(const std::string& source, const std::string& name) {
    result_ = nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  }
  ~Program() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  nvrtcResult created() const { return result_; }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
  nvrtcResult result_ = NVRTC_SUCCESS;
};

std::string program_log(nvrtcProgram prog) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || std::isspace(static_cast<unsigned char>(log.back()))))
    log.pop_back();
  return log;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : " ") + e;
  return s;
}

// "sm_90a" → 90; InvalidArgument for anything that is not a real target.
int arch_number(const std::string& arch) {
  std::string digits;
  bool ok = arch.starts_with("sm_") && arch.size() > 3;
  if (ok) {
    std::string rest = arch.substr(3);
    if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) rest.pop_back();
    ok = !rest.empty() && rest.size() <= 4 &&
         std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; });
    digits = rest;
  }
  MPK_CHECK(ok, InvalidArgument) << "NVRTC arch '" << arch
                                 << "' is not a real GPU target like sm_80, sm_90a or sm_100f";
  return std::stoi(digits);
}

const std::vector<int>& supported_arch_numbers() {
  static const std::vector<int> archs = [] {
    int n = 0;
    std::vector<int> v;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      v.resize(n);
      if (nvrtcGetSupportedArchs(v.data()) != NVRTC_SUCCESS) v.clear();
    }
    return v;
  }();
  return archs;
}

Error compile_error(const CompileRequest& req, const std::vector<std::string>& options,
                    nvrtcResult r, const std::string& what, const std::string& log,
                    const std::string& note) {
  std::string msg = "NVRTC failed to compile " + req.name + " for " + req.arch + ": " + what +
                    " (" + nvrtcGetErrorString(r) + ")\noptions: " + join(options);
  msg += log.empty() ? "\nlog: (empty)" : "\nlog:\n" + log;
  if (!note.empty()) msg += "\nnote: " + note;
  return Error(ErrorKind::Compile, msg);
}

}  // namespace

std::pair<int, int> nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return {major, minor};
}

std::vector<std::string> nvrtc_supported_archs() {
  std::vector<std::string> out;
  for (int a : supported_arch_numbers()) out.push_back("sm_" + std::to_string(a));
  return out;
}

CompileResult compile(const CompileRequest& req) {
  auto start = std::chrono::steady_clock::now();
  int number = arch_number(req.arch);
  const auto& supported = supported_arch_numbers();
  if (!supported.empty() && std::find(supported.begin(), supported.end(), number) == supported.end()) {
    auto [major, minor] = nvrtc_version();
    MPK_THROW(Unsupported) << "NVRTC " << major << "." << minor << " cannot target " << req.arch
                           << "; it supports " << join(nvrtc_supported_archs());
  }

  std::vector<std::string> options = {"--gpu-architecture=" + req.arch};
  for (std::string& o : canonical_options(req.options)) {
    MPK_CHECK(!o.starts_with("--gpu-architecture"), InvalidArgument)
        << "set the target through CompileRequest::arch, not the option '" << o << "'";
    options.push_back(std::move(o));
  }
  // The toolkit headers go last so the caller's include paths take precedence. Without them
  // a kernel that includes none still compiles; one that does fails with a note saying why.
  std::string note;
  try {
    const std::string& inc = cuda_include_dir();
    options.push_back("--include-path=" + inc);
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::path(inc) / "cccl", ec))
      options.push_back("--include-path=" + inc + "/cccl");
  } catch (const Error& e) {
    note = e.what();
  }

  Program prog(req.source, req.name.empty() ? "kernel.cu" : req.name);
  if (prog.created() != NVRTC_SUCCESS)
    throw compile_error(req, options, prog.created(), "nvrtcCreateProgram failed", "", note);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  std::string nvrtc_log = program_log(prog.get());
  if (r != NVRTC_SUCCESS) throw compile_error(req, options, r, "compilation failed", nvrtc_log, note);

  CompileResult out;
  std::size_t size = 0;
  r = nvrtcGetCUBINSize(prog.get(), &size);
  if (r != NVRTC_SUCCESS || size == 0)
    throw compile_error(req, options, r, "no CUBIN was produced", nvrtc_log, note);
  out.cubin.resize(size);
  r = nvrtcGetCUBIN(prog.get(), reinterpret_cast<char*>(out.cubin.data()));
  if (r != NVRTC_SUCCESS) throw compile_error(req, options, r, "nvrtcGetCUBIN failed", nvrtc_log, note);
  out.log = std::move(nvrtc_log);
  out.arch = req.arch;
  out.options = std::move(options);
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!out.log.empty()) log(LogLevel::Debug, "NVRTC log for {} ({}):\n{}", req.name, req.arch, out.log);
  return out;
}

std::vector<Expected<CompileResult>> compile_batch(const std::vector<CompileRequest>& requests,
                                                   Deadline deadline) {
  // Every entry starts as "cancelled" and is overwritten once its compile ran.
  std::vector<Expected<CompileResult>> results;
  results.reserve(requests.size());
  for (const auto& req : requests) {
    results.emplace_back(Error(ErrorKind::Timeout, "compile of " + req.name + " for " + req.arch +
                                                       " cancelled: the deadline passed before it started"));
  }
  tbb::parallel_for(std::size_t{0}, requests.size(), [&](std::size_t i) {
    if (deadline.expired()) return;
    try {
      results[i] = compile(requests[i]);
    } catch (const Error& e) {
      results[i] = e;
    } catch (const std::exception& e) {
      results[i] = Error(ErrorKind::Internal, std::string("compile threw: ") + e.what());
    }
  });
  return results;
}

PtxasInfo parse_ptxas_info(const std::string& log, const std::string& entry) {
  // ptxas prints, per entry point:
  //   ptxas info    : Function properties for ENTRY
  //   ptxas         .     32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 128 registers, used 1 barriers, 32 bytes cumulative stack size, 2208 bytes smem
  PtxasInfo info;
  const size_t at = log.find("Function properties for " + entry);
  if (at == std::string::npos) return info;
  auto number_before = [&](size_t from, size_t limit, const std::string& what) {
    const size_t w = log.find(what, from);
    if (w == std::string::npos || w > limit) return -1;
    size_t b = w;
    while (b > from && log[b - 1] == ' ') --b;
    size_t e = b;
    while (b > from && std::isdigit(static_cast<unsigned char>(log[b - 1]))) --b;
    return b == e ? -1 : std::stoi(log.substr(b, e - b));
  };
  auto number_after = [&](size_t from, size_t limit, const std::string& what) {
    const size_t w = log.find(what, from);
    if (w == std::string::npos || w > limit) return -1;
    size_t b = w + what.size();
    size_t e = b;
    while (e < log.size() && std::isdigit(static_cast<unsigned char>(log[e]))) ++e;
    return b == e ? -1 : std::stoi(log.substr(b, e - b));
  };
  size_t end = log.find("Function properties for ", at + 1);
  if (end == std::string::npos) end = log.size();
  info.stack_bytes = number_before(at, end, " bytes stack frame");
  info.spill_store_bytes = number_before(at, end, " bytes spill stores");
  info.spill_load_bytes = number_before(at, end, " bytes spill loads");
  info.registers = number_after(at, end, "Used ");
  info.barriers = number_after(at, end, "used ");
  info.static_smem_bytes = number_before(at, end, " bytes smem");
  return info;
}

}  // namespace mpk::cuda
