#include "runtime/gpu_backend.h"

#include <chrono>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "cache/cache.h"
#include "cache/sha256.h"
#include "ref/kernels.h"
#include "runtime/runtime.h"

namespace mpk::rt {
namespace {

constexpr long long kWaitTimeoutNs = 5'000'000'000LL;  // a wait this long is a deadlock

cache::CacheKey megakernel_key(const ir::Graph& g, DType dtype, int workers, const std::string& arch) {
  const auto& c = g.config;
  auto [maj, min] = cuda::nvrtc_version();
  cache::CacheKey k;
  k.task.op_kind = "megakernel";
  k.task.fused_ops = {c.architecture};
  k.task.shapes = {{c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers,
                    c.num_heads, c.num_kv_heads, c.head_dim}};
  k.task.dtypes = {dtype_name(dtype)};
  k.task.layout = "workers=" + std::to_string(workers);
  k.arch = arch;
  k.nvrtc_version = std::to_string(maj) + "." + std::to_string(min);
  k.driver_version = std::to_string(cuda::driver_version());
  k.codegen_version = kMegakernelCodegenVersion;
  k.compile_options = megakernel_compile_options();
  k.source_hash = cache::sha256_hex(megakernel_source());
  return k;
}

int find_op(const ir::Graph& g, ir::OpKind kind) {
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == kind) return int(i);
  return -1;
}

}  // namespace

GpuModel::GpuModel(const RuntimeOptions& options, const model::Model& model, const ir::Graph& graph,
                   Stats& stats)
    : model_(model), graph_(graph) {
  const int count = cuda::device_count();
  MPK_CHECK(options.device >= 0 && options.device < count, NoDevice)
      << "device " << options.device << " does not exist (" << count << " CUDA devices)";
  ctx_ = std::make_unique<cuda::Context>(options.device);
  const cuda::DeviceProps& props = ctx_->props();
  MPK_CHECK(props.cooperative_launch, Unsupported)
      << "device " << props.name << " does not support cooperative launches";
  num_workers_ = props.sm_count;
  dtype_ = model.dtype;

  // Plan once at load so that an unsupported fused op fails here, not at the first step.
  const sched::Plan plan = sched::plan(graph, megakernel_plan_options(num_workers_, 16));
  const MemoryPlan mem = plan_memory(graph, plan.tasks, dtype_, 16);
  (void)build_tables(graph, plan, mem, SegmentBases{});
  stats.num_tasks = plan.tasks.tasks.size();
  stats.num_workers = uint64_t(num_workers_);

  // The kernel, through the cache.
  const std::string arch = props.arch();
  const cache::CacheKey key = megakernel_key(graph, dtype_, num_workers_, arch);
  double compile_ms = 0;
  bool built = false;
  auto build = [&] {
    cuda::CompileResult r = compile_megakernel(arch);
    compile_ms = r.compile_ms;
    built = true;
    if (!r.log.empty()) log(LogLevel::Debug, "megakernel NVRTC log: {}", r.log);
    cache::Entry e;
    e.cubin = std::move(r.cubin);
    e.params_json = "{\"kernel\":\"megakernel-v0\",\"block\":512}";
    e.verification_json = "{}";
    return e;
  };
  cache::Entry entry;
  try {
    cache::CacheOptions co;
    co.path = (options.cache_dir.empty() ? default_cache_dir() : options.cache_dir) / "kernels.db";
    std::filesystem::create_directories(co.path.parent_path());
    cache::Cache kc(co);
    entry = kc.get_or_build(key, build);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cache && e.kind() != ErrorKind::Io) throw;
    log(LogLevel::Warn, "kernel cache unavailable ({}); compiling without it", e.what());
    entry = build();
  } catch (const std::filesystem::filesystem_error& e) {
    log(LogLevel::Warn, "kernel cache directory unavailable ({}); compiling without it", e.what());
    entry = build();
  }
  if (built) ++stats.cache_misses; else ++stats.cache_hits;
  stats.compile_ms += compile_ms;
  module_ = std::make_unique<cuda::Module>(*ctx_, entry.cubin);
  fn_ = std::make_unique<cuda::Function>(module_->function(megakernel_entry(dtype_)));
  // The opt-in limit covers static and dynamic shared memory together.
  max_dynamic_smem_ = std::max(0, props.max_shared_per_block_optin - fn_->static_shared_bytes());
  if (max_dynamic_smem_ > 48 * 1024) fn_->set_max_dynamic_shared(max_dynamic_smem_);

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
    }
    if (mem.const_offset[i] >= 0) {
      const std::vector<float> f = ref::WeightView::of(t).load_all();
      consts_.upload(f.data(), f.size() * 4, size_t(mem.const_offset[i]));
    }
  }
  if (!mem.rope_tables.empty())
    consts_.upload(mem.rope_tables.data(), mem.rope_tables.size() * 4, size_t(mem.rope_base));
  stats.device_bytes += weights_.size() + consts_.size();
  log(LogLevel::Info, "megakernel v0 on {} ({}): {} tasks on {} workers, {} weights, cache {}",
      props.name, arch, plan.tasks.tasks.size(), num_workers_, dtype_name(dtype_),
      built ? "miss" : "hit");
}

