// The worker loop: one persistent CTA per worker runs its static queue of tasks once per decode
// step, for params.num_steps steps back to back. Per task (its descriptor already copied to
// shared memory while the previous task ran): the task's code (a linear through the generated
// mk_linear_variant: one case per linear variant) issues the start of its loads (weights and
// KV history do not wait), then calls `wait` (thread 0 spins on acquire loads until counter >=
// need * epoch; the epoch is the step, or the step before for a read of what the previous step
// carried over), and computes; then a barrier, and thread 0 publishes with a release
// (fence.acq_rel and a relaxed add) on the task's trigger event. With MK_CONTROLLER_WARP the
// polling and publishing thread is lane 0 of an extra warp that issues no loads of its own, so
// its polls do not queue behind the compute warps' (handoff_bench): it meets the compute
// warps at the task's first barrier, at the wait's and at the last. A wait longer than
// params.timeout_ns records the failure in the control block and every worker leaves the
// launch (no hang).

__device__ __forceinline__ unsigned mk_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Thread 0: spins on acquire loads until counter e reaches target (wrap-safe: counters grow by
// need per step and may pass 2^32). The abort flag and the clock are checked every 32 spins
// only (each check is another round trip). A fence after a relaxed poll instead of the acquire
// load measured slower: the fence also waits for the task's weight loads issued before it.
// False when the launch is aborted: another worker failed, or this wait passed the timeout
// (then the failure is recorded in the status words).
__device__ bool mk_wait(const MkParams& prm, int e, unsigned target, int task) {
  const unsigned* counters = (const unsigned*)prm.counters;
  volatile unsigned* status = (volatile unsigned*)prm.control;
  const unsigned long long t0 = mk_globaltimer();
  unsigned spins = 0;
  while ((int)(mk_load_acquire(counters + e) - target) < 0) {
    if ((++spins & 31) == 0) {
      if (status[0] != 0) return false;
      if ((long long)(mk_globaltimer() - t0) > prm.timeout_ns) {
        if (atomicCAS((unsigned*)prm.control, 0u, 1u) == 0u) {
          status[1] = blockIdx.x;
          status[2] = (unsigned)task;
          status[3] = (unsigned)e;
        }
        return false;
      }
    }
    __nanosleep(32);
  }
  return true;
}

// Starts copying a descriptor to shared memory (8-byte cp.async by the first threads); the
// reader waits with cp.async.wait_all and a barrier.
__device__ __forceinline__ void mk_fetch_desc(const MkTask* src, MkTask* dst) {
  for (int w = threadIdx.x; w < (int)(sizeof(MkTask) / 8); w += blockDim.x) {
    const unsigned d = (unsigned)__cvta_generic_to_shared((char*)dst + 8 * w);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"((const char*)src + 8 * w)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// The KV history an attention chunk reads at `position`: rows [j0, j1), its even share of the
// positions before it (the new row is written in this step); empty when j1 <= j0.
__device__ __forceinline__ void mk_attn_history(const MkTask& t, int position, long long& j0, long long& j1) {
  const int n = position + 1;
  j0 = mk_even_split_begin(t.chunk, n, t.num_chunks);
  j1 = mk_even_split_end(t.chunk, n, t.num_chunks);
  if (j1 > position) j1 = position;
}

#if MK_NEXT_PREFETCH
// Up to MK_PREFETCH_NEXT KiB of what the next task reads before its events (a linear task's
// weight rows, an attention chunk's K and V rows) into L2, issued when the task before it
// starts: a small model's memory system idles through most of a stage (hand-offs, input
// staging, attention), and rows in L2 when their task starts stream from there. Bulk
// prefetches of at most 64 KiB (the TMA engine's: no registers, nothing in the SM's load
// queue). An attention chunk's budget is split between its K and V rows. A hint: whatever it
// misses is loaded as before. `position`: this step's (a next task in the next step has chunk
// bounds about a row apart, which its own prefetch covers).
__device__ __forceinline__ void mk_bulk_prefetch(u64 p, long long bytes) {
  if (p & 15) return;  // bulk prefetches need 16-byte alignment
  for (long long off = 0; off + 16 <= bytes; off += 65536) {
    const unsigned n = (unsigned)min(bytes - off, 65536LL) & ~15u;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n));
  }
}

template <int DT>
__device__ void mk_prefetch_next(const MkTask& t, int position) {
  const long long left = (long long)MK_PREFETCH_NEXT * 1024;
  if (t.kind == MPK_MK_LINEAR) {
#if MK_STAGE
    if (t.flags & MPK_MK_F_STAGE) return;  // the stager copies its rows (stage.cuh)
#endif
    mk_weight_rows<DT>(t, left, mk_bulk_prefetch);
  } else if (t.kind == MPK_MK_ATTENTION) {
    long long j0, j1;
    mk_attn_history(t, position, j0, j1);
    if (j1 > j0) {
      const long long off = mk_kv_elem(t.kv_head, j0, 0, t.capacity, t.head_dim) * 4;  // ir::AttentionRows
      const long long b = min((j1 - j0) * t.head_dim * 4, left / 2);
      mk_bulk_prefetch(t.k_cache + off, b);
      mk_bulk_prefetch(t.v_cache + off, b);
    }
  }
}
#endif

// The descriptor buffer after buffer s, of MK_DESC_AHEAD + 1 = 3 used in turn.
__device__ __forceinline__ int mk_next_slot(int s) { return s == 2 ? 0 : s + 1; }

// No descriptor copy is left in flight when a worker leaves (the last task always starts one,
// for a next step that may not run).
__device__ __forceinline__ void mk_drain_copies() { asm volatile("cp.async.wait_all;" ::: "memory"); }

__device__ __forceinline__ bool mk_is_eos(const MkParams& prm, int token) {
  for (int j = 0; j < prm.num_eos && j < MPK_MK_MAX_EOS; ++j)
    if (prm.eos[j] == token) return true;
  return false;
}

template <int DT>
__device__ void mk_run(const MkParams& prm) {
  extern __shared__ __align__(16) float mk_smem[];  // 16-byte vectors and cp.async
  __shared__ float red[32];
  __shared__ int redi[32];
  __shared__ float part_sums[MPK_MK_KSPLIT_SLOTS];
  __shared__ int abort_launch, stop;
  __shared__ MkTask desc[MK_DESC_AHEAD + 1];
  const MkTask* tasks = (const MkTask*)prm.tasks;  // in queue order
  const int* qb = (const int*)prm.queue_begin;
  const int* waits = (const int*)prm.waits;
  const unsigned* needs = (const unsigned*)prm.needs;
  unsigned* counters = (unsigned*)prm.counters;
  unsigned* status = (unsigned*)prm.control;
  u64* worker_start = (u64*)(prm.control + MPK_MK_STATUS_WORDS * 4);
  MkStepRecord* rec = (MkStepRecord*)(prm.control + MPK_MK_STATUS_WORDS * 4 + 8ull * prm.num_workers);
  u64* profile = (u64*)prm.profile;
  // The thread that waits on events and publishes; the controller warp runs no task code.
  const bool poller = threadIdx.x == (MK_CONTROLLER_WARP ? MK_BLOCK_THREADS : 0);
  const bool controller = MK_CONTROLLER_WARP && threadIdx.x >= MK_BLOCK_THREADS;
  // Task code's shared memory follows the weight ring (stage.cuh), when there is one. The ring's
  // size is a multiple of 128 bytes (the host's), written so that the compiler sees it: with an
  // offset of unknown alignment the tasks' 16-byte vector accesses compile to scalar ones.
  float* scratch = mk_smem + (MK_STAGE ? prm.stage_bytes / 128 * 32 : 0);
#if MK_STAGE
  __shared__ __align__(8) unsigned long long stage_bars[2];
  __shared__ MkStageRec stage_rec[3];  // by descriptor buffer
  MkStager& stager = mk_stager;
  if (threadIdx.x == MK_STAGE_PRODUCER) {
    stager = MkStager{(unsigned)__cvta_generic_to_shared(stage_bars), (unsigned)__cvta_generic_to_shared(mk_smem),
                      prm.stage_bytes, 0u, 0, 0, false};
    mk_mbar_init(stager.bars);
    mk_mbar_init(stager.bars + 8);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // for the async proxy
  }
#endif
  if (threadIdx.x == 0) {
    abort_launch = 0;
    stop = 0;
    worker_start[blockIdx.x] = mk_globaltimer();
  }
  __syncthreads();
  // The worker leaves: no descriptor or weight copy may still be writing to its shared memory.
  auto leave = [&]() {
    mk_drain_copies();
#if MK_STAGE
    if (threadIdx.x == MK_STAGE_PRODUCER) mk_stage_drain(stager);
#endif
  };

  // Descriptors go to shared memory MK_DESC_AHEAD tasks ahead, with cp.async (no registers,
  // no stall): after an acquire the L1 holds nothing, and a descriptor read from global memory
  // would cost a round trip (to DRAM when the weight stream has evicted it) on the critical
  // path. MK_DESC_AHEAD + 1 buffers used in turn (across steps too: a queue may have any
  // length); task n + MK_DESC_AHEAD's copy starts once every thread has passed task n's first
  // barrier, when the poller has published task n - 1 (the last reader of that buffer).
  const int q0 = qb[blockIdx.x], q1 = qb[blockIdx.x + 1];
  int slot = 0;  // descriptor buffer of this task (then of the next)
  if (q1 > q0) mk_fetch_desc(tasks + q0, &desc[0]);
#if MK_DESC_AHEAD == 2
  if (q1 > q0) mk_fetch_desc(tasks + (q0 + 1 < q1 ? q0 + 1 : q0), &desc[1]);
#endif
  for (int i = 0; i < prm.num_steps; ++i) {
    const unsigned step = prm.step + (unsigned)i;
    const int position = prm.position + i;
    // Step i is fed step i-1's argmax; the launch ends after a step that was fed an EOS id or
    // a token chosen from non-finite logits: before step i (i >= 2) every worker reads the
    // record of step i-2, whose argmax step i-1 was fed (step 0's fed token the host checked),
    // so all of them stop at the same step. Its event has fired already (step i-1 waited for
    // it); the acquire makes the record visible. Forced (prompt) steps never stop.
    if (i >= 2 && i - 1 >= prm.num_forced && prm.argmax_event >= 0) {
      if (poller) {
        const int e = prm.argmax_event;
        if (!mk_wait(prm, e, needs[e] * (step - 2u), -1)) {
          abort_launch = 1;
        } else {
          const volatile MkStepRecord& r = ((volatile MkStepRecord*)rec)[i - 2];
          if ((r.flags & MPK_MK_STEP_NONFINITE) || mk_is_eos(prm, r.token)) stop = 1;
        }
      }
      __syncthreads();
      if (abort_launch || stop) return leave();
    }
    for (int qi = q0; qi < q1; ++qi) {
      if (profile && poller) profile[MPK_MK_PROFILE_TIMERS * qi + MPK_MK_T_START] = mk_globaltimer();
      MkTask& t = desc[slot];
      asm volatile("cp.async.wait_all;" ::: "memory");
      __syncthreads();
#if MK_STAGE
      MkStageRec& staged = stage_rec[slot];  // where this task's weights are
      if (threadIdx.x == MK_STAGE_PRODUCER)
        mk_stage_advance<DT>(stager, t, desc[mk_next_slot(slot)], qi + 1 < q1 || i + 1 < prm.num_steps,
                             staged, stage_rec[mk_next_slot(slot)]);
#endif
#if MK_NEXT_PREFETCH
      // The next task's reads (its descriptor landed with the wait above), from the last compute
      // thread: not the controller warp, whose poll would wait for this lane's branch.
      if (threadIdx.x == MK_BLOCK_THREADS - 1) mk_prefetch_next<DT>(desc[mk_next_slot(slot)], position);
#endif
      // One look at the first event before this SM issues the task's weight loads: a poll
      // issued behind them waits for the memory pipeline to drain (measured: 3-5 us from a
      // task's start to seeing an event that had already fired).
      // (Not needed by a controller warp, which issues no loads.)
      int seen = 0;  // the poller: leading waits already satisfied
      if (!MK_CONTROLLER_WARP && poller && t.num_waits + t.num_waits_prev > 0) {
        const unsigned epoch = t.num_waits > 0 ? step : step - 1u;
        if ((int)(mk_load_acquire(counters + t.wait_event[0]) - t.wait_need[0] * epoch) >= 0) seen = 1;
      }
#if MK_DESC_AHEAD == 1
      slot ^= 1;
      mk_fetch_desc(tasks + (qi + 1 < q1 ? qi + 1 : q0), &desc[slot]);
#else
      slot = mk_next_slot(slot);
      {  // the task after the next, in a queue that wraps around across steps
        const int f = qi + 2 - q1;
        mk_fetch_desc(tasks + (f < 0 ? qi + 2 : q0 + f % (q1 - q0)), &desc[mk_next_slot(slot)]);
      }
#endif
      // The task's events; false when the launch is aborted.
      auto wait = [&]() -> bool {
        if (poller) {
          for (int wi = seen; wi < t.num_waits + t.num_waits_prev && !abort_launch; ++wi) {
            const bool inl = wi < MPK_MK_INLINE_WAITS;
            const int e = inl ? t.wait_event[wi] : waits[t.wait_begin + wi];
            const unsigned need = inl ? t.wait_need[wi] : needs[e];
            const unsigned epoch = wi < t.num_waits ? step : step - 1u;
            if (!mk_wait(prm, e, need * epoch, t.id)) abort_launch = 1;
          }
          if (profile) profile[MPK_MK_PROFILE_TIMERS * qi + MPK_MK_T_READY] = mk_globaltimer();
        }
        mk_sync_wait();
        if (t.kind != MPK_MK_LINEAR) mk_stage_late<DT>();  // a linear's after its input
        return !abort_launch;
      };
      // Weights and the KV history do not wait: they start loading before the events (a
      // linear task issues its own loads, then waits).
      bool ok = true;
      if (controller) {
        ok = wait();
      } else if (t.kind == MPK_MK_LINEAR) {
        const MkDraw draw{prm.sample_mode == MPK_MK_SAMPLE_GUMBEL, prm.temperature, prm.seed, (u64)position + 1};
        MkStaged st{nullptr, nullptr, 0};
#if MK_STAGE
        // Read after the wait's barrier: the producer wrote it before.
        st = MkStaged{&staged, (const char*)mk_smem, prm.stage_bytes};
#endif
#if MK_PHASE_TIMERS
        // This task's timers (or none), read after the wait's barrier.
        if (threadIdx.x == 0) mk_task_timers = profile ? profile + MPK_MK_PROFILE_TIMERS * qi : nullptr;
#endif
        ok = mk_linear_variant<DT>(t, scratch, red, redi, part_sums, prm.prefetch_bytes, draw, st, wait);
      } else if (t.kind == MPK_MK_ATTENTION) {
        long long j0, j1;
        mk_attn_history(t, position, j0, j1);
        if (j1 > j0) {
          const long long off = mk_kv_elem(t.kv_head, j0, 0, t.capacity, t.head_dim) * 4;  // ir::AttentionRows
          mk_prefetch(t.k_cache + off, (j1 - j0) * t.head_dim * 4);
          mk_prefetch(t.v_cache + off, (j1 - j0) * t.head_dim * 4);
        }
        ok = mk_attention(t, position, scratch, (unsigned*)prm.arrivals, wait);
      } else {
        ok = wait();
        if (ok) {
          switch (t.kind) {
            case MPK_MK_ATTN_MERGE: mk_attn_merge(t, (const float*)t.partial); break;
            case MPK_MK_ARGMAX: mk_argmax<DT>(t, prm, i, rec, red, redi, scratch); break;
            default: break;
          }
        }
      }
      if (!ok) return leave();
      __syncthreads();
      if (poller) {
        if (t.kind == MPK_MK_ARGMAX) {
          rec[i].end_ns = mk_globaltimer();
          status[4] = (unsigned)(i + 1);
        }
        if (profile) profile[MPK_MK_PROFILE_TIMERS * qi + MPK_MK_T_END] = mk_globaltimer();
        // The block's writes (ordered before this thread by the barrier), then the event:
        // a release (the fence.acq_rel + relaxed add pattern), not a full sequential fence.
        if (t.trigger >= 0) {
          asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u32 [%0], 1;"
                       ::"l"(counters + t.trigger) : "memory");
        }
      }
    }
  }
  leave();
}
