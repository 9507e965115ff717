#include "cuda/nvrtc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernels.h"

namespace mpk::cuda {
namespace {

// The ELF header fields a cubin is recognised by.
struct CubinHeader {
  unsigned ei_class = 0;
  unsigned abi_version = 0;
  unsigned machine = 0;
  unsigned flags = 0;
};

constexpr unsigned kEmCuda = 190;

std::optional<CubinHeader> read_header(const std::vector<std::uint8_t>& image) {
  if (image.size() < 64 || std::memcmp(image.data(), "\x7f" "ELF", 4) != 0) return std::nullopt;
  CubinHeader h;
  h.ei_class = image[4];  // 2 = ELF64
  h.abi_version = image[8];
  std::uint16_t machine = 0;
  std::uint32_t flags = 0;
  std::memcpy(&machine, image.data() + 18, 2);  // e_machine (little endian, as on the host)
  std::memcpy(&flags, image.data() + 48, 4);    // e_flags of an ELF64 header
  h.machine = machine;
  h.flags = flags;
  return h;
}

// The SM number in e_flags: the low byte under CUDA ELF ABI version 7 (EF_CUDA_SM), bits
// 8-15 under version 8 (EF_CUDA_SM_MASK), which CUDA 12.8+ emits.
int sm_of(const CubinHeader& h) {
  return h.abi_version >= 8 ? static_cast<int>((h.flags >> 8) & 0xff)
                            : static_cast<int>(h.flags & 0xff);
}

bool contains(const std::vector<std::uint8_t>& bytes, const std::string& needle) {
  return std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end()) != bytes.end();
}

CompileRequest axpy_request(const std::string& arch) {
  CompileRequest r;
  r.source = test::kAxpyBf16;
  r.name = "axpy_bf16.cu";
  r.arch = arch;
  return r;
}

void expect_cubin_for(const CompileResult& result, int sm, const std::string& arch) {
  auto h = read_header(result.cubin);
  ASSERT_TRUE(h.has_value()) << "not an ELF image";
  EXPECT_EQ(h->ei_class, 2u) << "cubins are ELF64";
  EXPECT_EQ(h->machine, kEmCuda);
  EXPECT_EQ(sm_of(*h), sm) << std::hex << "e_flags 0x" << h->flags << ", ABI version "
                           << std::dec << h->abi_version;
  // e_flags does not tell sm_90 from sm_90a; ptxas's tool note records the exact target.
  EXPECT_TRUE(contains(result.cubin, "-arch " + arch + " ")) << arch;
  EXPECT_EQ(result.arch, arch);
  ASSERT_FALSE(result.options.empty());
  EXPECT_EQ(result.options.front(), "--gpu-architecture=" + arch);
  EXPECT_TRUE(contains(result.cubin, "axpy_bf16"));
}

TEST(Nvrtc, CompilesBf16KernelForSm90a) {
  CompileResult r = compile(axpy_request("sm_90a"));
  expect_cubin_for(r, 90, "sm_90a");
}

TEST(Nvrtc, CompilesBf16KernelForSm80) {
  CompileResult r = compile(axpy_request("sm_80"));
  expect_cubin_for(r, 80, "sm_80");
  EXPECT_FALSE(contains(r.cubin, "-arch sm_90a"));
}

TEST(Nvrtc, DefaultArchIsSm90a) {
  CompileRequest r;
  r.source = test::kAxpyBf16;
  EXPECT_EQ(r.arch, "sm_90a");
  expect_cubin_for(compile(r), 90, "sm_90a");
}

TEST(Nvrtc, SameRequestGivesIdenticalBytes) {
  CompileRequest req = axpy_request("sm_90a");
  req.options = {"-DSCALE=2", "--std=c++17", "-lineinfo"};
  CompileResult a = compile(req);
  CompileResult b = compile(req);
  EXPECT_EQ(a.cubin, b.cubin);
  EXPECT_EQ(a.options, b.options);
  // Another spelling of the same options is the same compile.
  req.options = {" -lineinfo", "-std c++17", "--define-macro", "SCALE=2"};
  EXPECT_EQ(compile(req).cubin, a.cubin);
}

TEST(Nvrtc, PassesCanonicalOptionsThenToolkitHeaders) {
  CompileRequest req = axpy_request("sm_80");
  req.options = {"-DB=1", "-DA=1", "-G"};
  CompileResult r = compile(req);
  ASSERT_GE(r.options.size(), 5u);
  EXPECT_EQ(r.options[0], "--gpu-architecture=sm_80");
  EXPECT_EQ(r.options[1], "--define-macro=A=1");
  EXPECT_EQ(r.options[2], "--define-macro=B=1");
  EXPECT_EQ(r.options[3], "--device-debug");
  EXPECT_EQ(r.options[4], "--include-path=" + cuda_include_dir());
}

TEST(Nvrtc, SyntaxErrorCarriesLogAndOptions) {
  CompileRequest req;
  req.source = test::kSyntaxError;
  req.name = "broken.cu";
  req.arch = "sm_80";
  req.options = {"-DMPK_MARK=7", "--std=c++17"};
  try {
    compile(req);
    FAIL() << "a syntax error compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    std::string msg = e.what();
    EXPECT_NE(msg.find("broken.cu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undeclared_identifier_mpk"), std::string::npos) << msg;  // the log
    EXPECT_NE(msg.find("--gpu-architecture=sm_80"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--define-macro=MPK_MARK=7"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--std=c++17"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--include-path="), std::string::npos) << msg;
  }
}

TEST(Nvrtc, InvalidOptionIsACompileError) {
  CompileRequest req = axpy_request("sm_80");
  req.options = {"--maxrregcount=many"};
  try {
    compile(req);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    EXPECT_NE(std::string(e.what()).find("--maxrregcount=many"), std::string::npos) << e.what();
  }
}

TEST(Nvrtc, MalformedArchIsInvalidArgument) {
  for (std::string arch : {"sm90", "compute_90", "sm_", "sm_9x", "", "sm_90b"}) {
    try {
      compile(axpy_request(arch));
      FAIL() << arch;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << arch << ": " << e.what();
    }
  }
}

TEST(Nvrtc, UnsupportedArchNamesSupportedOnes) {
  try {
    compile(axpy_request("sm_35"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("sm_80"), std::string::npos) << e.what();
  }
}

TEST(Nvrtc, ArchInOptionsIsRejected) {
  CompileRequest req = axpy_request("sm_90a");
  req.options = {"-arch=sm_80"};
  try {
    compile(req);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CompileRequest::arch"), std::string::npos);
  }
}

TEST(Nvrtc, VersionAndArchs) {
  auto [major, minor] = nvrtc_version();
  EXPECT_GE(major, 12);
  EXPECT_GE(minor, 0);
  auto archs = nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_80"), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end());
}

TEST(Nvrtc, FindsToolkitHeaders) {
  const std::string& dir = cuda_include_dir();
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::path(dir) / "cuda_bf16.h")) << dir;
}

TEST(Nvrtc, CudaHomeIsSearchedFirst) {
  const char* old = std::getenv("CUDA_HOME");
  std::string saved = old ? old : "";
  setenv("CUDA_HOME", "/opt/mpk-test-cuda", 1);
  auto candidates = cuda_include_candidates();
  if (old) setenv("CUDA_HOME", saved.c_str(), 1); else unsetenv("CUDA_HOME");
  ASSERT_FALSE(candidates.empty());
  EXPECT_EQ(candidates.front(), "/opt/mpk-test-cuda/include");
  // Next to libnvrtc comes before the configure-time default, and nothing is listed twice.
  auto sorted = candidates;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
}

TEST(NvrtcBatch, GoodAndBadEntriesAreSeparateValues) {
  std::vector<CompileRequest> reqs;
  reqs.push_back(axpy_request("sm_90a"));
  reqs.push_back(CompileRequest{test::kSyntaxError, "broken.cu", "sm_90a", {}});
  reqs.push_back(axpy_request("sm_80"));
  reqs.push_back(CompileRequest{test::kGridExchange, "exchange.cu", "sm_90a", {}});
  reqs.push_back(CompileRequest{test::kSharedReverse, "reverse.cu", "sm_90a", {}});
  reqs.push_back(CompileRequest{test::kSharedReverse, "bad_arch.cu", "sm90", {}});
  auto results = compile_batch(reqs, Deadline::after(std::chrono::hours(1)));
  ASSERT_EQ(results.size(), reqs.size());
  EXPECT_TRUE(results[0].ok());
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(results[1].error().what()).find("broken.cu"), std::string::npos);
  EXPECT_TRUE(results[2].ok());
  EXPECT_TRUE(results[3].ok());
  EXPECT_TRUE(results[4].ok());
  ASSERT_FALSE(results[5].ok());
  EXPECT_EQ(results[5].error().kind(), ErrorKind::InvalidArgument);
  // Parallel compiles give the same bytes as a lone one.
  EXPECT_EQ(results[0]->cubin, compile(reqs[0]).cubin);
  expect_cubin_for(*results[2], 80, "sm_80");
}

TEST(NvrtcBatch, PassedDeadlineCancelsEverything) {
  std::vector<CompileRequest> reqs(3, axpy_request("sm_90a"));
  auto results = compile_batch(reqs, Deadline::at(Deadline::Clock::now() - std::chrono::seconds(1)));
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::Timeout);
    EXPECT_NE(std::string(r.error().what()).find("deadline"), std::string::npos);
  }
}

