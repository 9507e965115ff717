#include "runtime/gpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/paths.h"
#include "cache/sha256.h"
#include "ref/kernels.h"
#include "runtime/host_ops.h"
#include "runtime/profile.h"
#include "runtime/proofs.h"
#include "runtime/runtime.h"
#include "runtime/tune.h"

namespace mpk::rt {
namespace {

constexpr long long kWaitTimeoutNs = 5'000'000'000LL;  // a wait this long is a deadlock

// A key's compile side: target, toolchain, code generator, options and the source's hash (the
// caller fills in what the kernel computes).
cache::CacheKey compile_key(const std::string& arch, const char* codegen, std::vector<std::string> options,
                            const std::string& source) {
  auto [maj, min] = cuda::nvrtc_version();
  cache::CacheKey k;
  k.arch = arch;
  k.nvrtc_version = std::to_string(maj) + "." + std::to_string(min);
  k.driver_version = std::to_string(cuda::driver_version());
  k.codegen_version = codegen;
  k.compile_options = std::move(options);
  k.source_hash = cache::sha256_hex(source);
  return k;
}

cache::CacheKey megakernel_key(const ir::Graph& g, DType dtype, int workers, const std::string& arch,
                               const MegakernelParams& params, int draws) {
  const auto& c = g.config;
  cache::CacheKey k = compile_key(arch, kMegakernelCodegenVersion, megakernel_compile_options(),
                                  megakernel_source(params, dtype, draws));
  k.task.op_kind = "megakernel";
  k.task.fused_ops = {c.architecture};
  k.task.shapes = {{c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers,
                    c.num_heads, c.num_kv_heads, c.head_dim}};
  k.task.dtypes = {dtype_name(dtype)};
  k.task.layout = "workers=" + std::to_string(workers) + " params=" + to_json(params) +
                  (draws ? " draws=" + std::to_string(draws) : "");
  return k;
}

// The kernel-cache entry of `key`, built on a miss; without a usable cache, built directly.
cache::Entry through_cache(const RuntimeOptions& options, const cache::CacheKey& key,
                           const std::function<cache::Entry()>& build) {
  try {
    cache::CacheOptions co;
    MPK_CHECK(!options.cache_dir.empty(), Cache) << "no kernel cache directory";
    co.path = options.cache_dir / cache::kCacheFileName;
    std::filesystem::create_directories(co.path.parent_path());
    cache::Cache kc(co);
    return kc.get_or_build(key, build);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cache && e.kind() != ErrorKind::Io) throw;
    log(LogLevel::Warn, "kernel cache unavailable ({}); compiling without it", e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    log(LogLevel::Warn, "kernel cache directory unavailable ({}); compiling without it", e.what());
  }
  return build();
}

// The megakernel that makes the draws of `mode` (MK_DRAWS; greedy: none) through the cache,
// built with `record` as its verification record, ptxas's figures added. A build here sets
// `built` and adds its NVRTC time to compile_ms.
cache::Entry megakernel_through_cache(const RuntimeOptions& options, const ir::Graph& g, DType dtype, int workers,
                                      const std::string& arch, const MegakernelParams& params, int mode,
                                      const std::string& record, bool& built, double& compile_ms) {
  return through_cache(options, megakernel_key(g, dtype, workers, arch, params, mode), [&] {
    cuda::CompileResult r = compile_megakernel(arch, params, dtype, mode);
    compile_ms += r.compile_ms;
    built = true;
    if (!r.log.empty()) log(LogLevel::Debug, "megakernel (draws {}) NVRTC log: {}", mode, r.log);
    cache::Entry e;
    e.cubin = std::move(r.cubin);
    e.params_json = to_json(params);
    const cuda::PtxasInfo info = cuda::parse_ptxas_info(r.log, megakernel_entry(dtype));
    // The search judges spills by these figures: say so when the log lacks them.
    if (info.registers < 0)
      log(LogLevel::Warn, "megakernel: no ptxas figures for {} in NVRTC's log ({} bytes): {}", megakernel_entry(dtype),
          r.log.size(), r.log.substr(0, 400));
    e.verification_json = record_with_ptxas(record, info);
    return e;
  });
}

// Sessions' default capacity, within the model's positions: the capacity the load plans for
// (the KV split, hence the task count, depends on it).
int64_t load_capacity(const ir::Graph& graph) {
  const int64_t def = int64_t(SessionOptions{}.kv_capacity);
  return graph.config.max_position_embeddings > 0 ? std::min<int64_t>(def, graph.config.max_position_embeddings)
                                                  : def;
}

sched::Plan load_plan(const ir::Graph& graph, int workers, int64_t cap, const MegakernelParams& params) {
  sched::PlanOptions po = megakernel_plan_options(graph, workers, cap, params);
  po.dump = std::string();  // $MPK_DUMP shows the plans sessions run, not the load's
  return sched::plan(graph, po);
}

// The proofs of the formulas `plan`'s descriptors use under `params`; a failed one throws.
// num_logits: the logits the argmax task reads (what a top-k draw's proofs are for); host: the
// host fallback's share of a step, when given.
std::vector<PlanProof> prove_load_plan(const ir::Graph& graph, const sched::Plan& plan, const MemoryPlan& mem,
                                       const MegakernelParams& params, int64_t& num_logits,
                                       HostFallback* host = nullptr) {
  const MegakernelTables tables = build_tables(graph, plan, mem, SegmentBases{}, params);
  if (host) *host = host_fallback(host_segments(graph, plan.tasks, mem, tables));
  const std::vector<MkTask> tasks = tables.device_tasks();
  for (const MkTask& t : tasks)
    if (t.kind == MPK_MK_ARGMAX) num_logits = t.num_logits;
  return plan_proofs(tasks, params);
}

cache::CacheKey prefill_key(const std::string& arch) {
  cache::CacheKey k = compile_key(arch, kPrefillCodegenVersion, prefill_compile_options(), prefill_source(arch));
  k.task.op_kind = "prefill";
  k.task.dtypes = {"bf16"};
  return k;
}

int find_op(const ir::Graph& g, ir::OpKind kind) {
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == kind) return int(i);
  return -1;
}

}  // namespace

