// Per-variant differential tests: tasks of one variant run alone in a one-worker launch of the
// real megakernel (its generated source, its dispatch) and are compared with a double-precision
// host computation on fresh random inputs, plus adversarial ranges. Outputs are poisoned (NaN)
// first, so an element the task does not write fails, and so does a NaN it writes. The seed is
// printed and in every failure message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "cuda/driver.h"
#include "gpu_device.h"
#include "ref/sampling.h"
#include "runtime/megakernel.h"
#include "runtime/variants.h"

namespace mpk::rt {
namespace {

using mpk::testing::have_device;

using Patch = std::function<std::string(std::string)>;

// The bf16 megakernel for `p`, its source edited by `patch` (a mutant) when given.
std::vector<uint8_t> build(const cuda::Context& ctx, const MegakernelParams& p, const Patch& patch,
                           int draws) {
  cuda::CompileRequest r;
  r.source = megakernel_source(p, DType::BF16, draws);
  if (patch) {
    const std::string before = r.source;
    r.source = patch(r.source);
    MPK_ICHECK(r.source != before) << "the mutant's patch changed nothing";
  }
  r.name = "mpk_megakernel.cu";
  r.arch = ctx.props().arch();
  r.options = megakernel_compile_options();
  return cuda::compile(r).cubin;
}

// `text` with its one occurrence of `from` replaced.
Patch replace_once(std::string from, std::string to) {
  return [from, to](std::string text) {
    const size_t at = text.find(from);
    MPK_ICHECK(at != std::string::npos && text.find(from, at + 1) == std::string::npos)
        << "'" << from << "' is not in the source once";
    return text.replace(at, from.size(), to);
  };
}

// A compiled kernel and a bump allocator of device memory for one test's tasks.
class Harness {
 public:
  // `draws`: the kernel that makes that mode's draws (MPK_MK_SAMPLE_*; set_sampling too).
  Harness(const cuda::Context& ctx, const MegakernelParams& p, const Patch& patch = {},
          int draws = MPK_MK_SAMPLE_GREEDY)
      : ctx_(ctx), params_(p), variants_(kernel_variants(p)),
        module_(ctx, build(ctx, p, patch, draws)),
        fn_(module_.function(megakernel_entry(DType::BF16))), stream_(ctx),
        arena_(ctx, size_t(64) << 20), control_(ctx, 4096) {
    fn_.set_max_dynamic_shared(ctx.props().max_shared_per_block_optin - fn_.static_shared_bytes());
  }

  const MegakernelParams& params() const { return params_; }
  void set_sampling(int mode, const ref::SamplingConfig& c) {
    sample_mode_ = mode;
    sampling_ = c;
  }
  int variant(const Variant& v) const { return variant_id(variants_, v); }

  // Device address of `n` floats (or halves) copied from the host; NaN-filled when null.
  template <typename T>
  uint64_t put(const std::vector<T>& host) {
    const uint64_t at = alloc(host.size() * sizeof(T));
    arena_.upload(host.data(), host.size() * sizeof(T), size_t(at - arena_.ptr()));
    return at;
  }
  uint64_t poisoned(size_t floats) { return put(std::vector<float>(floats, NAN)); }
  std::vector<float> get(uint64_t at, size_t floats) const {
    std::vector<float> out(floats);
    arena_.download(out.data(), floats * 4, size_t(at - arena_.ptr()));
    return out;
  }

  // Runs `tasks` in order on one worker at `position`; no events (one worker runs them in
  // order, each ends with a block barrier).
  // Returns "" or what went wrong.
  std::string run(std::vector<MkTask> tasks, size_t smem, int position) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      tasks[i].id = int(i);
      tasks[i].trigger = -1;
    }
    const uint64_t d_tasks = put(tasks);
    const uint64_t d_qb = put(std::vector<int>{0, int(tasks.size())});
    const uint64_t d_zero = put(std::vector<unsigned>(64, 0));
    control_.fill_bytes(0);
    MkParams p{};
    p.tasks = d_tasks;
    p.queue_begin = d_qb;
    p.waits = d_zero;
    p.needs = d_zero;
    p.counters = d_zero;
    p.arrivals = d_zero;
    p.control = control_.ptr();
    p.step = 1;
    p.position = position;
    p.num_steps = 1;
    p.num_workers = 1;
    p.timeout_ns = 5'000'000'000LL;
    p.prefetch_bytes = 32768;
    p.argmax_event = -1;
    p.sample_mode = sample_mode_;
    p.temperature = sampling_.temperature;
    p.top_k = sampling_.top_k;
    p.top_p = sampling_.top_p;
    p.seed = sampling_.seed;
    cuda::LaunchConfig cfg;
    cfg.block.x = unsigned(launch_threads(params_));  // with the controller warp, if any
    cfg.dynamic_shared = unsigned(smem);
    void* args[] = {&p};
    cuda::launch(fn_, cfg, stream_, args);
    stream_.synchronize();
    uint32_t status = 1;
    control_.download(&status, 4);
    return status == 0 ? "" : "the launch aborted";
  }

