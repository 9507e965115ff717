#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "cuda/driver.h"
#include "ir/builder.h"
#include "runtime/gpu_backend.h"
#include "runtime/runtime.h"
#include "runtime/tune.h"

namespace mpk::rt {
namespace {
// Whether device `ordinal` exists; false (never an exception) without a driver or a GPU.
bool device_usable(int ordinal) {
  try {
    return cuda::driver_available() && cuda::device_count() > ordinal;
  } catch (const Error&) {
    return false;
  }
}
}  // namespace

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::Gpu: return "gpu";
    case Backend::Reference: return "reference";
  }
  return "?";
}

void report(const RuntimeOptions& o, const char* phase, uint64_t done, uint64_t total) {
  if (o.progress) o.progress(phase, done, total);
}

void Stats::reset_load_counters() {
  num_tasks = num_workers = cache_hits = cache_misses = num_kernels = proved = proof_obligations = 0;
  host_fallback_ops = host_fallback_bytes = 0;
  compile_ms = plan_ms = prove_ms = kernel_ms = upload_ms = 0;
  device_bytes = 0;
  tuned = false;
  tune_candidates = tune_changed_params = tune_stages_changed = tune_stages_searched = 0;
  tune_ms = 0;
}

void LoadedModel::tune_on_miss() {
  const auto t0 = std::chrono::steady_clock::now();
  TuneOptions t;
  t.budget_s = options_.tune_budget_s;
  t.progress = [this](const std::string& line, double done, double) {
    log(LogLevel::Info, "tune: {}", line);
    report(options_, "tune", std::min<uint64_t>(uint64_t(done * 1000), 999), 1000);  // 1000: the end
  };
  report(options_, "tune", 0, 1000);
  // The search loads its own copies; the defaults' model goes first to leave it the memory.
  gpu_.reset();
  RuntimeOptions o = options_;
  std::optional<TuneResult> r;
  try {
    r = tune(options_, *model_, graph_, t);
  } catch (const std::exception& e) {
    // The defaults still run; a device that is lost fails their load below.
    log(LogLevel::Warn, "tune: the search failed ({}); using the defaults", e.what());
    o.tune_policy = TunePolicy::DefaultsOnly;
  }
  const double search_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  bool stored = false;
  report(options_, "tune", 1000, 1000);
  if (r) {
    stored = store_tuning(options_, tuning_record(*r));
    log(LogLevel::Info, "tune: {} ({:.1f} vs {:.1f} us/token for the defaults, {} candidates timed, {:.0f} s)",
        to_json(r->chosen), r->chosen_us, r->default_us, r->timed, r->elapsed_s);
    // The chosen parameters' kernel is in the cache now: loading it again is a hit. Without a
    // cache to hold the result, the parameters are passed directly.
    if (!stored) o.mk_params = to_text(r->chosen);
  }
  stats_.reset_load_counters();
  gpu_ = std::make_shared<const GpuModel>(o, *model_, graph_, stats_);
  // Tuned when the reload found the stored result (or was given the parameters directly).
  stats_.tuned = gpu_->tuned() || (r && !stored);
  stats_.tune_candidates = r ? uint64_t(r->timed) : 0;
  stats_.tune_stages_searched = r ? uint64_t(timed_stages(*r).size()) : 0;
  stats_.tune_ms = search_ms;
}