cuda::PtxasInfo precompile_megakernel(const RuntimeOptions& options, const ir::Graph& graph, DType dtype,
                                      int workers, const std::string& arch, const MegakernelParams& params) {
  const int64_t cap = load_capacity(graph);
  const sched::Plan plan = load_plan(graph, workers, cap, params);
  const MemoryPlan mem = plan_memory(graph, plan.tasks, dtype, cap);
  int64_t num_logits = 0;
  const std::string record = verification_record(prove_load_plan(graph, plan, mem, params, num_logits));
  bool built = false;
  double compile_ms = 0;
  return record_ptxas(megakernel_through_cache(options, graph, dtype, workers, arch, params, MPK_MK_SAMPLE_GREEDY,
                                               record, built, compile_ms)
                          .verification_json);
}

GpuModel::GpuModel(const RuntimeOptions& options, const model::Model& model, const ir::Graph& graph,
                   Stats& stats)
    : options_(options), graph_(graph) {
  const int count = cuda::device_count();
  MPK_CHECK(options.device >= 0 && options.device < count, NoDevice)
      << "device " << options.device << " does not exist (" << count << " CUDA devices)";
  ctx_ = std::make_unique<cuda::Context>(options.device);
  const cuda::DeviceProps& props = ctx_->props();
  MPK_CHECK(props.cooperative_launch, Unsupported)
      << "device " << props.name << " does not support cooperative launches";
  num_workers_ = props.sm_count;
  dtype_ = model.dtype;
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  auto t = Clock::now();
  report(options, "plan", 0, 0);
  // Plan once at load so that an unsupported fused op fails here, not at the first step.
  const int64_t cap = load_capacity(graph);
  sched::Plan plan = load_plan(graph, num_workers_, cap, MegakernelParams{});
  // The code parameters: set by the caller (tuning runs), else a tuning result, else the defaults.
  defaults_ = rt::default_params(int(graph.config.head_dim), plan.tasks.total_weight_bytes(),
                                 graph.config.num_layers, num_workers_);
  params_ = defaults_;
  signature_ = tuning_signature_text(graph, dtype_, num_workers_, props.name, props.arch());
  if (!options.mk_params.empty()) {
    params_ = parse_params(options.mk_params, params_);
    log(LogLevel::Info, "megakernel parameters {}", to_json(params_));
  } else if (options.tune_policy != TunePolicy::DefaultsOnly) {
    if (const std::optional<cache::Tuning> t = find_tuning(options, signature_)) {
      try {
        params_ = params_from_json(t->params_json, defaults_);
        tuned_ = true;
        log(LogLevel::Info, "megakernel parameters {} from a tuning result ({:.1f} vs {:.1f} us/token)",
            to_json(params_), t->time_us, t->default_time_us);
      } catch (const Error& e) {
        log(LogLevel::Warn, "ignoring a tuning result whose parameters this build refuses ({}); using the defaults",
            e.what());
      }
    }
  }
  stats.tuned = tuned_;
  stats.tune_changed_params = changed_params(params_, defaults_);
  stats.tune_stages_changed = changed_stages(params_, defaults_).size();
  // The chosen decomposition (the defaults' plan only sized the parameters: the same weights).
  if (!same_plan(params_, MegakernelParams{})) plan = load_plan(graph, num_workers_, cap, params_);
  const MemoryPlan mem = plan_memory(graph, plan.tasks, dtype_, cap);
  stats.plan_ms = ms_since(t);
  report(options, "plan", 1, 1);
  t = Clock::now();
  report(options, "prove", 0, 0);
  // The plan's layout proofs, before anything is compiled or run.
  HostFallback host;
  const std::vector<PlanProof> plan_proved = prove_load_plan(graph, plan, mem, params_, num_logits_, &host);
  const std::string proofs = verification_record(plan_proved);
  for (const PlanProof& p : plan_proved) stats.proof_obligations += p.record.obligations.size();
  stats.proved = 1;
  stats.host_fallback_ops = host.ops;
  stats.host_fallback_bytes = host.bytes;
  if (host.ops > 0)
    log(LogLevel::Info, "host fallback: {} ops of a step run on the host between launches ({} bytes copied)",
        host.ops, host.bytes);
  // The prefill kernels' formulas, for every K split its launches can choose on this device.
  prefill_why_ = prefill_unsupported(graph, dtype_);
  const int large_smem = gemm_tile(true, props.arch()).smem_bytes();
  if (prefill_why_.empty() && props.max_shared_per_block_optin < large_smem)
    prefill_why_ = "the device allows " + std::to_string(props.max_shared_per_block_optin) +
                   " bytes of shared memory per block, the prefill's large GEMM tile needs " +
                   std::to_string(large_smem);
  std::string prefill_proof_record;
  if (prefill_why_.empty()) {
    const std::vector<PlanProof> pf = prefill_proofs(graph, num_workers_);
    prefill_proof_record = verification_record(pf);
    for (const PlanProof& p : pf) stats.proof_obligations += p.record.obligations.size();
    ++stats.proved;
  }
  stats.prove_ms = ms_since(t);
  report(options, "prove", 1, 1);
  t = Clock::now();
  report(options, "kernel", 0, 0);
  stats.num_tasks = plan.tasks.tasks.size();
  stats.num_workers = uint64_t(num_workers_);

  // The kernel, through the cache.
  const std::string arch = props.arch();
  arch_ = arch;
  plan_proved_ = plan_proved;
  double compile_ms = 0;
  bool built = false;
  const cache::Entry entry = megakernel_through_cache(options, graph, dtype_, num_workers_, arch, params_,
                                                      MPK_MK_SAMPLE_GREEDY, proofs, built, compile_ms);
  if (built) ++stats.cache_misses; else ++stats.cache_hits;
  module_ = std::make_unique<cuda::Module>(*ctx_, entry.cubin);
  ++stats.num_kernels;
  fn_ = std::make_unique<cuda::Function>(module_->function(megakernel_entry(dtype_)));
  if (prefill_why_.empty()) {
    bool pf_built = false;
    const cache::Entry pf = through_cache(options, prefill_key(arch), [&] {
      cuda::CompileResult r = compile_prefill(arch);
      compile_ms += r.compile_ms;
      pf_built = true;
      cache::Entry e;
      e.cubin = std::move(r.cubin);
      e.params_json = "{}";
      e.verification_json = prefill_proof_record;
      return e;
    });
    if (pf_built) ++stats.cache_misses; else ++stats.cache_hits;
    prefill_ = std::make_unique<PrefillKernels>(*ctx_, pf.cubin, arch, options.prefill_overlap, options.prefill_streamk);
    ++stats.num_kernels;
  } else {
    log(LogLevel::Info, "prompts prefill through the decode step: {}", prefill_why_);
  }
  // The opt-in limit covers static and dynamic shared memory together.
  max_dynamic_smem_ = std::max(0, props.max_shared_per_block_optin - fn_->static_shared_bytes());
  if (max_dynamic_smem_ > 48 * 1024) fn_->set_max_dynamic_shared(max_dynamic_smem_);
  stats.compile_ms += compile_ms;
  stats.kernel_ms = ms_since(t);
  report(options, "kernel", 1, 1);
  t = Clock::now();
  const uint64_t upload_total = uint64_t(mem.weight_bytes);
  uint64_t uploaded = 0;
  report(options, "upload", 0, upload_total);

  // Weights once per model: matrices in their dtype, small vectors widened to fp32.
  weights_ = cuda::DeviceBuffer(*ctx_, size_t(std::max<int64_t>(mem.weight_bytes, 256)));
  consts_ = cuda::DeviceBuffer(*ctx_, size_t(std::max<int64_t>(mem.const_bytes, 256)));
  for (size_t i = 0; i < graph.weights.size(); ++i) {
    if (mem.weight_offset[i] < 0 && mem.const_offset[i] < 0) continue;
    const model::Tensor& t = model.weights.at(graph.weights[i].name);
    if (mem.weight_offset[i] >= 0) {
      MPK_CHECK(t.dtype == dtype_, Unsupported)
          << "megakernel: weight '" << t.name << "' is " << dtype_name(t.dtype)
          << " while the model's weights are " << dtype_name(dtype_);
      weights_.upload(t.data, t.nbytes, size_t(mem.weight_offset[i]));
      uploaded += uint64_t(t.nbytes);
      report(options, "upload", std::min(uploaded, upload_total), upload_total);
    }
    if (mem.const_offset[i] >= 0) {
      const std::vector<float> f = ref::WeightView::of(t).load_all();
      consts_.upload(f.data(), f.size() * 4, size_t(mem.const_offset[i]));
    }
  }
  const int emb = find_op(graph, ir::OpKind::Embedding);
  MPK_CHECK(emb >= 0, Unsupported) << "megakernel: graph without an embedding op";
  const size_t ew = size_t(graph.ops[size_t(emb)].weight);
  MPK_CHECK(mem.weight_offset[ew] >= 0, Unsupported)
      << "megakernel: the embedding table is not in the device weights";
  embed_offset_ = mem.weight_offset[ew];
  embed_cols_ = model.weights.at(graph.weights[ew].name).shape.at(1);
  if (!mem.rope_tables.empty())
    consts_.upload(mem.rope_tables.data(), mem.rope_tables.size() * 4, size_t(mem.rope_base));
  stats.device_bytes += weights_.size() + consts_.size();
  stats.upload_ms = ms_since(t);
  report(options, "upload", std::max<uint64_t>(upload_total, 1), std::max<uint64_t>(upload_total, 1));
  log(LogLevel::Info, "megakernel v0 on {} ({}): {} tasks on {} workers, {} weights, cache {}",
      props.name, arch, plan.tasks.tasks.size(), num_workers_, dtype_name(dtype_),
      built ? "miss" : "hit");
}