 private:
  uint64_t alloc(size_t bytes) {
    const size_t at = (used_ + 255) / 256 * 256;
    MPK_ICHECK(at + bytes <= arena_.size()) << "harness arena full";
    used_ = at + bytes;
    return arena_.ptr() + at;
  }
  const cuda::Context& ctx_;
  MegakernelParams params_;
  std::vector<Variant> variants_;
  cuda::Module module_;
  cuda::Function fn_;
  cuda::Stream stream_;
  cuda::DeviceBuffer arena_;
  cuda::DeviceBuffer control_;
  size_t used_ = 0;
  int sample_mode_ = MPK_MK_SAMPLE_GREEDY;
  ref::SamplingConfig sampling_;
};

uint64_t fresh_seed() {
  return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
}

// got vs want with a bound per element (NaN fails: the comparison is false): "" or the first
// elements out of bounds.
std::string compare(const std::vector<float>& got, const std::vector<double>& want,
                    const std::vector<double>& bound, const std::string& what) {
  if (got.size() != want.size()) return what + ": size";
  std::string err;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(double(got[i]) - want[i]) <= bound[i]) continue;
    if (++bad <= 3)
      err += what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
             ", want " + std::to_string(want[i]) + " +- " + std::to_string(bound[i]) + "\n";
  }
  return bad ? err + std::to_string(bad) + " elements out of bounds\n" : "";
}

struct LinearCase {
  int input_mode;  // MPK_MK_IN_*
  int k;
  std::vector<int> slice_rows;
  bool bias, residual;
  float x_scale;   // adversarial: large inputs
};

// One linear task of variant `rows` (rows per warp), checked element by element against
// sum_k w[r][k] * in[k] in double, within a multiple of the fp32 accumulation bound
// K * 2^-24 * sum_k |w[r][k] * in[k]|.
std::string check_linear(Harness& h, int rows, bool down, const LinearCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int k = c.k;
  const size_t kn = static_cast<size_t>(k);
  std::vector<float> x(kn), x2(kn), g(kn);
  for (int i = 0; i < k; ++i) {
    x[size_t(i)] = nd(rng) * c.x_scale;
    x2[size_t(i)] = nd(rng);
    g[size_t(i)] = 1.f + 0.1f * nd(rng);
  }
  const float eps = 1e-6f;
  // The input vector as the task sees it, in double.
  std::vector<double> in(kn);
  double ss = 0;
  for (int i = 0; i < k; ++i) ss += double(x[size_t(i)]) * x[size_t(i)];
  const double r = 1.0 / std::sqrt(ss / k + eps);
  for (int i = 0; i < k; ++i) {
    const double xv = x[size_t(i)];
    in[size_t(i)] = c.input_mode == MPK_MK_IN_RMSNORM ? g[size_t(i)] * xv * r
                    : c.input_mode == MPK_MK_IN_SILUMUL ? xv / (1 + std::exp(-xv)) * x2[size_t(i)]
                                                        : xv;
  }
  MkTask t{};
  t.kind = MPK_MK_LINEAR;
  t.variant = h.variant(Variant{MPK_MK_LINEAR, rows});
  t.input_mode = c.input_mode;
  t.k = k;
  t.eps = eps;
  t.x = h.put(x);
  t.x2 = h.put(x2);
  t.norm_w = h.put(g);
  t.num_slices = int(c.slice_rows.size());
  std::vector<uint64_t> outs;
  std::vector<double> want, bound;
  for (size_t s = 0; s < c.slice_rows.size(); ++s) {
    const int n = c.slice_rows[s];
    std::vector<uint16_t> w(size_t(n) * size_t(k));
    for (auto& v : w) v = f32_to_bf16(0.05f * nd(rng));
    std::vector<float> bias(static_cast<size_t>(n)), res(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) { bias[size_t(i)] = nd(rng); res[size_t(i)] = nd(rng) * c.x_scale; }
    MkSlice& sl = t.slices[s];
    sl.w = h.put(w);
    sl.bias = c.bias ? h.put(bias) : 0;
    sl.res = c.residual ? h.put(res) : 0;
    sl.out = h.poisoned(size_t(n));
    sl.rows = n;
    outs.push_back(sl.out);
    for (int row = 0; row < n; ++row) {
      double acc = 0, mag = 0;
      for (int i = 0; i < k; ++i) {
        const double term = bf16_to_f32(w[size_t(row) * size_t(k) + size_t(i)]) * in[size_t(i)];
        acc += term;
        mag += std::fabs(term);
      }
      if (c.bias) { acc += bias[size_t(row)]; mag += std::fabs(bias[size_t(row)]); }
      if (c.residual) { acc += res[size_t(row)]; mag += std::fabs(res[size_t(row)]); }
      want.push_back(acc);
      // fp32 accumulation: at most (K + 8) * 2^-24 * sum |terms| (the input's own rounding, the
      // RMSNorm scale and silu: as much again).
      bound.push_back((2 * k + 16) * std::ldexp(mag, -24) * 2);
    }
  }
  const std::string ran = h.run({t}, size_t(4 * k), 0);
  if (!ran.empty()) return ran;
  std::vector<float> got;
  for (size_t s = 0; s < outs.size(); ++s) {
    const auto o = h.get(outs[s], size_t(c.slice_rows[s]));
    got.insert(got.end(), o.begin(), o.end());
  }
  return compare(got, want, bound,
                 "linear.r" + std::to_string(rows) + (down ? " (down)" : "") + " mode " +
                     std::to_string(c.input_mode) + " k " + std::to_string(k) + " seed " +
                     std::to_string(seed));
}

