// Finding the CUDA headers (cuda_bf16.h, ...) that kernels include, without a fixed path.
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "base/error.h"
#include "cuda/nvrtc.h"

#ifndef MPK_CUDA_TOOLKIT_INCLUDE_DIR
#define MPK_CUDA_TOOLKIT_INCLUDE_DIR ""
#endif

namespace mpk::cuda {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProbeHeader = "cuda_bf16.h";

#if defined(__aarch64__)
constexpr const char* kTargetDir = "targets/sbsa-linux/include";
#else
constexpr const char* kTargetDir = "targets/x86_64-linux/include";
#endif

void add_unique(std::vector<std::string>& out, const fs::path& p) {
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  for (const auto& e : out)
    if (e == s) return;
  out.push_back(s);
}

void add_toolkit_root(std::vector<std::string>& out, const fs::path& root) {
  add_unique(out, root / "include");
  add_unique(out, root / kTargetDir);
}

// The directories around the libnvrtc this process actually loaded: the toolkit it belongs to
// is the one whose headers match it.
void add_nvrtc_neighbours(std::vector<std::string>& out) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&nvrtcVersion), &info) || !info.dli_fname) return;
  std::error_code ec;
  fs::path lib = fs::path(info.dli_fname).parent_path();
  std::vector<fs::path> dirs = {lib};
  fs::path real = fs::canonical(info.dli_fname, ec);
  if (!ec && real.parent_path() != lib) dirs.push_back(real.parent_path());
  for (const auto& d : dirs) {
    add_unique(out, d / ".." / "include");
    add_unique(out, d / ".." / ".." / "include");
    add_unique(out, d / ".." / ".." / kTargetDir);
    add_unique(out, d / ".." / kTargetDir);
  }
}

std::string find_include_dir() {
  std::vector<std::string> searched = cuda_include_candidates();
  for (const auto& dir : searched) {
    std::error_code ec;
    if (fs::is_regular_file(fs::path(dir) / kProbeHeader, ec)) return dir;
  }
  std::string list;
  for (const auto& d : searched) list += "\n  " + d;
  MPK_THROW(NotFound) << "CUDA headers (" << kProbeHeader
                      << ") not found; set CUDA_HOME to the toolkit. Searched:" << list;
}

}  // namespace

std::vector<std::string> cuda_include_candidates() {
  std::vector<std::string> out;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* v = std::getenv(var);
    if (v && *v) add_toolkit_root(out, v);
  }
  add_nvrtc_neighbours(out);
  if (*MPK_CUDA_TOOLKIT_INCLUDE_DIR) add_unique(out, MPK_CUDA_TOOLKIT_INCLUDE_DIR);
  return out;
}

const std::string& cuda_include_dir() {
  static const Expected<std::string> dir = []() -> Expected<std::string> {
    try {
      return find_include_dir();
    } catch (const Error& e) {
      return e;
    }
  }();
  return dir.value();
}

}  // namespace mpk::cuda