TEST(NvrtcBatch, EmptyBatch) { EXPECT_TRUE(compile_batch({}).empty()); }

TEST(Deadline, NeverAndPast) {
  EXPECT_FALSE(Deadline().expired());
  EXPECT_TRUE(Deadline::never().is_never());
  EXPECT_FALSE(Deadline::after(std::chrono::hours(1)).expired());
  EXPECT_TRUE(Deadline::after(-std::chrono::seconds(1)).expired());
}

}  // namespace
}  // namespace mpk::cuda

namespace mpk::cuda {
namespace {

// ptxas's resource report, from a canned log and from a real compile with -v.
TEST(Nvrtc, ReadsPtxasResourceLines) {
  const std::string log =
      "ptxas info    : Compiling entry function 'other' for 'sm_90a'\n"
      "ptxas info    : Function properties for other\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers, 400 bytes smem\n"
      "ptxas info    : Function properties for mk\n"
      "ptxas         .     136 bytes stack frame, 104 bytes spill stores, 132 bytes spill loads\n"
      "ptxas info    : Used 96 registers, used 2 barriers, 136 bytes cumulative stack size, 2208 bytes smem\n";
  const PtxasInfo mk = parse_ptxas_info(log, "mk");
  EXPECT_EQ(mk.registers, 96);
  EXPECT_EQ(mk.spill_store_bytes, 104);
  EXPECT_EQ(mk.spill_load_bytes, 132);
  EXPECT_EQ(mk.stack_bytes, 136);
  EXPECT_EQ(mk.static_smem_bytes, 2208);
  EXPECT_EQ(mk.barriers, 2);
  EXPECT_EQ(parse_ptxas_info(log, "other").registers, 12);
  EXPECT_EQ(parse_ptxas_info(log, "missing").registers, -1);

  CompileRequest r;
  r.source = test::kAxpyBf16;
  r.options = {"--ptxas-options=-v"};
  const PtxasInfo real = parse_ptxas_info(compile(r).log, "axpy_bf16");
  EXPECT_GT(real.registers, 0);
  EXPECT_EQ(real.spill_store_bytes, 0);
}

}  // namespace
}  // namespace mpk::cuda