// Every linear variant, on each input mode, aligned and unaligned K, rows that leave a partial
// row group, two slices, bias and residual, and inputs a thousand times larger.
TEST(VariantGpu, LinearVariantsMatchTheHost) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  // Two kernels hold rows per warp 1..4 (each with a second, down-projection variant), a third
  // loads two vectors per round.
  for (const MegakernelParams& p :
       {MegakernelParams{.rows_per_warp = 2, .down_rows_per_warp = 1},
        MegakernelParams{.rows_per_warp = 3, .down_rows_per_warp = 4},
        MegakernelParams{.rows_per_warp = 1, .loads_in_flight = 2}}) {
    Harness h(ctx, p);
    std::vector<std::pair<int, bool>> vs = {{p.rows_per_warp, false}};
    if (p.down_rows_per_warp > 0) vs.push_back({p.down_rows_per_warp, true});
    uint64_t s = seed;
    for (const auto& [rows, down] : vs) {
      for (const LinearCase& c : {LinearCase{MPK_MK_IN_PLAIN, 1024, {37}, true, false, 1.f},
                                  LinearCase{MPK_MK_IN_RMSNORM, 1024, {20, 17}, false, true, 1.f},
                                  LinearCase{MPK_MK_IN_SILUMUL, 3072, {29}, false, true, 1.f},
                                  LinearCase{MPK_MK_IN_PLAIN, 1003, {33}, true, true, 1.f},
                                  LinearCase{MPK_MK_IN_RMSNORM, 256, {64, 8}, true, false, 1000.f},
                                  LinearCase{MPK_MK_IN_PLAIN, 4096, {5}, false, true, 1000.f}}) {
        SCOPED_TRACE(to_json(p));
        EXPECT_EQ(check_linear(h, rows, down, c, ++s), "");
      }
    }
  }
}

struct AttnCase {
  int group, head_dim, position, chunks;
  float q_scale;  // adversarial: scores in the hundreds
  bool norm_rope;
  float late_scale = 1.f;  // the keys of the last third of the history scaled by this: with a
                           // small value, the late chunks' scores sit far below the early ones
};

