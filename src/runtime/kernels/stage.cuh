// Weight staging (MK_STAGE_WEIGHTS, sm_90 and later): a linear task's weight rows are copied
// into a shared-memory ring by one bulk copy per slice (the TMA engine, no registers), issued
// while the task *before* it runs (at its start, or with MK_STAGE_LATE once it has its input),
// so the bytes stream while that task waits and computes.
// A decode step of a small model is a chain of dependent stages whose tasks each read tens of
// KB; loading a task's weights only once it starts puts the bytes' DRAM latency and the
// stage's bandwidth share on the critical path of every stage. The ring holds the running
// task's weights and the next one's; each copy completes on one of two mbarriers (used in
// turn), whose phase parity the readers know from the copy's sequence number.
//
// Copies alternate between the ring's two ends (even copies at offset 0, odd ones ending at the
// ring's end: mk_stage_at, printed from ir::StageRing and proved), so that a copy never
// overlaps the one before it, the running task's, when the two fit together; a copy that does
// not fit beside it waits for its own task's start.
//
// Who does what: thread MK_STAGE_PRODUCER (a compute thread, never the poller) places and
// issues the copies at the start of each task, after the task's first barrier (the previous
// task's readers of the ring are done), the next task's with MK_STAGE_LATE later in the task
// (mk_stage_late); the readers wait on the copy's mbarrier after the
// task's events, once its input is staged. The placement is recorded in shared memory
// (MkStageRec, by task parity) and read after the task's wait barrier.
#if MK_STAGE_WEIGHTS && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MK_STAGE 1
#else
#define MK_STAGE 0
#endif
#define MK_STAGE_PRODUCER 32  // warp 1, lane 0 (block_threads >= 64)
// Bulk L2 prefetch of the next task's weights (MK_PREFETCH_NEXT KiB, sm_90 and later).
#if MK_PREFETCH_NEXT > 0 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MK_NEXT_PREFETCH 1
#else
#define MK_NEXT_PREFETCH 0
#endif
// The stager and the next task's prefetch read the next task's descriptor during this one
// (protocol.cuh: its buffer is refilled only when the task after it starts).
#define MK_DESC_AHEAD ((MK_STAGE || MK_NEXT_PREFETCH) ? 2 : 1)

// Where a task's staged weights are: ring offset (-1: not staged), mbarrier, phase parity.
struct MkStageRec {
  int off, bar, parity, pad;
};

// What a linear task is told about staging: the record of its copy (null without staging),
// the ring and its size.
struct MkStaged {
  const MkStageRec* rec;
  const char* ring;
  long long size;
};

// The bytes of a linear task's weight rows when its weights are staged (flag set by the host)
// and fit in the ring; 0 otherwise. The producer and the task's readers decide by this alone,
// so it requires what the readers' vector loads do too: 16-byte aligned rows of whole 16-byte
// units (mk_linear_aligned), whatever the flag says.
template <int DT>
__device__ __forceinline__ long long mk_stage_bytes(const MkTask& t, long long ring) {
  if (t.kind != MPK_MK_LINEAR || !(t.flags & MPK_MK_F_STAGE) || (t.k * MkW<DT>::kSize) % 16 != 0) return 0;
  long long b = 0;
  for (int s = 0; s < t.num_slices; ++s) {
    if (t.slices[s].w & 15) return 0;
    b += (long long)t.slices[s].rows * t.k * MkW<DT>::kSize;
  }
  return b <= ring ? b : 0;
}

#if MK_STAGE
__device__ __forceinline__ void mk_mbar_init(unsigned bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}