GpuModel::~GpuModel() = default;

const cuda::Function& GpuModel::draw_function(int mode, int dynamic_smem) const {
  MPK_ICHECK(mode == MPK_MK_SAMPLE_GUMBEL || mode == MPK_MK_SAMPLE_TOPK) << "draw mode " << mode;
  std::call_once(draws_[mode].once, [&] {
    // The plan's proofs and, for the top-k draw, its sort's: a failed one throws here.
    std::vector<PlanProof> proofs = plan_proved_;
    if (mode == MPK_MK_SAMPLE_TOPK)
      for (PlanProof& p : draw_proofs(params_, num_logits_)) proofs.push_back(std::move(p));
    bool built = false;
    double compile_ms = 0;
    const cache::Entry e = megakernel_through_cache(options_, graph_, dtype_, num_workers_, arch_, params_, mode,
                                                    verification_record(proofs), built, compile_ms);
    log(LogLevel::Info, "megakernel that draws (mode {}): cache {}{}", mode, built ? "miss" : "hit",
        built ? fmt::format(", compiled in {:.0f} ms", compile_ms) : "");
    auto module = std::make_unique<cuda::Module>(*ctx_, e.cubin);
    auto fn = std::make_unique<cuda::Function>(module->function(megakernel_entry(dtype_)));
    if (max_dynamic_smem_ > 48 * 1024) fn->set_max_dynamic_shared(max_dynamic_smem_);
    draws_[mode].module = std::move(module);
    draws_[mode].fn = std::move(fn);
  });
  // Per call: sessions' plans may ask for different shared memory (a query of microseconds,
  // once per launch of up to steps_per_launch steps).
  const cuda::Function& fn = *draws_[mode].fn;
  MPK_CHECK(fn.max_active_blocks_per_sm(block_threads(), size_t(dynamic_smem)) >= 1, Unsupported)
      << "megakernel: the kernel that draws sampled tokens does not fit on an SM with " << dynamic_smem
      << " bytes of shared memory";
  return fn;
}