// The chunks of one KV head (and the merge when there are several) against softmax attention in
// double over positions 0..position (the last one the step's new key and value).
std::string check_attention(Harness& h, const AttnCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int G = c.group, D = c.head_dim, P = c.position, C = c.chunks, cap = P + 8;
  const size_t d = static_cast<size_t>(D);
  std::vector<float> q(size_t(G) * d), kx(d), vx(d), qn(d), kn(d), inv(d / 2),
      kc(size_t(cap) * d, 0.f), vc(size_t(cap) * d, 0.f);
  for (auto& v : q) v = nd(rng) * c.q_scale;
  for (auto& v : kx) v = nd(rng);
  for (auto& v : vx) v = nd(rng);
  for (auto& v : qn) v = 1.f + 0.1f * nd(rng);
  for (auto& v : kn) v = 1.f + 0.1f * nd(rng);
  for (int i = 0; i < D / 2; ++i) inv[size_t(i)] = float(std::pow(10000.0, -2.0 * i / D));
  for (int j = 0; j < P * D; ++j) {
    kc[size_t(j)] = nd(rng) * (j / D >= 2 * P / 3 ? c.late_scale : 1.f);
    vc[size_t(j)] = nd(rng);
  }
  const float eps = 1e-6f, scale = 1.f / std::sqrt(float(D));
  // Host: the heads as the task stages them (norm, then RoPE), in double.
  auto stage = [&](const float* src, const std::vector<float>& w) {
    std::vector<double> x(src, src + D);
    if (c.norm_rope) {
      double ss = 0;
      for (double v : x) ss += v * v;
      const double r = 1.0 / std::sqrt(ss / D + eps);
      for (int i = 0; i < D; ++i) x[size_t(i)] = w[size_t(i)] * (x[size_t(i)] * r);
      for (int i = 0; i < D / 2; ++i) {
        const double a = double(P) * inv[size_t(i)], s = std::sin(a), co = std::cos(a);
        const double x0 = x[size_t(i)], x1 = x[size_t(i + D / 2)];
        x[size_t(i)] = x0 * co - x1 * s;
        x[size_t(i + D / 2)] = x1 * co + x0 * s;
      }
    }
    return x;
  };
  const std::vector<double> knew = stage(kx.data(), kn);
  std::vector<double> want, bound;
  for (int g = 0; g < G; ++g) {
    const std::vector<double> qh = stage(q.data() + g * D, qn);
    std::vector<double> s(size_t(P + 1));
    double mx = -INFINITY, smag = 0;
    for (int j = 0; j <= P; ++j) {
      double d = 0, mag = 0;
      for (int e = 0; e < D; ++e) {
        const double term = qh[size_t(e)] * (j < P ? double(kc[size_t(j * D + e)]) : knew[size_t(e)]);
        d += term;
        mag += std::fabs(term);
      }
      s[size_t(j)] = d * scale;
      smag = std::max(smag, mag * scale);
      mx = std::max(mx, s[size_t(j)]);
    }
    double sum = 0;
    for (int j = 0; j <= P; ++j) { s[size_t(j)] = std::exp(s[size_t(j)] - mx); sum += s[size_t(j)]; }
    // An fp32 score is off by at most (D + 8) * 2^-24 * sum |terms| (more after the staged
    // head's own rounding: twice that), which scales its softmax weight by up to e^that; expf,
    // the sums and the division add a few units of 2^-24 per position.
    const double rel = std::expm1(2 * (D + 8) * std::ldexp(smag, -24)) * 2 + (P + 16) * std::ldexp(1.0, -22);
    for (int e = 0; e < D; ++e) {
      double o = 0, vmax = 0;
      for (int j = 0; j <= P; ++j) {
        const double v = j < P ? double(vc[size_t(j * D + e)]) : double(vx[size_t(e)]);
        o += s[size_t(j)] * v;
        vmax = std::max(vmax, std::fabs(v));
      }
      want.push_back(o / sum);
      bound.push_back(vmax * rel);
    }
  }
  const uint64_t d_kc = h.put(kc), d_vc = h.put(vc);
  const uint64_t d_out = h.poisoned(size_t(G * D));
  const uint64_t d_part = h.poisoned(size_t(C * G * (D + 2)));
  std::vector<MkTask> tasks;
  for (int ch = 0; ch < C; ++ch) {
    MkTask t{};
    t.kind = MPK_MK_ATTENTION;
    t.variant = h.variant(Variant{MPK_MK_ATTENTION, 0});
    t.chunk = ch;
    t.num_chunks = C;
    t.kv_head = 0;
    t.group = G;
    t.head_dim = D;
    t.scale = scale;
    t.norm_eps = eps;
    t.capacity = cap;
    t.q = h.put(q);
    t.kx = h.put(kx);
    t.vx = h.put(vx);
    if (c.norm_rope) {
      t.flags = MPK_MK_F_Q_NORM | MPK_MK_F_K_NORM | MPK_MK_F_ROPE_Q | MPK_MK_F_ROPE_K;
      t.q_norm = h.put(qn);
      t.k_norm = h.put(kn);
      t.inv_freq = h.put(inv);
    }
    t.k_cache = d_kc;
    t.v_cache = d_vc;
    t.partial = C > 1 ? d_part + uint64_t(ch) * uint64_t(G * (D + 2)) * 4 : 0;
    t.out = d_out;
    tasks.push_back(t);
  }
  if (C > 1) {
    MkTask m = tasks[0];
    m.kind = MPK_MK_ATTN_MERGE;
    m.variant = h.variant(Variant{MPK_MK_ATTN_MERGE, 0});
    m.partial = d_part;
    tasks.push_back(m);
  }
  const MegakernelParams& p = h.params();
  const size_t smem =
      size_t((G + 2) * D + (p.block_threads / 32) * p.heads_per_pass * (D + 2)) * 4;
  const std::string ran = h.run(tasks, smem, P);
  if (!ran.empty()) return ran;
  const std::string what = "attention G " + std::to_string(G) + " D " + std::to_string(D) +
                           " position " + std::to_string(P) + " chunks " + std::to_string(C) +
                           " q x" + std::to_string(c.q_scale) + " seed " + std::to_string(seed);
  std::string err = compare(h.get(d_out, size_t(G * D)), want, bound, what);
  // The new key and value rows are appended at the position.
  // The kernel's angle, position x inv_freq in fp32 as the reference's, is off the host's by up
  // to 2^-24 of itself, which moves the rotated pair by that times its length (2^-23: margin
  // for sin and cos): at position 300 more than 1e-5 (1 + |k|) allowed for some seeds.
  std::vector<double> kb(d);
  for (size_t e = 0; e < d; ++e) {
    const size_t i = e % (d / 2);
    const double angle = c.norm_rope ? double(P) * inv[i] : 0.0;
    kb[e] = 1e-5 * (1 + std::fabs(knew[e])) + std::ldexp(angle * std::hypot(knew[i], knew[i + d / 2]), -23);
  }
  err += compare(h.get(d_kc + uint64_t(P * D) * 4, d), knew, kb, what + " appended key");
  const std::vector<double> vwant(vx.begin(), vx.end());
  err += compare(h.get(d_vc + uint64_t(P * D) * 4, d), vwant, std::vector<double>(d, 0.0),
                 what + " appended value");
  return err;
}