GpuModel::~GpuModel() = default;

GpuSession::GpuSession(std::shared_ptr<const GpuModel> model, size_t kv_capacity, Stats& stats)
    : m_(std::move(model)), stats_(stats), capacity_(kv_capacity), stream_(m_->context()) {
  const ir::Graph& g = m_->graph();
  const cuda::Context& ctx = m_->context();
  plan_ = sched::plan(g, megakernel_plan_options(m_->num_workers(), int64_t(kv_capacity)));
  mem_ = plan_memory(g, plan_.tasks, m_->weight_dtype(), int64_t(kv_capacity));
  act_ = cuda::DeviceBuffer(ctx, size_t(mem_.act_bytes));
  kv_ = cuda::DeviceBuffer(ctx, size_t(std::max<int64_t>(mem_.kv_bytes, 256)));
  scores_ = cuda::DeviceBuffer(ctx, size_t(mem_.scores_bytes));
  counters_ = cuda::DeviceBuffer(ctx, std::max<size_t>(plan_.tasks.events.size(), 1) * 4);
  status_ = cuda::DeviceBuffer(ctx, 16);
  SegmentBases b;
  b.act = act_.ptr();
  b.weights = m_->weights_ptr();
  b.consts = m_->consts_ptr();
  b.kv = kv_.ptr();
  b.scores = scores_.ptr();
  tables_ = build_tables(g, plan_, mem_, b);
  const int optin = m_->max_dynamic_smem();
  MPK_CHECK(tables_.dynamic_smem <= optin, Unsupported)
      << "megakernel: tasks need " << tables_.dynamic_smem << " bytes of shared memory, the device has "
      << optin;
  const int fit = m_->function().max_active_blocks_per_sm(m_->block_threads(), size_t(tables_.dynamic_smem));
  MPK_CHECK(fit >= 1, Cuda) << "megakernel: a " << m_->block_threads() << "-thread worker with "
                            << tables_.dynamic_smem << " bytes of shared memory does not fit on an SM";
  auto up = [&](cuda::DeviceBuffer& d, const void* p, size_t bytes) {
    d = cuda::DeviceBuffer(ctx, std::max<size_t>(bytes, 16));
    if (bytes) d.upload(p, bytes);
  };
  up(d_tasks_, tables_.tasks.data(), tables_.tasks.size() * sizeof(MkTask));
  up(d_queue_begin_, tables_.queue_begin.data(), tables_.queue_begin.size() * 4);
  up(d_queue_, tables_.queue.data(), tables_.queue.size() * 4);
  up(d_waits_, tables_.waits.data(), tables_.waits.size() * 4);
  up(d_needs_, tables_.needs.data(), tables_.needs.size() * 4);
  // Poison activations (NaN) so that anything read before it is written shows up.
  act_.fill_bytes(0xff);
  kv_.fill_bytes(0xff);
  counters_.fill_bytes(0);
  status_.fill_bytes(0);

  const int emb = find_op(g, ir::OpKind::Embedding);
  MPK_CHECK(emb >= 0, Unsupported) << "megakernel: graph without an embedding op";
  embed_buffer_ = g.ops[size_t(emb)].output;
  embed_weight_ = g.ops[size_t(emb)].weight;
  logits_buffer_ = g.logits;
  next_token_buffer_ = g.next_token;
  MPK_CHECK(plan_.tasks.buffers[size_t(embed_buffer_)].carried, Unsupported)
      << "megakernel: the next-token embedding is not fused into the argmax task";
  // Counted last: the destructor, which subtracts it, runs only for a constructed session.
  for (const cuda::DeviceBuffer* d : {&act_, &kv_, &scores_, &counters_, &status_, &d_tasks_,
                                      &d_queue_begin_, &d_queue_, &d_waits_, &d_needs_})
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
  const model::Tensor& table = m_->model().weights.at(m_->graph().weights[size_t(embed_weight_)].name);
  const ref::WeightView view = ref::WeightView::of(table);
  std::vector<float> row(size_t(view.cols));
  for (size_t i = 0; i < n; ++i) {
    view.load(int64_t(tokens[i]) * view.cols, view.cols, row.data());
    act_.upload(row.data(), row.size() * 4, size_t(mem_.buffer_offset[size_t(embed_buffer_)]));
    launch_step();
  }
}