std::vector<float> GpuModel::embedding_row(int32_t token) const {
  const size_t row_bytes = size_t(embed_cols_) * dtype_size(dtype_);
  std::vector<std::byte> raw(row_bytes);
  weights_.download(raw.data(), row_bytes, size_t(embed_offset_) + size_t(token) * row_bytes);
  model::Tensor row;
  row.dtype = dtype_;
  row.shape = {1, embed_cols_};
  row.data = raw.data();
  row.nbytes = row_bytes;
  return ref::WeightView::of(row).load_all();
}

namespace {

constexpr size_t kStatusBytes = MPK_MK_STATUS_WORDS * 4;

}  // namespace

GpuSession::GpuSession(std::shared_ptr<const GpuModel> model, const SessionOptions& options,
                       Stats& stats)
    : m_(std::move(model)), stats_(stats),
      steps_per_launch_(std::min(options.steps_per_launch, kMaxStepsPerLaunch)),
      profile_on_(options.profile), tensor_core_prefill_(options.tensor_core_prefill),
      capacity_(options.kv_capacity),
      stream_(m_->context()) {
  MPK_CHECK(steps_per_launch_ >= 1, InvalidArgument) << "steps_per_launch must be >= 1";
  const ir::Graph& g = m_->graph();
  const cuda::Context& ctx = m_->context();
  plan_ = sched::plan(g, megakernel_plan_options(g, m_->num_workers(), int64_t(capacity_), m_->params()));
  const bool share = options.share_activations || m_->options().share_activations;
  mem_ = plan_memory(g, plan_.tasks, m_->weight_dtype(), int64_t(capacity_), share);
  act_ = cuda::DeviceBuffer(ctx, size_t(mem_.act_bytes));
  kv_ = cuda::DeviceBuffer(ctx, size_t(std::max<int64_t>(mem_.kv_bytes, 256)));
  control_ = cuda::DeviceBuffer(ctx, kStatusBytes + 8 * size_t(m_->num_workers()) +
                                         sizeof(MkStepRecord) * kMaxStepsPerLaunch);
  forced_ = cuda::DeviceBuffer(ctx, 4 * (kMaxStepsPerLaunch + 1));
  SegmentBases b;
  b.act = act_.ptr();
  b.weights = m_->weights_ptr();
  b.consts = m_->consts_ptr();
  b.kv = kv_.ptr();
  tables_ = build_tables(g, plan_, mem_, b, m_->params());
  if (!tables_.host_tasks.empty()) {  // the host fallback's copies, after the status words
    host_segments_ = host_segments(g, plan_.tasks, mem_, tables_, kStatusBytes);
    size_t bytes = 0;
    for (const HostSegment& hs : host_segments_) bytes = std::max(bytes, hs.end);
    host_io_ = cuda::HostBuffer(ctx, bytes);
  }
  // Event counters, then the attention arrival counters (reset together).
  counters_ = cuda::DeviceBuffer(
      ctx, std::max<size_t>(plan_.tasks.events.size() + size_t(tables_.num_arrivals), 1) * 4);
  MPK_CHECK(tables_.argmax_event >= 0, Unsupported)
      << "megakernel: the final argmax task triggers no event (needed between steps)";
  if (profile_on_) {
    profile_ = cuda::DeviceBuffer(ctx, std::max<size_t>(tables_.queue.size(), 1) * 8 * MPK_MK_PROFILE_TIMERS);
    profile_.fill_bytes(0);  // the points a task does not have stay 0
  }
  const int optin = m_->max_dynamic_smem();
  MPK_CHECK(tables_.dynamic_smem <= optin, Unsupported)
      << "megakernel: tasks need " << tables_.dynamic_smem << " bytes of shared memory, the device has "
      << optin;
  // The weight ring (kernels/stage.cuh): what its tasks need, within the shared memory they
  // leave (tasks too large for it stream).
  if (m_->params().stage_weights) {
    tables_.stage_bytes = std::min((optin - tables_.dynamic_smem) / 128 * 128,
                                   stage_ring_need(tables_, m_->weight_dtype()));
    tables_.dynamic_smem += tables_.stage_bytes;
  }
  const int fit = m_->function().max_active_blocks_per_sm(m_->block_threads(), size_t(tables_.dynamic_smem));
  MPK_CHECK(fit >= 1, Cuda) << "megakernel: a " << m_->block_threads() << "-thread worker with "
                            << tables_.dynamic_smem << " bytes of shared memory does not fit on an SM";
  auto up = [&](cuda::DeviceBuffer& d, const void* p, size_t bytes) {
    d = cuda::DeviceBuffer(ctx, std::max<size_t>(bytes, 16));
    if (bytes) d.upload(p, bytes);
  };
  const std::vector<MkTask> tasks = tables_.device_tasks();
  (void)prove_plan(tasks, m_->params());  // this session's counts (memoised)
  up(d_tasks_, tasks.data(), tasks.size() * sizeof(MkTask));
  up(d_queue_begin_, tables_.queue_begin.data(), tables_.queue_begin.size() * 4);
  up(d_waits_, tables_.waits.data(), tables_.waits.size() * 4);
  up(d_needs_, tables_.needs.data(), tables_.needs.size() * 4);
  // Poison activations (NaN) so that anything read before it is written shows up.
  act_.fill_bytes(0xff);
  kv_.fill_bytes(0xff);
  counters_.fill_bytes(0);
  control_.fill_bytes(0);

  const int emb = find_op(g, ir::OpKind::Embedding);
  MPK_CHECK(emb >= 0, Unsupported) << "megakernel: graph without an embedding op";
  embed_buffer_ = g.ops[size_t(emb)].output;
  logits_buffer_ = g.logits;
  MPK_CHECK(plan_.tasks.buffers[size_t(embed_buffer_)].carried, Unsupported)
      << "megakernel: the next-token embedding is not fused into the argmax task";
  // Counted last: the destructor, which subtracts it, runs only for a constructed session.
  for (const cuda::DeviceBuffer* d : {&act_, &kv_, &counters_, &control_, &forced_, &profile_,
                                      &d_tasks_, &d_queue_begin_, &d_waits_, &d_needs_})
    device_bytes_ += d->size();
  stats_.device_bytes += device_bytes_;
}