// Attention chunks and the merge: one chunk and several (an empty one among them: the first
// chunk of 2 positions over 3; more chunks than one merge batch holds), head norms and RoPE,
// scores in the hundreds, and early chunks' scores hundreds above the late ones' (a rescale
// that overflows or loses the running max fails here).
TEST(VariantGpu, AttentionAndMergeMatchTheHost) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  Harness h(ctx, params_for_head_dim(128));
  uint64_t s = seed;
  for (const AttnCase& c : {AttnCase{4, 128, 40, 1, 1.f, false}, AttnCase{4, 128, 40, 1, 1.f, true},
                            AttnCase{2, 128, 1, 3, 1.f, true}, AttnCase{8, 128, 300, 5, 1.f, true},
                            AttnCase{4, 128, 200, 4, 40.f, false},
                            AttnCase{4, 128, 33, 1, 40.f, false},
                            AttnCase{4, 128, 120, 12, 40.f, false, 0.01f},
                            AttnCase{4, 128, 120, 12, 100.f, false, 0.01f}}) {
    EXPECT_EQ(check_attention(h, c, ++s), "");
  }
}

// Mutant kernels, each one edit of the generated source, are caught by the same checks: the
// float-only one (the merge's batch max taken without the running max, equal over the reals,
// so the prover accepts it) by the adversarial scores.
TEST(VariantGpu, MutantKernelsAreCaught) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  const MegakernelParams p = params_for_head_dim(128);
  {
    Harness h(ctx, p, replace_once("float Mb = M;", "float Mb = MK_NEG_INF;"));
    EXPECT_EQ(check_attention(h, AttnCase{4, 128, 40, 1, 1.f, true}, seed), "")
        << "equal over the reals: ordinary scores pass";
    // Caught where the rescale by exp(M - Mb) overflows: an early score more than ~88 above the
    // late batch's. With scores of standard deviation 40 some seeds had none (about 1 run in 8);
    // with 100, one of a head's 80 early scores above 0.9 standard deviations is enough.
    EXPECT_NE(check_attention(h, AttnCase{4, 128, 120, 12, 100.f, false, 0.01f}, seed + 1), "")
        << "the batch max without the running max was not caught";
  }
  {
    Harness h(ctx, p, replace_once("acc[h][c] = mk_os_update(acc[h][c], corr,",
                                   "acc[h][c] = mk_os_update(acc[h][c], 1.0f,"));
    EXPECT_NE(check_attention(h, AttnCase{4, 128, 40, 1, 1.f, true}, seed + 2), "")
        << "an update that does not rescale the accumulator was not caught";
  }
  {
    // 5 rows of 256: the tile's rows are split in 5 K parts (mk_ksplit), 4 boundaries.
    Harness h(ctx, p, replace_once("k1 = (int)mk_even_split_end(p, units, ks) * unit;",
                                   "k1 = (int)mk_even_split_end(p, units, ks) * unit + (p + 1 < ks ? unit : 0);"));
    EXPECT_NE(check_linear(h, p.rows_per_warp, false,
                           LinearCase{MPK_MK_IN_PLAIN, 256, {5}, false, true, 1.f}, seed + 3), "")
        << "K parts overlapping by one vector were not caught";
  }
}