std::shared_ptr<LoadedModel> LoadedModel::load(const RuntimeOptions& rt,
                                               const std::filesystem::path& dir,
                                               Backend requested, bool validate_weights) {
  const auto t0 = std::chrono::steady_clock::now();
  auto m = std::shared_ptr<LoadedModel>(new LoadedModel());
  m->options_ = resolve_environment(rt);
  struct LoadTime {  // load_ms on every way out, failures included
    Stats& st;
    std::chrono::steady_clock::time_point t0;
    ~LoadTime() { st.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); }
  } load_time{m->stats_, t0};
  report(m->options_, "read", 0, 0);
  m->model_ = model::load(dir);
  if (validate_weights) model::check_finite(m->model_->weights);
  try {
    m->graph_ = ir::build(m->model_->config);
  } catch (const Error& e) {
    // The loader accepted the config, the graph builder did not: still a model problem.
    if (e.kind() != ErrorKind::InvalidArgument) throw;
    MPK_THROW(InvalidModel) << dir.string() << ": " << e.what();
  }

  m->stats_.read_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  report(m->options_, "read", 1, 1);
  auto use_gpu = [&] {
    try {
      m->gpu_ = std::make_shared<const GpuModel>(m->options_, *m->model_, m->graph_, m->stats_);
    } catch (const Error& e) {
      // A tuning result this build cannot plan, prove or compile any more must not cost the
      // GPU: the defaults are tried before the error counts.
      if (e.kind() == ErrorKind::NoDevice || !m->options_.mk_params.empty() ||
          m->options_.tune_policy == TunePolicy::DefaultsOnly)
        throw;
      log(LogLevel::Warn, "megakernel: {}; loading with the default parameters", e.what());
      RuntimeOptions d = m->options_;
      d.tune_policy = TunePolicy::DefaultsOnly;
      m->stats_.reset_load_counters();
      m->gpu_ = std::make_shared<const GpuModel>(d, *m->model_, m->graph_, m->stats_);
    }
    if (m->options_.tune_policy == TunePolicy::TuneOnMiss && m->options_.mk_params.empty() && !m->gpu_->tuned())
      m->tune_on_miss();
    m->backend_ = Backend::Gpu;
    m->model_->weights.release_data();  // uploaded: the files may now change without effect
  };
  switch (requested) {
    case Backend::Gpu:
      try {
        use_gpu();  // GpuModel checks the driver and the device ordinal
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::NoDevice) throw;
        MPK_THROW(NoDevice) << "backend 'gpu' requested but no CUDA device is usable: "
                            << e.what();
      }
      return m;
    case Backend::Auto:
      if (device_usable(m->options_.device)) {
        try {
          use_gpu();
          log(LogLevel::Info, "backend auto: CUDA device {} found, using the megakernel", rt.device);
          return m;
        } catch (const Error& e) {
          // A device that cannot run this model (no cooperative launch, an arch NVRTC cannot
          // target, too little shared memory...) is not usable: fall back, and say why.
          if (e.kind() != ErrorKind::NoDevice && e.kind() != ErrorKind::Unsupported &&
              e.kind() != ErrorKind::Compile && e.kind() != ErrorKind::Cuda)
            throw;
          m->gpu_.reset();  // and what its constructor counted before it failed
          m->stats_.reset_load_counters();
          log(LogLevel::Warn, "backend auto: the GPU cannot run this model ({}); running the CPU "
                              "reference (fp32)", e.what());
        }
      } else {
        log(LogLevel::Info, "backend auto: no usable CUDA device, running the CPU reference (fp32)");
      }
      [[fallthrough]];
    case Backend::Reference: {
      m->backend_ = Backend::Reference;
      // A mapped file truncated by someone else would raise SIGBUS in the middle of a step.
      const auto r0 = std::chrono::steady_clock::now();
      m->model_->weights.make_resident();
      m->stats_.read_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r0).count();
      break;
    }
  }
  m->stats_.host_fallback_ops = m->graph_.ops.size();
  m->stats_.host_fallback_bytes = 0;
  return m;
}

Session::Session(std::shared_ptr<const LoadedModel> model, const SessionOptions& options)
    : model_(std::move(model)) {
  const size_t kv_capacity = options.kv_capacity;
  const auto& cfg = model_->config();
  MPK_CHECK(kv_capacity >= 1, InvalidArgument) << "kv_capacity must be at least 1";
  MPK_CHECK(options.steps_per_launch >= 1, InvalidArgument) << "steps_per_launch must be >= 1";
  MPK_CHECK(cfg.max_position_embeddings <= 0 ||
                kv_capacity <= size_t(cfg.max_position_embeddings),
            InvalidArgument)
      << "kv_capacity " << kv_capacity << " exceeds the model's max_position_embeddings "
      << cfg.max_position_embeddings;
  if (model_->gpu()) {
    gpu_ = std::make_unique<GpuSession>(model_->gpu(), options, model_->stats());
    return;
  }
  ref::Options o;
  o.num_threads = model_->options().num_threads;
  exec_ = std::make_unique<ref::Executor>(model_->model(), model_->graph(), kv_capacity, o);
}