GpuSession::~GpuSession() { stats_.device_bytes -= device_bytes_; }

void GpuSession::prefill(const int32_t* tokens, size_t n) {
  MPK_CHECK(!broken_, BadState) << "session is unusable after a failed megakernel step";
  MPK_CHECK(tokens && n >= 1, InvalidArgument) << "prefill needs at least one token";
  const int64_t vocab = m_->graph().config.vocab_size;
  for (size_t i = 0; i < n; ++i)
    MPK_CHECK(tokens[i] >= 0 && tokens[i] < vocab, InvalidArgument)
        << "token id " << tokens[i] << " at index " << i << " is outside [0, " << vocab << ")";
  MPK_CHECK(position_ + n <= capacity_, Capacity)
      << "KV cache holds " << capacity_ << " tokens; position " << position_ << " + " << n;
  enqueue_ms_.clear();  // none unless the chunks below run
  if (tensor_core_prefill_ && m_->prefill_kernels() && n >= kPrefillMinTokens) {
    prefill_chunks(tokens, n);
    return;
  }
  // The first token's embedding from the host; the device embeds the others (forced tokens).
  // From this upload on, a failure leaves the carried embedding changed (launch clears it).
  const std::vector<float> row = m_->embedding_row(tokens[0]);
  broken_ = true;
  act_.upload(row.data(), row.size() * 4, size_t(mem_.buffer_offset[size_t(embed_buffer_)]));
  step_ms_.clear();
  for (size_t a = 0; a < n;) {
    const size_t ns = std::min(n - a, tables_.num_segments > 1 ? size_t(1) : kMaxStepsPerLaunch);
    const size_t ran = launch(ns, tokens + a, std::min(n - a, ns + 1), {});
    MPK_ICHECK(ran == ns) << "prefill launch ran " << ran << " of " << ns << " steps";
    a += ns;
  }
  MPK_CHECK(!next_nonfinite_, Numerics)
      << "the logits at position " << position_ - 1 << " are not finite (NaN or Inf)";
}

void GpuSession::prefill_chunks(const int32_t* tokens, size_t n) {
  const cuda::Context& ctx = m_->context();
  const size_t rows = std::min(n, kPrefillChunk);
  if (!pf_ || size_t(pf_->max_rows()) < rows) {
    // Sized for this prompt (in steps of 128 rows), grown by a longer one. The old program and
    // buffers go first (a lower peak); if an allocation below fails, there is no program and
    // the next prefill builds one again (never one with freed buffers).
    const int64_t r = std::min<int64_t>((int64_t(rows) + 127) / 128 * 128, int64_t(kPrefillChunk));
    const uint64_t old_bytes = pf_scratch_.size() + pf_tokens_.size() + pf_result_.size();
    pf_.reset();
    pf_scratch_ = cuda::DeviceBuffer();
    pf_tokens_ = cuda::DeviceBuffer();
    pf_result_ = cuda::DeviceBuffer();
    stats_.device_bytes -= old_bytes;
    device_bytes_ -= old_bytes;
    // The fusion's tables and longer slot lives only where the kernels have its entries.
    const bool fuse = m_->options().prefill_fused_rope && m_->prefill_kernels()->rope();
    auto prog = std::make_unique<PrefillProgram>(m_->graph(), mem_, r, m_->num_workers(), fuse);
    cuda::DeviceBuffer scratch(ctx, size_t(prog->scratch_bytes())), toks(ctx, size_t(r) * 4), result(ctx, 256);
    scratch.fill_bytes(0xff);  // NaN: a read before a write shows up
    const std::vector<uint32_t> zeros(size_t(prog->counter_count()), 0u);  // the kernels leave them at zero
    if (!zeros.empty()) scratch.upload(zeros.data(), zeros.size() * 4, size_t(prog->counters_offset()));
    if (!prog->rope_tables().empty())  // read-only for the program's life
      scratch.upload(prog->rope_tables().data(), prog->rope_tables().size() * 4, size_t(prog->rope_tables_offset()));
    const uint64_t bytes = scratch.size() + toks.size() + result.size();
    pf_scratch_ = std::move(scratch);
    pf_tokens_ = std::move(toks);
    pf_result_ = std::move(result);
    stats_.device_bytes += bytes;
    device_bytes_ += bytes;
    pf_ = std::move(prog);
  }
  if (!pf_kv16_.size()) {
    pf_kv16_ = cuda::DeviceBuffer(ctx, size_t(std::max<int64_t>(mem_.kv_bytes / 2, 256)));
    stats_.device_bytes += pf_kv16_.size();
    device_bytes_ += pf_kv16_.size();
    kv16_valid_ = 0;
  }
  PrefillBases b;
  b.scratch = pf_scratch_.ptr();
  b.tokens = pf_tokens_.ptr();
  b.weights = m_->weights_ptr();
  b.consts = m_->consts_ptr();
  b.kv = kv_.ptr();
  b.kv16 = pf_kv16_.ptr();
  b.logits = act_.ptr() + uint64_t(mem_.buffer_offset[size_t(logits_buffer_)]);
  b.embed_out = act_.ptr() + uint64_t(mem_.buffer_offset[size_t(embed_buffer_)]);
  b.result = pf_result_.ptr();
  step_ms_.clear();
  pf_profile_.clear();
  cuda::Event start(ctx), end(ctx);
  // Profile sessions: an event after each step (timing perturbs nothing but the host's pace).
  std::vector<cuda::Event> marks;
  std::vector<std::string> labels;
  auto mark = [&](const PrefillStep& st) {
    marks.emplace_back(ctx);
    marks.back().record(stream_);
    labels.push_back(pf_->step_label(st));
  };
  // Until the last chunk completes, the KV cache and the carried embedding are ahead of the
  // host's position: a failure leaves the session unusable until reset().
  broken_ = true;
  // Positions decode steps wrote since the shadow was last brought up to date.
  pf_->enqueue_shadow(*m_->prefill_kernels(), stream_, b, int(std::min(kv16_valid_, position_)), int(position_));
  const size_t chunk = size_t(pf_->max_rows());
  for (size_t a = 0; a < n; a += chunk) {
    const size_t r = std::min(n - a, chunk);
    pf_tokens_.upload_async(tokens + a, r * 4, stream_);
    start.record(stream_);
    marks.clear();
    labels.clear();
    const auto host0 = std::chrono::steady_clock::now();
    pf_->enqueue(*m_->prefill_kernels(), stream_, b, int(position_ + a), int(r), a + r == n,
                 profile_on_ ? std::function<void(const PrefillStep&)>(mark) : nullptr);
    end.record(stream_);
    enqueue_ms_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host0).count());
    end.synchronize();
    step_ms_.push_back(double(cuda::elapsed_ms(start, end)));
    if (a + r < n) report(m_->options(), "prefill", a + r, n);  // Session reports the start and end
    for (size_t i = 0; i < marks.size(); ++i) {
      const double ms = cuda::elapsed_ms(i ? marks[i - 1] : start, marks[i]);
      auto it = std::find_if(pf_profile_.begin(), pf_profile_.end(), [&](auto& p) { return p.first == labels[i]; });
      if (it == pf_profile_.end()) pf_profile_.emplace_back(labels[i], ms);
      else it->second += ms;
    }
  }
  int32_t result[2];
  pf_result_.download(result, sizeof result);
  position_ += n;
  kv16_valid_ = position_;
  stats_.tokens += n;
  next_token_ = result[0];
  next_chosen_by_ = {};
  next_nonfinite_ = result[1] != 0;
  has_logits_ = true;
  logits_valid_ = false;
  broken_ = false;
  profiled_ = false;  // the chunks ran no megakernel step
  MPK_CHECK(!next_nonfinite_, Numerics)
      << "the logits at position " << position_ - 1 << " are not finite (NaN or Inf)";
}