// The argmax task's top-k (then top-p) draw and its nucleus over every logit, over a vocabulary
// of Qwen3's size, against the reference sampler: the same token for every configuration, seed
// and position. Logits: spread values, few distinct values (equal logits ranked by id), signed
// zeros (equal), and a vocabulary that fits in shared memory at once. The DeviceDraw tests run
// it through the kernel as built (the guessed top-k threshold, the guessed nucleus bracket) and
// through kernels that take the radix selects every time (a few passes for spread logits, every
// pass down to the ids for few values) or refuse every guessed bracket.
// Returns the draws that differ from the reference's, described.
std::vector<std::string> draw_mismatches(Harness& h, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  struct Logits { const char* what; int n; std::function<float()> draw; };
  const std::vector<Logits> cases = {
      {"spread", 151936, [&] { return 3.f * nd(rng); }},
      {"few values", 151936, [&] { return std::round(2.f * nd(rng)) / 2.f; }},
      {"signed zeros", 151936, [&] { const float v = nd(rng); return v > 1.5f ? v : (v > 0 ? 0.f : -0.f); }},
      {"small", 1031, [&] { return nd(rng); }},
  };
  const std::vector<ref::SamplingConfig> configs = {
      {.temperature = 0.7f, .top_k = 50, .top_p = 1.f, .seed = seed},
      {.temperature = 1.0f, .top_k = 1024, .top_p = 0.9f, .seed = seed + 1},
      {.temperature = 0.5f, .top_k = 1, .top_p = 1.f, .seed = seed + 2},
      {.temperature = 1.3f, .top_k = 20, .top_p = 0.5f, .seed = seed + 3},
      {.temperature = 2.0f, .top_k = 700, .top_p = 0.999f, .seed = seed + 4},
      // The nucleus over every logit (no top-k, or a top_k of the whole vocabulary).
      {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .seed = seed + 5},
      {.temperature = 0.6f, .top_k = 0, .top_p = 0.3f, .seed = seed + 6},
      {.temperature = 1.5f, .top_k = 0, .top_p = 0.999f, .seed = seed + 7},
      {.temperature = 0.8f, .top_k = 1 << 30, .top_p = 0.6f, .seed = seed + 8},
      {.temperature = 1.0f, .top_k = 0, .top_p = 0.01f, .seed = seed + 9},  // a nucleus of a few keys
      // A top_k past the sort (MPK_MK_SAMPLE_KMAX): its last key by radix select bounds the
      // nucleus (or, top_p 1, the draw); 1030 is one below the small vocabulary.
      {.temperature = 1.0f, .top_k = 1500, .top_p = 0.9f, .seed = seed + 10},
      {.temperature = 0.9f, .top_k = 40000, .top_p = 1.f, .seed = seed + 11},
      {.temperature = 1.2f, .top_k = 100000, .top_p = 0.5f, .seed = seed + 12},
      {.temperature = 0.7f, .top_k = 1030, .top_p = 0.95f, .seed = seed + 13},
  };
  std::vector<std::string> bad;
  for (const Logits& c : cases) {
    std::vector<float> logits(size_t(c.n));
    for (float& v : logits) v = c.draw();
    const uint64_t d_logits = h.put(logits);
    // One partial: the largest logit (the task reduces the tiles' partials first).
    const size_t top = size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    MkTask t{};
    t.kind = MPK_MK_ARGMAX;
    t.n = 1;
    t.part_val = h.put(std::vector<float>{logits[top]});
    t.part_idx = h.put(std::vector<int>{int(top)});
    t.next_token = h.put(std::vector<int>{-1});
    t.x = d_logits;
    t.num_logits = c.n;
    for (const ref::SamplingConfig& sc : configs) {
      for (int position : {3, 1000, 77777}) {
        h.set_sampling(MPK_MK_SAMPLE_TOPK, sc);
        const std::string run = h.run({t}, MPK_MK_SAMPLE_SMEM, position);
        int got = -1;
        const std::vector<float> raw = h.get(t.next_token, 1);
        std::memcpy(&got, raw.data(), 4);
        const int32_t want = ref::sample_token(logits, sc, uint64_t(position) + 1);
        if (!run.empty() || got != want)
          bad.push_back(std::string(c.what) + ": top_k " + std::to_string(sc.top_k) + " top_p " +
                        std::to_string(sc.top_p) + " temperature " + std::to_string(sc.temperature) + " position " +
                        std::to_string(position) + ": " + (run.empty() ? "token " + std::to_string(got) +
                                                                              ", the reference's " + std::to_string(want)
                                                                        : run) +
                        " (seed " + std::to_string(seed) + ")");
      }
    }
  }
  return bad;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

void check_draws(Harness& h, uint64_t seed) {
  const std::vector<std::string> bad = draw_mismatches(h, seed);
  EXPECT_TRUE(bad.empty()) << joined(bad);
}

// Two edits of the source, one after the other.
Patch both(Patch a, Patch b) {
  return [a, b](std::string text) { return b(a(std::move(text))); };
}
// The nucleus without the guessed bracket: the radix select every time.
const Patch no_guess = replace_once("bool guessed = n > MPK_MK_SAMPLE_GROUP", "bool guessed = false");

// Each draw test over both thread layouts (with the controller warp, the compute threads'
// barrier is a named one), a kernel for each: as built, or with `patch`.
void check_draws_in_both_layouts(const Patch& patch, uint64_t seed) {
  cuda::Context ctx(0);
  const MegakernelParams with_controller = default_params(128, 1'192'000'000, 28, 132);
  for (const MegakernelParams& p : {params_for_head_dim(128), with_controller}) {
    SCOPED_TRACE("controller warp " + std::to_string(p.controller_warp));
    Harness h(ctx, p, patch, MPK_MK_SAMPLE_TOPK);
    check_draws(h, seed);
  }
}

TEST(DeviceDraw, TopKAndTopPDrawWhatTheReferenceDraws) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  check_draws_in_both_layouts({}, seed);
}

// The top-k draw by its radix select alone (no guessed threshold).
TEST(DeviceDraw, TheTopKRadixSelectDrawsWhatTheReferenceDraws) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  check_draws_in_both_layouts(replace_once("if (n > MPK_MK_SAMPLE_GROUP) {", "if (false) {"), seed);
}