Session::~Session() = default;

namespace {

// Error(Numerics) when the logits hold a NaN or an infinity (after the step at `position`).
void check_finite_logits(const std::vector<float>& logits, size_t position) {
  for (size_t i = 0; i < logits.size(); ++i)
    MPK_CHECK(std::isfinite(logits[i]), Numerics)
        << "the logits at position " << position << " are not finite (" << logits[i]
        << " at index " << i << ")";
}

// Runs f; an Error(Numerics) leaving it sets `failed`.
template <typename F>
void note_numerics(bool& failed, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Numerics) failed = true;
    throw;
  }
}

}  // namespace

void Session::prefill(const int32_t* tokens, size_t n) {
  MPK_CHECK(!numerics_failed_, BadState) << kNeedsReset;
  MPK_CHECK(n >= 1, InvalidArgument) << "prefill needs at least one token";
  report(model_->options(), "prefill", 0, n);
  note_numerics(numerics_failed_, [&] {
    if (gpu_) {
      gpu_->prefill(tokens, n);  // counts tokens and launches
      return;
    }
    exec_->forward(tokens, n);
    model_->stats().tokens += n;
    check_finite_logits(exec_->logits(), exec_->position() - 1);
  });
  report(model_->options(), "prefill", n, n);
}

bool is_eos(const std::vector<int32_t>& eos_ids, int32_t token) {
  return std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
}

bool Session::is_eos(int32_t token) const { return rt::is_eos(model_->config().eos_token_ids, token); }

void Session::decode(size_t max_tokens, std::vector<int32_t>& out) {
  MPK_CHECK(!numerics_failed_, BadState) << kNeedsReset;
  note_numerics(numerics_failed_, [&] { decode_steps(max_tokens, out); });
}

void Session::set_sampling(const ref::SamplingConfig& c) {
  ref::validate(c, size_t(model_->config().vocab_size));
  sampling_ = c;
}

void Session::decode_steps(size_t max_tokens, std::vector<int32_t>& out) {
  if (gpu_) {
    // set_sampling refused every configuration the megakernel does not draw.
    gpu_->decode(max_tokens, model_->config().eos_token_ids, out, sampling_);  // counts tokens, launches
    return;
  }
  // The reference's greedy token is the graph's argmax, computed in the step that made the logits.
  MPK_CHECK(!exec_->logits().empty(), BadState) << "decode before prefill: no logits yet";
  const bool greedy = ref::is_greedy(sampling_);
  for (size_t i = 0; i < max_tokens; ++i) {
    const std::vector<float>& l = exec_->logits();
    check_finite_logits(l, exec_->position() - 1);
    const int32_t next = greedy ? exec_->next_token() : ref::sample_token(l, sampling_, exec_->position());
    MPK_CHECK(exec_->position() < exec_->capacity(), Capacity)
        << "KV cache full (" << exec_->capacity() << " tokens, all used) after " << out.size()
        << " token(s) of this call";
    exec_->forward(&next, 1);
    model_->stats().tokens += 1;
    out.push_back(next);
    if (is_eos(next)) break;
  }
}

const std::vector<double>& Session::step_ms() const {
  MPK_CHECK(gpu_, Unsupported) << "step times are measured on the GPU backend only";
  return gpu_->step_ms();
}

const std::vector<double>& Session::prefill_enqueue_ms() const {
  MPK_CHECK(gpu_, Unsupported) << "enqueue times are measured on the GPU backend only";
  return gpu_->prefill_enqueue_ms();
}

std::string Session::profile_json() const {
  MPK_CHECK(gpu_, Unsupported) << "profiles are recorded on the GPU backend only";
  return gpu_->profile_json();
}

const std::vector<float>& Session::logits() const {
  if (gpu_) return gpu_->logits();
  MPK_CHECK(!exec_->logits().empty(), BadState) << "no logits before prefill";
  return exec_->logits();
}

size_t Session::position() const { return gpu_ ? gpu_->position() : exec_->position(); }
void Session::reset() {
  numerics_failed_ = false;
  if (gpu_)
    gpu_->reset();
  else
    exec_->reset();
}

}  // namespace mpk::rt