int GpuSession::sample_mode(const ref::SamplingConfig& c) const {
  if (ref::is_greedy(c)) return MPK_MK_SAMPLE_GREEDY;
  const int64_t vocab = plan_.tasks.buffers[size_t(logits_buffer_)].numel;
  const bool all = c.top_k == 0 || c.top_k >= vocab;
  // Every id with no cut: the LM-head tiles' Gumbel keys; else the argmax task's selects.
  return all && c.top_p == 1 ? MPK_MK_SAMPLE_GUMBEL : MPK_MK_SAMPLE_TOPK;
}

namespace {
bool same_choice(const ref::SamplingConfig& a, const ref::SamplingConfig& b) {
  if (ref::is_greedy(a) || ref::is_greedy(b)) return ref::is_greedy(a) == ref::is_greedy(b);
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.seed == b.seed;
}
}  // namespace

void GpuSession::decode(size_t max_tokens, const std::vector<int32_t>& eos,
                        std::vector<int32_t>& out, const ref::SamplingConfig& sampling) {
  MPK_CHECK(!broken_, BadState) << "session is unusable after a failed megakernel step";
  MPK_CHECK(has_logits_, BadState) << "decode before prefill: no logits yet";
  // The reference's limit (a nucleus's integer sums exact), which the selects share.
  ref::validate(sampling, size_t(m_->graph().config.vocab_size));
  if (max_tokens > 0 && !same_choice(sampling, next_chosen_by_)) {
    // The last step chose its token another way (a prefill takes the argmax): the host draws
    // it again from the same logits and writes its embedding where the next step reads it.
    MPK_CHECK(!next_nonfinite_, Numerics)
        << "the logits at position " << position_ - 1 << " are not finite (NaN or Inf)";
    // The session changes only once the embedding is in place: a failure before leaves the
    // argmax as the token held and fed.
    const int32_t drawn = ref::sample_token(logits(), sampling, position_);
    const std::vector<float> row = m_->embedding_row(drawn);
    broken_ = true;  // until the embedding of the token now held is where the next step reads it
    act_.upload(row.data(), row.size() * 4, size_t(mem_.buffer_offset[size_t(embed_buffer_)]));
    broken_ = false;
    next_token_ = drawn;
    next_chosen_by_ = sampling;
  }
  auto is_eos = [&](int32_t t) { return rt::is_eos(eos, t); };
  // The device checks at most MPK_MK_MAX_EOS ids; with more, the host checks every step.
  // A step of several segments is several launches with the host between them (host_ops.h).
  const size_t per_launch = eos.size() > MPK_MK_MAX_EOS || tables_.num_segments > 1 ? 1 : steps_per_launch_;
  step_ms_.clear();
  size_t done = 0;
  while (done < max_tokens) {
    MPK_CHECK(position_ < capacity_, Capacity)
        << "KV cache full (" << capacity_ << " tokens, all used) after " << out.size()
        << " token(s) of this call";
    // The token to feed comes from the last step's logits; none is chosen from NaN or Inf.
    MPK_CHECK(!next_nonfinite_, Numerics)
        << "the logits at position " << position_ - 1 << " are not finite (NaN or Inf) after "
        << out.size() << " decoded tokens";
    const int32_t first = next_token_;
    size_t ns = std::min({max_tokens - done, capacity_ - position_, per_launch});
    if (is_eos(first)) ns = 1;
    const size_t ran = launch(ns, nullptr, 0, eos, sampling);
    // Fed: first, then the argmax of every step but the last (which is the next token), up to
    // a step whose logits were not finite (the device stops one step after it).
    out.push_back(first);
    for (size_t i = 0; i + 1 < ran; ++i) {
      MPK_ICHECK(!is_eos(out.back())) << "the megakernel fed a token after an EOS";
      MPK_CHECK(!step_nonfinite_[i], Numerics)
          << "the logits at position " << position_ - ran + i << " are not finite (NaN or Inf) "
          << "after " << out.size() << " decoded tokens";
      out.push_back(step_tokens_[i]);
    }
    MPK_ICHECK(ran == ns || is_eos(out.back()))
        << "the megakernel stopped after " << ran << " of " << ns << " steps without an EOS";
    done += ran;
    if (is_eos(out.back())) break;
  }
}

