// Hand-off micro-benchmark: how long one SM takes to see a counter another SM released, with
// the megakernel's release and several waits; a chain of dependent empty tasks over all SMs;
// all-SM stage boundaries (fan-in); and a poll issued behind the worker's own weight loads
// versus from a warp that issues none. Kernels: handoff_bench.cuh, compiled with NVRTC.
//
//   handoff_bench [--device 0] [--iters 2000] [--stages 20000] [--out FILE.json]
//
// Prints the device, its clocks (from the run: cycles over globaltimer), then one row per test
// and wait mode with p50/p95/p99 in nanoseconds.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda/driver.h"
#include "cuda/nvrtc.h"

namespace {

using namespace mpk::cuda;
using u64 = unsigned long long;

const char* const kModeNames[] = {"acquire spin", "relaxed spin + fence", "acquire + nanosleep(32)",
                                  "volatile + threadfence"};
constexpr int kModes = 4;

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = size_t(p / 100.0 * double(v.size()) + 0.999999);
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

struct Row {
  std::string test, mode;
  std::vector<double> ns;
  std::string note;
};

}  // namespace

namespace mpk::bench {
extern const char* const kHandoffBenchCuh;  // handoff_bench.cuh, embedded by CMake
}

int main(int argc, char** argv) {
  CLI::App app{"handoff_bench: SM-to-SM hand-off latency of the megakernel's event protocol"};
  int device = 0, iters = 2000, stages = 20000;
  std::string out_path;
  bool compile_only = false;
  app.add_flag("--compile-only", compile_only,
               "compile the kernels for sm_90a with NVRTC and exit (no GPU needed; a CI check)");
  app.add_option("--device", device, "CUDA device ordinal")->check(CLI::Range(0, 64));
  app.add_option("--iters", iters, "ping-pong round trips and poll rounds")->check(CLI::Range(10, 1000000));
  app.add_option("--stages", stages, "stages of the chain and fan-in tests")->check(CLI::Range(10, 1000000));
  app.add_option("--out", out_path, "write the results as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (compile_only) {
      CompileRequest req;
      req.source = mpk::bench::kHandoffBenchCuh;
      req.name = "handoff_bench.cu";
      req.options = {"-std=c++17"};
      const CompileResult cr = compile(req);
      std::printf("handoff_bench: kernels compile for %s (%zu-byte cubin)\n", cr.arch.c_str(),
                  cr.cubin.size());
      return 0;
    }
    Context ctx(device);
    const DeviceProps& props = ctx.props();
    CompileRequest req;
    req.source = mpk::bench::kHandoffBenchCuh;
    req.name = "handoff_bench.cu";
    req.arch = props.arch();
    req.options = {"-std=c++17"};
    const CompileResult cr = compile(req);
    Module mod(ctx, cr.cubin);
    Stream stream(ctx);
    const int sms = props.sm_count;
    // One CTA per SM: more than half the SM's shared memory each.
    const unsigned smem = unsigned(props.max_shared_per_sm / 2 + 1024);
    auto fn = [&](const char* name) {
      Function f = mod.function(name);
      f.set_max_dynamic_shared(int(smem));
      return f;
    };
    LaunchConfig all;
    all.grid.x = unsigned(sms);
    all.block.x = 128;
    all.dynamic_shared = smem;
    all.cooperative = true;

    DeviceBuffer flags(ctx, 4096), samples(ctx, size_t(std::max(iters, stages) + 16) * 8), span(ctx, 64);
    std::vector<Row> rows;
    double cycles_per_ns = 0;
    auto read = [&](size_t n, size_t first = 0) {
      std::vector<u64> v(n);
      samples.download(v.data(), n * 8, first * 8);
      return v;
    };
    auto read_span = [&] {
      u64 s[2];
      span.download(s, 16);
      return std::make_pair(double(s[0]), double(s[1]));
    };

    // Ping-pong with the peer half the grid away (another GPC in all likelihood).
    Function pingpong = fn("pingpong");
    for (int mode = 0; mode < kModes; ++mode) {
      for (int rep = 0; rep < 2; ++rep) {  // the first is a warm-up
        flags.fill_bytes(0);
        launch_args(pingpong, all, stream, flags.ptr(), iters, mode, sms / 2, samples.ptr(), span.ptr());
        stream.synchronize();
      }
      const auto [ns, cyc] = read_span();
      cycles_per_ns = cyc / ns;
      Row r{"one-way hand-off (ping-pong / 2)", kModeNames[mode], {}, ""};
      for (u64 c : read(size_t(iters))) r.ns.push_back(double(c) / cycles_per_ns / 2);
      rows.push_back(std::move(r));
    }

    Function chain = fn("chain");
    for (int mode = 0; mode < kModes; ++mode) {
      Row r{"chain of empty tasks over all SMs, per stage", kModeNames[mode], {}, ""};
      for (int rep = 0; rep < 6; ++rep) {
        flags.fill_bytes(0);
        launch_args(chain, all, stream, flags.ptr(), stages, mode, samples.ptr());
        stream.synchronize();
        if (rep > 0) r.ns.push_back(double(read(1)[0]) / stages);
      }
      r.note = "5 launches";
      rows.push_back(std::move(r));
    }

    Function fanin = fn("fanin");
    const int fan_stages = std::min(stages, 4000);
    for (int mode = 0; mode < kModes; ++mode) {
      for (int rep = 0; rep < 2; ++rep) {
        flags.fill_bytes(0);
        launch_args(fanin, all, stream, flags.ptr(), fan_stages, mode, samples.ptr(), span.ptr());
        stream.synchronize();
      }
      const auto [ns, cyc] = read_span();
      Row r{fmt::format("all-{}-SM stage boundary (fan-in)", sms), kModeNames[mode], {}, ""};
      for (u64 c : read(size_t(fan_stages - 1), 1)) r.ns.push_back(double(c) / (cyc / ns));
      r.note = fmt::format("mean {:.0f} ns per stage over the launch", ns / fan_stages);
      rows.push_back(std::move(r));
    }

    // A poll behind 0..16 rounds of the worker's own 16-byte loads (512 threads).
    Function poll = fn("poll_behind_loads");
    const size_t wbytes = size_t(1) << 30;  // far larger than L2
    DeviceBuffer weights(ctx, wbytes), sink(ctx, 4096), flag(ctx, 256);
    weights.fill_bytes(0x3c);
    const unsigned one = 1;
    flag.fill_bytes(0);
    flag.upload(&one, 4);
    LaunchConfig single = all;
    single.block.x = 512;
    // The poll's own kind matters only behind its warp's loads.
    const char* const kPollNames[] = {"ld.acquire", "ld.relaxed", "ld.volatile"};
    for (int all_ctas = 0; all_ctas < 2; ++all_ctas) {
      for (int loads : {0, 1, 4, 16}) {
        for (int mode = 0; mode < 3; ++mode) {
          for (int p = 0; p < 3; ++p) {
            if ((loads == 0 && mode > 0) || (p > 0 && (loads == 0 || mode != 0))) continue;
            launch_args(poll, single, stream, weights.ptr(), u64(wbytes / 16), flag.ptr(), iters,
                        loads, mode, all_ctas, p, samples.ptr(), sink.ptr());
            stream.synchronize();
            Row r{fmt::format("poll of a set flag, {} KB of loads in flight{}",
                              loads * 512 * 16 / 1024, all_ctas ? " on every SM" : ", one SM"),
                  fmt::format("{}, {}", kPollNames[p],
                              mode == 0   ? "warp loads too"
                              : mode == 1 ? "warp issues none"
                                          : "warp L2-prefetches instead"),
                  {}, ""};
            for (u64 c : read(size_t(iters))) r.ns.push_back(double(c) / cycles_per_ns);
            rows.push_back(std::move(r));
          }
        }
      }
    }

    std::printf("%s (%s), %d SMs, driver %d, NVRTC %d.%d; SM clock during the run %.0f MHz "
                "(clock64 / globaltimer)\n",
                props.name.c_str(), props.arch().c_str(), sms, props.driver_version,
                nvrtc_version().first, nvrtc_version().second, cycles_per_ns * 1000);
    std::printf("%-52s %-28s %9s %9s %9s  %s\n", "test", "wait", "p50 ns", "p95 ns", "p99 ns", "");
    nlohmann::json j;
    j["device"] = props.name;
    j["sm_count"] = sms;
    j["sm_clock_mhz"] = cycles_per_ns * 1000;
    for (const Row& r : rows) {
      std::printf("%-52s %-28s %9.0f %9.0f %9.0f  %s\n", r.test.c_str(), r.mode.c_str(),
                  pct(r.ns, 50), pct(r.ns, 95), pct(r.ns, 99), r.note.c_str());
      j["rows"].push_back({{"test", r.test}, {"wait", r.mode}, {"n", r.ns.size()},
                           {"p50_ns", pct(r.ns, 50)}, {"p95_ns", pct(r.ns, 95)},
                           {"p99_ns", pct(r.ns, 99)}, {"note", r.note}});
    }
    if (!out_path.empty()) std::ofstream(out_path) << j.dump(1) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "handoff_bench: %s\n", e.what());
    return 1;
  }
}