// The nucleus by the radix select alone (no guessed bracket), down to one key every time (every
// pass, down to the ids for equal logits) instead of stopping where the bin's keys fit the sort.
TEST(DeviceDraw, TheNucleusRadixSelectDrawsWhatTheReferenceDraws) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  check_draws_in_both_layouts(both(no_guess, replace_once("} while (group > MPK_MK_SAMPLE_KMAX && shift > 0);",
                                                          "} while (group > 1 && shift > 0);")),
                              seed);
}

// Every guessed bracket refused after its keys were gathered and cut: the radix select then.
TEST(DeviceDraw, ARefusedNucleusGuessDrawsWhatTheReferenceDraws) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  check_draws_in_both_layouts(
      replace_once("sc[6] = !guessed || mpk_nucleus_reached(", "sc[6] = !guessed && mpk_nucleus_reached("), seed);
}

// Mutants of the nucleus draw, each caught: the last key left out of the nucleus; the mass
// ranked before the radix select's bin not carried from one pass to the next (the select
// alone); a top_k past the sort not bounding a top_p 1 draw; the guessed draw's floor raised
// above the draw it stands for (keys that could win left out: by 8, as the floor is the largest
// key of a strided sample of one key in 74 of 151,936, so the winner is within 1 of it in
// about 4% of draws and within 8 in 98%); the floored pass listing keys below the nucleus.
TEST(DeviceDraw, NucleusMutantsAreCaught) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", (unsigned long long)seed);
  const MegakernelParams p = params_for_head_dim(128);
  for (const Patch& mutant :
       {replace_once("if (in && mk_sample_key(v, j) >= last)", "if (in && mk_sample_key(v, j) > last)"),
        both(no_guess, replace_once("sc[1] = run;", "sc[1] = above;")),
        replace_once(": (u64)floor;", ": (u64)0;"),
        replace_once("const float floor_ = drawn - (", "const float floor_ = drawn + 8.f - ("),
        replace_once("if (!in || mk_sample_key(v, j) < last) return;", "if (!in) return;")}) {
    Harness h(ctx, p, mutant, MPK_MK_SAMPLE_TOPK);
    EXPECT_FALSE(draw_mismatches(h, seed).empty()) << "a nucleus mutant was not caught";
  }
}