size_t GpuSession::launch(size_t num_steps, const int32_t* forced, size_t num_forced,
                          const std::vector<int32_t>& eos, const ref::SamplingConfig& sampling) {
  MPK_ICHECK(num_steps >= 1 && num_steps <= kMaxStepsPerLaunch && position_ + num_steps <= capacity_)
      << "launch of " << num_steps << " steps at position " << position_;
  MkParams p{};
  p.tasks = d_tasks_.ptr();
  p.queue_begin = d_queue_begin_.ptr();
  p.waits = d_waits_.ptr();
  p.needs = d_needs_.ptr();
  p.counters = counters_.ptr();
  p.arrivals = counters_.ptr() + 4 * plan_.tasks.events.size();
  p.control = control_.ptr();
  p.profile = profile_on_ ? profile_.ptr() : 0;
  p.step = step_ + 1;
  p.position = int(position_);
  p.num_steps = int(num_steps);
  p.num_workers = tables_.num_workers;
  p.timeout_ns = kWaitTimeoutNs;
  p.prefetch_bytes = m_->options().prefetch_bytes;
  p.stage_bytes = tables_.stage_bytes;
  if (num_forced > 0) {
    p.forced = forced_.ptr();
    p.num_forced = int(num_forced);
  }
  p.argmax_event = tables_.argmax_event;
  if (eos.size() <= MPK_MK_MAX_EOS) {
    p.num_eos = int(eos.size());
    std::copy(eos.begin(), eos.end(), p.eos);
  }
  p.sample_mode = sample_mode(sampling);
  p.temperature = sampling.temperature;
  p.top_k = sampling.top_k;
  p.top_p = sampling.top_p;
  p.seed = sampling.seed;
  const cuda::Function& fn =
      p.sample_mode == MPK_MK_SAMPLE_GREEDY ? m_->function() : m_->draw_function(p.sample_mode, tables_.dynamic_smem);
  cuda::LaunchConfig cfg;
  cfg.grid.x = unsigned(tables_.num_workers);
  cfg.block.x = unsigned(m_->block_threads());
  cfg.dynamic_shared = unsigned(tables_.dynamic_smem);
  cfg.cooperative = true;
  void* params[] = {&p};
  // Until this launch completes, any failure (the forced tokens' copy, launch, copy back,
  // timeout) leaves the device state (counters, KV cache, carried embedding) ahead of the
  // host's: the session is unusable until reset().
  broken_ = true;
  if (num_forced > 0) forced_.upload(forced, num_forced * 4);
  const size_t workers = size_t(tables_.num_workers);
  const size_t head = kStatusBytes + 8 * workers;
  control_host_.resize(head + sizeof(MkStepRecord) * num_steps);
  uint32_t status[MPK_MK_STATUS_WORDS];
  const auto t0 = std::chrono::steady_clock::now();
  // One launch per segment (one step: decode and prefill ask for no more), each followed by
  // the host tasks that wait on it.
  MPK_ICHECK(tables_.num_segments == 1 || num_steps == 1) << "a step of segments in a multi-step launch";
  for (int s = 0; s < tables_.num_segments; ++s) {
    p.queue_begin = d_queue_begin_.ptr() + uint64_t(s) * 4 * uint64_t(workers + 1);
    cuda::launch(fn, cfg, stream_, params);
    ++stats_.launches;
    if (!host_segments_.empty() && !host_segments_[size_t(s)].ops.empty()) run_host_segment(s);
  }
  stream_.synchronize();
  control_.download(control_host_.data(), control_host_.size());
  std::memcpy(status, control_host_.data(), sizeof status);
  if (status[0] != 0) throw_timeout(status);
  const size_t ran = status[4];
  MPK_ICHECK(ran >= 1 && ran <= num_steps) << "megakernel reports " << ran << " steps of " << num_steps;
  // Read in place (memcpy: the bytes carry no alignment promise). Step times are appended: a
  // prefill or decode call's steps over all its launches (also when one fails).
  uint64_t prev = UINT64_MAX;
  for (size_t w = 0; w < workers; ++w) {
    uint64_t s;
    std::memcpy(&s, control_host_.data() + kStatusBytes + 8 * w, 8);
    prev = std::min(prev, s);
  }
  step_tokens_.clear();
  step_nonfinite_.clear();
  MkStepRecord r{};
  for (size_t i = 0; i < ran; ++i) {
    std::memcpy(&r, control_host_.data() + head + sizeof(MkStepRecord) * i, sizeof r);
    // A step of segments: the host's clock over its launches and host tasks (every launch
    // stamps its workers' start anew).
    step_ms_.push_back(tables_.num_segments > 1
                           ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()
                           : double(r.end_ns - prev) / 1e6);
    step_tokens_.push_back(r.token);
    step_nonfinite_.push_back((r.flags & MPK_MK_STEP_NONFINITE) != 0);
    prev = r.end_ns;
  }
  step_ += uint32_t(ran);
  position_ += ran;
  stats_.tokens += ran;
  next_token_ = r.token;
  next_chosen_by_ = sampling;
  next_nonfinite_ = (r.flags & MPK_MK_STEP_NONFINITE) != 0;
  has_logits_ = true;
  logits_valid_ = false;
  broken_ = false;
  profiled_ = profile_on_;
  return ran;
}