void GpuSession::step_on_device_token() {
  MPK_CHECK(!broken_, BadState) << "session is unusable after a failed megakernel step";
  MPK_CHECK(has_logits_, BadState) << "decode before prefill: no logits yet";
  MPK_CHECK(position_ < capacity_, Capacity) << "KV cache full (" << capacity_ << " tokens)";
  launch_step();
}

void GpuSession::launch_step() {
  MkParams p{};
  p.tasks = d_tasks_.ptr();
  p.queue_begin = d_queue_begin_.ptr();
  p.queue = d_queue_.ptr();
  p.waits = d_waits_.ptr();
  p.needs = d_needs_.ptr();
  p.counters = counters_.ptr();
  p.status = status_.ptr();
  p.step = step_ + 1;
  p.position = int(position_);
  p.timeout_ns = kWaitTimeoutNs;
  cuda::LaunchConfig cfg;
  cfg.grid.x = unsigned(tables_.num_workers);
  cfg.block.x = unsigned(m_->block_threads());
  cfg.dynamic_shared = unsigned(tables_.dynamic_smem);
  cfg.cooperative = true;
  void* params[] = {&p};
  // Until this step completes, any failure (launch, copy, timeout) leaves the device state
  // (counters, KV cache, carried embedding) ahead of the host's: the session is unusable
  // until reset().
  broken_ = true;
  cuda::launch(m_->function(), cfg, stream_, params);
  ++step_;
  ++stats_.launches;
  stream_.synchronize();
  uint32_t status[4] = {};
  status_.download(status, sizeof status);
  if (status[0] != 0) {
    const auto& tasks = plan_.tasks.tasks;
    const std::string task = status[2] < tasks.size() ? tasks[status[2]].name : "?";
    const std::string event = status[3] < plan_.tasks.events.size() ? plan_.tasks.events[status[3]].name : "?";
    MPK_THROW(Timeout) << "megakernel step " << step_ << ": worker " << status[1] << " waited more than "
                       << kWaitTimeoutNs / 1000000 << " ms for event " << event << " in task " << task
                       << "; the session needs mpk_session_reset";
  }
  act_.download(&next_token_, 4, size_t(mem_.buffer_offset[size_t(next_token_buffer_)]));
  ++position_;
  ++stats_.tokens;
  has_logits_ = true;
  logits_valid_ = false;
  broken_ = false;
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

void GpuSession::reset() {
  if (broken_) {
    // A failed step left counters at an unknown value: start the event epochs again.
    stream_.synchronize();
    counters_.fill_bytes(0);
    status_.fill_bytes(0);
    step_ = 0;
    broken_ = false;
  }
  position_ = 0;
  has_logits_ = false;
  logits_valid_ = false;
  next_token_ = -1;
}

}  // namespace mpk::rt