// The last key the draw chooses among (a kernel that returns its id instead of the draw),
// against ref::nucleus_last: a cut a few keys off changes few draws, so the draws alone would
// miss it. Spread logits (fixed seeds) under top-p alone and under top-k past the sort (its
// top_k-th key with top_p 1), with `patch`; `accept_only`: a refused guess traps (the guess
// must take these logits). Returns the mismatches, described.
std::vector<std::string> nucleus_mismatches(const cuda::Context& ctx, const Patch& patch, bool accept_only) {
  Patch last = replace_once("  mk_block_argmax(best, bi, redv, redi);\n  return bi;\n}\n\n// The sampled token",
                            "  mk_block_argmax(best, bi, redv, redi);\n  return last ? mk_sample_id(last) : -1;\n}\n\n"
                            "// The sampled token");
  if (accept_only)
    last = both(last, replace_once("    guessed = false;  // not in the guess's bracket: the radix select\n",
                                   "    if (guessed) __trap();\n    guessed = false;\n"));
  Harness h(ctx, params_for_head_dim(128), patch ? both(patch, last) : last, MPK_MK_SAMPLE_TOPK);
  std::vector<std::string> bad;
  for (const uint64_t seed : {11u, 12u, 13u}) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> logits(151936);
    for (float& v : logits) v = (seed == 13 ? 1.f : 3.f) * nd(rng);
    const size_t top = size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    MkTask t{};
    t.kind = MPK_MK_ARGMAX;
    t.n = 1;
    t.part_val = h.put(std::vector<float>{logits[top]});
    t.part_idx = h.put(std::vector<int>{int(top)});
    t.next_token = h.put(std::vector<int>{-2});
    t.x = h.put(logits);
    t.num_logits = int(logits.size());
    for (const auto& [top_k, top_p] : std::vector<std::pair<int, float>>{
             {0, 0.3f}, {0, 0.6f}, {0, 0.9f}, {0, 0.99f}, {1500, 0.9f}, {1500, 1.f}, {40000, 0.6f}, {40000, 1.f}}) {
      for (const float temperature : {0.7f, 1.0f, 1.5f}) {
        const ref::SamplingConfig sc{.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = seed};
        h.set_sampling(MPK_MK_SAMPLE_TOPK, sc);
        const std::string run = h.run({t}, MPK_MK_SAMPLE_SMEM, 5);
        int got = -1;
        const std::vector<float> raw = h.get(t.next_token, 1);
        std::memcpy(&got, raw.data(), 4);
        const int32_t want = ref::nucleus_last(logits, sc);
        if (!run.empty() || got != want)
          bad.push_back("seed " + std::to_string(seed) + " top_k " + std::to_string(top_k) + " top_p " +
                        std::to_string(top_p) + " temperature " +
                        std::to_string(temperature) + ": " +
                        (run.empty() ? "last id " + std::to_string(got) + ", the reference's " + std::to_string(want)
                                     : run));
      }
    }
  }
  return bad;
}

// The nucleus's last key exact as built, through the guess alone on spread logits, and through
// the radix select alone; caught where the guess's mass at or above a threshold leaves out the
// threshold's own keys, where a later round counts the keys at its range's upper bound again,
// where the top-k's last key is one rank off, and where the nucleus's radix select counts the
// keys below it.
TEST(DeviceDraw, TheNucleusEndsOnTheReferencesLastKey) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device: this test runs on the GPU machine";
  cuda::Context ctx(0);
  EXPECT_EQ(joined(nucleus_mismatches(ctx, {}, false)), "");
  EXPECT_EQ(joined(nucleus_mismatches(ctx, {}, true)), "") << "the guess refused spread logits";
  EXPECT_EQ(joined(nucleus_mismatches(ctx, no_guess, false)), "");
  EXPECT_NE(joined(nucleus_mismatches(ctx, replace_once("if (k32 >= ((volatile unsigned*)thr)[k]) ws[k] += m;",
                                                       "if (k32 > ((volatile unsigned*)thr)[k]) ws[k] += m;"),
                                      false)),
            "")
      << "the mass at or above a threshold short of the threshold's own keys was not caught";
  EXPECT_NE(joined(nucleus_mismatches(ctx, replace_once("if (k32 < lo || k32 >= hi) return;", "if (k32 < lo || k32 > hi) return;"),
                                      false)),
            "")
      << "a later round counting the keys at the range's upper bound twice was not caught";
  EXPECT_NE(joined(nucleus_mismatches(
                ctx, replace_once("mk_sample_radix_kth(logits, n, top_k, keys", "mk_sample_radix_kth(logits, n, top_k - 1, keys"),
                false)),
            "")
      << "the top-k's last key one rank off was not caught";
  EXPECT_NE(joined(nucleus_mismatches(ctx,
                                      replace_once("if (key >= floor && mk_sample_in(key, prefix, shift + 8)) {",
                                                   "if (mk_sample_in(key, prefix, shift + 8)) {"),
                                      false)),
            "")
      << "the nucleus's radix select over the keys below the top-k's last was not caught";
}

}  // namespace
}  // namespace mpk::rt