void GpuSession::run_host_segment(int s) {
  const HostSegment& hs = host_segments_[size_t(s)];
  std::byte* io = host_io_.data();
  control_.download_async(io, kStatusBytes, stream_);
  for (const HostSegment::Copy& c : hs.down) act_.download_async(io + c.at, c.bytes, stream_, c.offset);
  for (size_t i = 0; i < hs.counters.size(); ++i)
    counters_.download_async(io + hs.counters_at + 4 * i, 4, stream_, size_t(hs.counters[i].first) * 4);
  stream_.synchronize();
  uint32_t status[MPK_MK_STATUS_WORDS];
  std::memcpy(status, io, sizeof status);
  if (status[0] != 0) throw_timeout(status);
  const auto t0 = std::chrono::steady_clock::now();
  const ir::Graph& g = m_->graph();
  auto values = [&](int tensor) {
    const size_t* a = hs.find(tensor);
    MPK_ICHECK(a) << "host fallback: " << g.tensor(tensor).name << " has no place";
    return reinterpret_cast<float*>(io + *a);
  };
  std::vector<const float*> in;
  for (int o : hs.ops) {
    const ir::Op& op = g.ops[size_t(o)];
    in.clear();
    for (int x : op.inputs) in.push_back(values(x));
    run_host_op(op, in, plan_.tasks.buffers[size_t(op.output)].numel, values(op.output));
  }
  // The release the device's waiters see: each event's counter as many triggers further as
  // the host ran (no launch runs between the read and this write).
  for (size_t i = 0; i < hs.counters.size(); ++i) {
    uint32_t c;
    std::memcpy(&c, io + hs.counters_at + 4 * i, 4);
    c += hs.counters[i].second;
    std::memcpy(io + hs.counters_at + 4 * i, &c, 4);
  }
  for (const HostSegment::Copy& c : hs.up) act_.upload_async(io + c.at, c.bytes, stream_, c.offset);
  for (size_t i = 0; i < hs.counters.size(); ++i)
    counters_.upload_async(io + hs.counters_at + 4 * i, 4, stream_, size_t(hs.counters[i].first) * 4);
  stats_.host_fallback_ns +=
      uint64_t(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
}

void GpuSession::throw_timeout(const uint32_t* status) const {
  const auto& tasks = plan_.tasks.tasks;
  const std::string task = status[2] == 0xffffffffu ? "the EOS check between steps"
                           : status[2] < tasks.size() ? "task " + tasks[status[2]].name
                                                      : "task ?";
  const std::string event = status[3] < plan_.tasks.events.size() ? plan_.tasks.events[status[3]].name : "?";
  // status[4]: the steps of this launch that completed.
  MPK_THROW(Timeout) << "megakernel step " << step_ + status[4] + 1 << ": worker " << status[1]
                     << " waited more than " << kWaitTimeoutNs / 1000000 << " ms for event " << event
                     << " in " << task << "; the session needs mpk_session_reset";
}

std::string GpuSession::profile_json() const {
  MPK_CHECK(profile_on_, BadState) << "the session was created without profiling";
  MPK_CHECK(profiled_ && !broken_, BadState)
      << "no completed megakernel step to report (a prefill on the tensor cores runs none)";
  std::vector<uint64_t> t(tables_.queue.size() * MPK_MK_PROFILE_TIMERS);
  if (!t.empty()) profile_.download(t.data(), t.size() * 8);
  return profile_report(plan_, tables_, t, int64_t(position_));
}

const std::vector<float>& GpuSession::logits() const {
  MPK_CHECK(!broken_, BadState) << "no logits: the last megakernel step failed (reset the session)";
  MPK_CHECK(has_logits_, BadState) << "no logits before prefill";
  if (!logits_valid_) {
    logits_.resize(size_t(plan_.tasks.buffers[size_t(logits_buffer_)].numel));
    act_.download(logits_.data(), logits_.size() * 4, size_t(mem_.buffer_offset[size_t(logits_buffer_)]));
    logits_valid_ = true;
  }
  return logits_;
}

void GpuSession::reset_event_counter_for_test(int e) {
  MPK_CHECK(e >= 0 && size_t(e) < plan_.tasks.events.size(), InvalidArgument) << "no event " << e;
  const uint32_t zero = 0;
  counters_.upload(&zero, 4, size_t(e) * 4);
}

void GpuSession::limit_stage_bytes_for_test(int64_t bytes) {
  MPK_CHECK(bytes >= 0, InvalidArgument) << "a ring of " << bytes << " bytes";
  tables_.stage_bytes = std::min(tables_.stage_bytes, bytes / 128 * 128);
}

void GpuSession::reset() {
  if (broken_) {
    // A failed step left counters at an unknown value: start the event epochs again.
    stream_.synchronize();
    counters_.fill_bytes(0);
    control_.fill_bytes(0);
    step_ = 0;
    broken_ = false;
  }
  position_ = 0;
  kv16_valid_ = 0;
  has_logits_ = false;
  profiled_ = false;
  logits_valid_ = false;
  next_token_ = -1;
  next_chosen_by_ = {};
  next_nonfinite_ = false;
  step_ms_.clear();
}

}  // namespace mpk::rt