// Waits for the completion of the phase of parity `parity` of the mbarrier at `bar`.
__device__ __forceinline__ void mk_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nMK_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra MK_MBAR_WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// The producer's state: copies issued so far (copy c uses mbarrier c & 1, phase (c >> 1) & 1),
// the ring region of the last copy, [off, end), which the next placement must not overlap
// while its task runs, and whether that copy is the next task's (issued ahead).
struct MkStager {
  unsigned bars;  // shared address of two mbarriers
  unsigned ring;  // shared address of the ring
  long long size;
  unsigned copies;
  long long off, end;
  bool ahead;
  // The running task's staged bytes, and the next task's copy still to place (null: none).
  long long cur_bytes;
  const MkTask* next;
  MkStageRec* next_rec;
};
__shared__ MkStager mk_stager;  // the producer's alone (in shared memory: no registers)

// Copies task t's weight slices (bytes in all) to ring offset `off` and records where for the
// readers in rec.
template <int DT>
__device__ void mk_stage_issue(MkStager& s, const MkTask& t, long long off, long long bytes, MkStageRec& rec) {
  const unsigned bar = s.bars + 8 * (s.copies & 1);
  rec.off = (int)off;
  rec.bar = (int)bar;
  rec.parity = (int)((s.copies >> 1) & 1);
  ++s.copies;
  s.off = off;
  s.end = off + bytes;
  // The ring's earlier readers were generic-proxy loads; the copy writes through the async proxy.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"((unsigned)bytes) : "memory");
  unsigned dst = s.ring + (unsigned)off;
  for (int i = 0; i < t.num_slices; ++i) {
    const unsigned b = (unsigned)((long long)t.slices[i].rows * t.k * MkW<DT>::kSize);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(t.slices[i].w), "r"(b), "r"(bar) : "memory");
    dst += b;
  }
}

// The next task's copy, placed when it does not overlap the running task's (otherwise at its
// own start).
template <int DT>
__device__ void mk_stage_ahead(MkStager& s) {
  if (!s.next) return;
  const long long nb = mk_stage_bytes<DT>(*s.next, s.size);
  if (nb > 0) {
    const long long at = mk_stage_at(s.copies, s.size, nb);
    if (s.cur_bytes == 0 || at + nb <= s.off || at >= s.end) {
      mk_stage_issue<DT>(s, *s.next, at, nb, *s.next_rec);
      s.ahead = true;
    }
  }
  s.next = nullptr;
}

// At the start of task `cur` (its descriptor and the next's in shared memory): issues cur's
// copy if it was not issued ahead (nothing else is live then), then next's (mk_stage_ahead),
// or with MK_STAGE_LATE leaves next's for mk_stage_late. `next_runs`: the next task belongs to
// a step of this launch.
template <int DT>
__device__ void mk_stage_advance(MkStager& s, const MkTask& cur, const MkTask& next, bool next_runs,
                                 MkStageRec& cur_rec, MkStageRec& next_rec) {
  const long long cb = mk_stage_bytes<DT>(cur, s.size);
  if (cb > 0 && !s.ahead) mk_stage_issue<DT>(s, cur, mk_stage_at(s.copies, s.size, cb), cb, cur_rec);
  if (cb == 0) cur_rec.off = -1;
  s.ahead = false;
  s.cur_bytes = cb;
  s.next = next_runs ? &next : nullptr;
  s.next_rec = &next_rec;
  if (!MK_STAGE_LATE) mk_stage_ahead<DT>(s);
}

// MK_STAGE_LATE: the next task's copy once the running task has its input (a linear's staged,
// another kind's events seen), so that the copy's bytes do not queue ahead of that input.
template <int DT>
__device__ __forceinline__ void mk_stage_late() {
  if (MK_STAGE_LATE && threadIdx.x == MK_STAGE_PRODUCER) mk_stage_ahead<DT>(mk_stager);
}
#else
template <int DT>
__device__ __forceinline__ void mk_stage_late() {}
#endif

#if MK_STAGE
// The producer before the worker leaves: no copy may still be writing to its shared memory.
__device__ __forceinline__ void mk_stage_drain(const MkStager& s) {
  for (unsigned c = s.copies > 2 ? s.copies - 2 : 0; c < s.copies; ++c)
    mk_mbar_wait(s.bars + 8 * (c & 1), (c >> 1) & 1);
}
#endif
