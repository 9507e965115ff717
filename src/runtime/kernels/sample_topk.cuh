// The top-k and nucleus draws (MPK_MK_SAMPLE_TOPK; sample.cuh has the keys, the sort is below):
// the argmax task's CTA finds the step's top_k keys over the logits (its passes over them printed from
// ir::sample_scan_nest, mk_sample_scan) and draws from them as ref/sampling.h does (the loops
// over the sorted candidates from ir::sample_weights_nest, sample_cut_nest and
// sample_nucleus_draw_nest; the walk down the radix histogram from sample_walk_nest; the sort
// from sample_sort_pad_nest and sample_sort_stage_nest).
#if MK_DRAWS == MPK_MK_SAMPLE_TOPK
static_assert(MPK_MK_SAMPLE_GROUP >= MPK_MK_SAMPLE_KMAX + 256, "the nucleus's bin masses after its keys");
// Sorts keys[0, n) in descending order (n <= MPK_MK_SAMPLE_GROUP): bitonic over the next power of
// two, the padding zero keys (below every real key) last; the padding and each stage printed
// from ir::sample_sort_pad_nest and sample_sort_stage_nest (a stage's items on disjoint keys).
__device__ void mk_sample_sort(u64* keys, int n) {
  int m = 1;
  while (m < n) m <<= 1;
  mk_sample_sort_pad(keys, n, m);
  mk_sync();
  for (int size = 2; size <= m; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      mk_sample_sort_stage(keys, m, stride, size);
      mk_sync();
    }
  }
}

// The top_k-th largest key of logits[0, n) (0 < top_k <= n) by radix select: 8 bits a pass
// over global memory until the keys still in question fit in shared memory, where they are
// sorted. Uses keys[0, MPK_MK_SAMPLE_GROUP), hist and sc. Left to inlining (it lands in
// mk_sample_find_topk and mk_sample_topp, calls of their own): as a call itself, the kernel's
// entry spilled.
__device__ u64 mk_sample_radix_kth(const float* logits, int n, int k, u64* keys, unsigned* hist, u64* sc) {
  const int lane = threadIdx.x & 31;
  u64 prefix = 0;  // the top_k-th key's bits above `shift`
  int shift = 64, need = k, group = n;  // need: keys of the group (those agreeing with prefix) to take
  while (group > MPK_MK_SAMPLE_GROUP) {
    shift -= 8;
    mk_sample_hist_clear(hist);  // printed from ir::sample_hist_clear_nest
    mk_sync();
    // Lanes of one bin add once (__match_any_sync).
    mk_sample_scan(logits, n, [&](int j, float v, bool in) {
      int bin = -1;
      if (in) {
        const u64 key = mk_sample_key(v, j);
        if (mk_sample_in(key, prefix, shift + 8)) bin = (int)((key >> shift) & 255);
      }
      const unsigned same = __match_any_sync(0xffffffffu, bin);
      if (bin >= 0 && lane == __ffs(same) - 1) atomicAdd(&hist[bin], (unsigned)__popc(same));
    });
    mk_sync();
    if (threadIdx.x == 0) {  // the bin of the top_k-th key (printed from ir::sample_walk_nest)
      int above;
      const int b = mk_sample_walk(hist, need, above);
      sc[0] = prefix | ((u64)b << shift);
      sc[1] = (u64)(need - above);
      sc[2] = hist[b];
    }
    mk_sync();
    prefix = sc[0];
    need = (int)sc[1];
    group = (int)sc[2];
    mk_sync();
  }
  // The group in shared memory, sorted: its need-th key is the top_k-th.
  if (threadIdx.x == 0) sc[3] = 0;
  mk_sync();
  mk_sample_scan(logits, n, [&](int j, float v, bool in) {
    const u64 key = mk_sample_key(v, j);
    if (in && mk_sample_in(key, prefix, shift)) keys[atomicAdd((unsigned*)&sc[3], 1u)] = key;
  });
  mk_sync();
  mk_sample_sort(keys, group);
  const u64 kth = keys[need - 1];
  mk_sync();
  return kth;
}

// The top_k largest keys of logits[0, n), sorted, into keys[0, top_k) (top_k <=
// MPK_MK_SAMPLE_GROUP): a pass gathers the keys at or above the radix select's top_k-th.
__device__ void mk_sample_radix_topk(const float* logits, int n, int k, u64* keys, unsigned* hist, u64* sc) {
  const u64 kth = mk_sample_radix_kth(logits, n, k, keys, hist, sc);
  if (threadIdx.x == 0) sc[3] = 0;
  mk_sync();
  mk_sample_scan(logits, n, [&](int j, float v, bool in) {
    const u64 key = mk_sample_key(v, j);
    if (in && key >= kth) keys[atomicAdd((unsigned*)&sc[3], 1u)] = key;
  });
  mk_sync();
  mk_sample_sort(keys, k);
}

// The top_k largest keys as above, from a guess first: the key of rank r of a strided sample
// of the logits, r chosen so that about 4 top_k + 256 logits rank at or above it, and one
// pass gathers those. Exact whatever the guess: when it gathers at least top_k keys they
// include the top_k largest; when it gathers fewer, or more than the buffer holds, the radix
// select runs instead. Not inlined: inlined, it cost the kernel a register spill.
__device__ __noinline__ void mk_sample_find_topk(const float* logits, int n, int k, u64* keys, unsigned* hist, u64* sc) {
  if (n > MPK_MK_SAMPLE_GROUP) {
    const int lane = threadIdx.x & 31;
    constexpr int S = MPK_MK_SAMPLE_GROUP / 2;
    mk_sample_stride(logits, n, keys);  // printed from ir::sample_stride_nest
    mk_sync();
    mk_sample_sort(keys, S);
    const int want = min(4 * k + 256, MPK_MK_SAMPLE_GROUP * 3 / 4);
    const u64 guess = keys[max(0, (int)((long long)want * S / n) - 1)];
    mk_sync();
    if (threadIdx.x == 0) sc[3] = 0;
    mk_sync();
    // One counter add per warp and round.
    mk_sample_scan(logits, n, [&](int j, float v, bool in) {
      const u64 key = mk_sample_key(v, j);
      const bool take = in && key >= guess;
      const unsigned m = __ballot_sync(0xffffffffu, take);
      unsigned base = 0;
      if (lane == 0 && m) base = atomicAdd((unsigned*)&sc[3], (unsigned)__popc(m));
      base = __shfl_sync(0xffffffffu, base, 0);
      const unsigned slot = base + (unsigned)__popc(m & ((1u << lane) - 1u));
      if (take && slot < MPK_MK_SAMPLE_GROUP) keys[slot] = key;
    });
    mk_sync();
    const int got = (int)(unsigned)sc[3];
    if (got >= k && got <= MPK_MK_SAMPLE_GROUP) {
      mk_sample_sort(keys, got);
      return;
    }
  }
  mk_sample_radix_topk(logits, n, k, keys, hist, sc);
}

// *m += x in shared memory by 32-bit atomics on its two words (a 64-bit add there is a
// compare-and-swap loop, which the warps of the block retried on one bin: ten times slower),
// the low word's wrap carried into the high one: exact once every add is done.
__device__ __forceinline__ void mk_sample_add_mass(u64* m, u64 x) {
  unsigned* w = (unsigned*)m;  // little-endian: the low word first
  const unsigned lo = (unsigned)x, old = atomicAdd(w, lo);
  const unsigned hi = (unsigned)(x >> 32) + (old + lo < old ? 1u : 0u);
  if (hi) atomicAdd(w + 1, hi);
}

// Logit v's integer nucleus weight (sampling_math.h) under temperature t, zmax the largest
// logit over t.
__device__ __forceinline__ u64 mk_sample_mass(float v, float t, float zmax) {
  return mpk_nucleus_mass(mpk_det_exp(__fsub_rn(mk_sample_z(v, t), zmax)));
}

// The nucleus's last key bracketed from a guess, for n > MPK_MK_SAMPLE_GROUP logits. A strided
// sample of the keys, sorted, stands for the ranks (a sample key for n / S keys): the sample's
// rank j where its own mass reaches top_p of its total is where the nucleus likely ends. Each
// round puts T = MPK_MK_SAMPLE_BRACKETS thresholds on the keys' top 32 bits (their logits) at
// sample keys evenly inside a window of the sample (first j +- 64), all inside the range
// [lo, hi) that holds the last key (first: every key), and one pass sums in each thread's
// registers the integer masses of the range's keys at or above each threshold (exact in any
// order), in the first round also the total. With the exact mass at or above hi, the first
// threshold whose mass reaches top_p of the total and the one before it are the next range;
// where the sample puts more than MPK_MK_SAMPLE_KMAX / 4 keys in it (a count can be twice the
// sample's estimate), it is also the next round's window: at most five rounds, the later ones
// cheap (only the range's keys compute their masses).
// Out: sc[0], sc[2], the range's bounds on a key's top 32 bits, [lo, hi) (hi 2^32: none), sc[1]
// the exact mass at or above hi, *(double*)&sc[5] the target. Uses keys and w as scratch.
__device__ __forceinline__ void mk_sample_topp_guess(const float* logits, int n, float t, float top_p, float zmax,
                                                     u64* keys, float* w, u64* sc) {
  constexpr int S = MPK_MK_SAMPLE_GROUP / 2, T = MPK_MK_SAMPLE_BRACKETS;
  const int lane = threadIdx.x & 31;
  unsigned* thr = (unsigned*)w;  // [T], descending
  u64* acc = (u64*)(w + T);      // [T]: the range's mass at or above each threshold
  int* win = (int*)(w + 3 * T);  // the window [win[0], win[1]) and the range [win[2], win[3]) of sample ranks
  u64* smass = keys + S;         // [S]: the sorted sample's masses
  mk_sample_stride(logits, n, keys);  // printed from ir::sample_stride_nest
  mk_sync();
  mk_sample_sort(keys, S);
  for (int i = threadIdx.x; i < S; i += MK_COMPUTE_THREADS) smass[i] = mk_sample_mass(mk_sample_logit(keys[i]), t, zmax);
  mk_sync();
  if (threadIdx.x < 32) {  // warp 0: the sample's rank j where its mass reaches top_p of its total
    constexpr int C = S / 32;  // each lane's run of the sample
    u64 run = 0;
    for (int i = 0; i < C; ++i) run += smass[lane * C + i];
    u64 incl = run;  // inclusive prefix over the lanes
    for (int o = 1; o < 32; o <<= 1) {
      const u64 up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    const double want = mpk_nucleus_target(top_p, __shfl_sync(0xffffffffu, incl, 31));
    const unsigned hit = __ballot_sync(0xffffffffu, mpk_nucleus_reached(incl, want));
    const int first = hit ? __ffs(hit) - 1 : 31;
    int j = first * C + C - 1;
    if (lane == first) {
      u64 r = incl - run;
      for (int i = 0; i < C; ++i)
        if (mpk_nucleus_reached(r += smass[lane * C + i], want)) {
          j = lane * C + i;
          break;
        }
    }
    j = __shfl_sync(0xffffffffu, j, first);
    if (lane == 0) {
      win[0] = max(0, j - 64), win[1] = min(S, j + 65), win[2] = 0, win[3] = S;
      sc[0] = 0, sc[1] = 0, sc[2] = 1ull << 32, sc[4] = 0, sc[7] = 0;
    }
  }
  for (int round = 0; round < 5; ++round) {
    mk_sync();
    // Threshold k at the sample's rank wa + (k + 1) (wb - wa) / (T + 1): ascending ranks, so
    // descending keys, none outside [lo, hi] (the window's sample keys lie there).
    if (threadIdx.x < T) {
      thr[threadIdx.x] = (unsigned)(keys[win[0] + (threadIdx.x + 1) * (win[1] - win[0]) / (T + 1)] >> 32);
      acc[threadIdx.x] = 0;
    }
    mk_sync();
    // On 32 bits: a finite logit's key has its top 32 bits below 0xff800001 (+inf's), so hi
    // 2^32 (none above) is 0xffffffff here.
    const unsigned lo = (unsigned)sc[0], hi = (unsigned)min(sc[2], 0xffffffffull);
    u64 ws[T];
    u64 total = 0;
#pragma unroll
    for (int k = 0; k < T; ++k) ws[k] = 0;
    const bool first = round == 0;
    mk_sample_scan2(logits, n, [&](int j, float v, bool in) {
      if (!in) return;
      const unsigned k32 = (unsigned)(mk_sample_key(v, j) >> 32);
      if (k32 < lo || k32 >= hi) return;  // above the range: its mass is known; below: not needed
      const u64 m = mk_sample_mass(v, t, zmax);
      if (first) total += m;
#pragma unroll
      for (int k = 0; k < T; ++k)
        if (k32 >= ((volatile unsigned*)thr)[k]) ws[k] += m;  // read each time: registers are short
    });
#pragma unroll
    for (int k = 0; k < T; ++k) {
      for (int o = 16; o > 0; o >>= 1) ws[k] += __shfl_xor_sync(0xffffffffu, ws[k], o);
      if (lane == 0) atomicAdd((unsigned long long*)&acc[k], (unsigned long long)ws[k]);
    }
    if (first) {
      for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
      if (lane == 0) atomicAdd((unsigned long long*)&sc[4], (unsigned long long)total);
    }
    mk_sync();
    if (threadIdx.x == 0) {  // the first threshold whose mass at or above it reaches the target
      if (first) *(double*)&sc[5] = mpk_nucleus_target(top_p, sc[4]);
      const double target = *(double*)&sc[5];
      const u64 above = sc[1];
      int i = 0;
      while (i < T && !mpk_nucleus_reached(above + acc[i], target)) ++i;
      const int wa = win[0], wb = win[1];
      if (i < T) sc[0] = thr[i], win[3] = wa + (i + 1) * (wb - wa) / (T + 1) + 1;
      if (i > 0) sc[2] = thr[i - 1], sc[1] = above + acc[i - 1], win[2] = wa + i * (wb - wa) / (T + 1);
      win[0] = win[2], win[1] = win[3];
      sc[7] = (long long)(win[3] - win[2]) * n / S <= MPK_MK_SAMPLE_KMAX / 4;
    }
    mk_sync();
    if (sc[7]) break;
  }
  mk_sync();
}

// The keys whose top 32 bits lie in [lo, hi) gathered into keys (at most MPK_MK_SAMPLE_KMAX of
// them; sc[3]: how many there are), the guess's sorted sample (keys[0, S)) first copied to
// keys[S, 2 S), out of the gathered keys' way, for mk_sample_topp_draw.
__device__ __noinline__ void mk_sample_topp_bracket(const float* logits, int n, u64 lo, u64 hi, u64* keys, u64* sc) {
  constexpr int S = MPK_MK_SAMPLE_GROUP / 2;
  for (int i = threadIdx.x; i < S; i += MK_COMPUTE_THREADS) keys[S + i] = keys[i];
  if (threadIdx.x == 0) sc[3] = 0;
  mk_sync();
  mk_sample_scan2(logits, n, [&](int j, float v, bool in) {
    const u64 key = mk_sample_key(v, j), k32 = key >> 32;
    if (in && k32 >= lo && k32 < hi) {
      const unsigned slot = atomicAdd((unsigned*)&sc[3], 1u);
      if (slot < MPK_MK_SAMPLE_KMAX) keys[slot] = key;
    }
  });
  mk_sync();
}

// Each thread's largest Gumbel key and its id (the key's bits above the id's) over the logits
// whose keys are at or above `last` (the nucleus). With `hi` below 2^32 (the guess's bracket),
// keys[S, 2 S) hold the guess's sorted sample, whose keys at or above hi are in the nucleus:
// the largest of their Gumbel keys is a draw from the same set, a floor. The noise
// g = -ln(-ln u) is at most -ln(1 - u) (as -ln u >= 1 - u), itself below 16.7 (u <= 1 - 2^-24):
// a key whose bound z - ln(1 - u) falls short of the floor (less a margin for the fast
// logarithm's error, a few 1e-6, the reference's logarithms' and the roundings; a float sum
// below the floor comes from a real one below it) cannot win. One pass lists the ids whose
// bound reaches it (in keys[0, S), as ints) and their exact keys follow; without a floor, or a
// list past its room, the pass computes every key. Uses sc[3] and sc[7].
__device__ __noinline__ u64 mk_sample_topp_draw(const float* logits, int n, float t, u64 seed, u64 position, u64 last,
                                                u64 hi, u64* keys, u64* sc) {
  constexpr int S = MPK_MK_SAMPLE_GROUP / 2;
  constexpr unsigned kRoom = S * 2;
  int* list = (int*)keys;
  float best = MK_NEG_INF;
  int bi = 0x7fffffff;
  mk_sync();  // every thread has read sc[3] (the last key) before it is reused
  if (threadIdx.x == 0) sc[3] = 0, sc[7] = mk_sample_ord(MK_NEG_INF);
  mk_sync();
  if (hi < (1ull << 32)) {
    float top = MK_NEG_INF;
    for (int i = threadIdx.x; i < S; i += MK_COMPUTE_THREADS) {
      const u64 key = keys[S + i];
      if ((key >> 32) >= hi) top = fmaxf(top, mk_sample_gumbel(mk_sample_logit(key), t, seed, position, mk_sample_id(key)));
    }
    for (int o = 16; o > 0; o >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
    if ((threadIdx.x & 31) == 0) atomicMax((unsigned*)&sc[7], mk_sample_ord(top));
    mk_sync();
  }
  const float drawn = mk_sample_unord((unsigned)sc[7]);
  const float floor_ = drawn - (2e-3f + 2e-6f * fabsf(drawn));  // -inf stays -inf
  unsigned listed = kRoom + 1;
  if (floor_ > MK_NEG_INF) {
    mk_sample_scan2(logits, n, [&](int j, float v, bool in) {
      if (!in || mk_sample_key(v, j) < last) return;
      const float z = mk_sample_z(v, t);
      if (z + 16.7f < floor_) return;
      if (z - __logf(1.f - mpk_sampling_uniform(seed, position, (unsigned)j)) < floor_) return;  // 1 - u is exact
      const unsigned slot = atomicAdd((unsigned*)&sc[3], 1u);
      if (slot < kRoom) list[slot] = j;
    });
    mk_sync();
    listed = (unsigned)sc[3];
  }
  if (listed <= kRoom) {
    for (unsigned i = threadIdx.x; i < listed; i += MK_COMPUTE_THREADS) {
      const int j = list[i];
      mk_better(best, bi, mk_sample_gumbel(__ldcg(logits + j), t, seed, position, j), j);
    }
  } else {
    mk_sample_scan2(logits, n, [&](int j, float v, bool in) {
      if (in && mk_sample_key(v, j) >= last) mk_better(best, bi, mk_sample_gumbel(v, t, seed, position, j), j);
    });
  }
  return ((u64)__float_as_uint(best) << 32) | (unsigned)bi;
}

// The draw from the top_k largest keys of logits[0, n) (top_k 0 or >= n: all n), cut to the
// nucleus where top_p < 1 (always so without a top-k), as ref/sampling.h defines them: the
// nucleus's last key found among the keys of the range mk_sample_topp_guess brackets by exact
// sums (where that range holds at most MPK_MK_SAMPLE_KMAX keys; the cut found in it is checked
// again), else by a radix select: 8 bits a pass over the logits,
// each bin's count and mass (sampling_math.h's integer weights: their sums are exact in any
// order) summed, down to the bin where the mass ranked before a key reaches top_p of the total;
// once that bin's keys fit the sort (at most MPK_MK_SAMPLE_KMAX) they are gathered, sorted and
// their weights added in order from the mass above them (under a top-k the radix select alone,
// over the keys at or above the top_k-th, which a radix select by count finds first). The draw is the argmax of the Gumbel keys over every logit
// ranked at or above the last key. zmax: the largest logit over the
// temperature. Not inlined, as mk_sample_find_topk; the parameters by value (a reference to the
// kernel's parameters would copy them to local memory).
__device__ __noinline__ int mk_sample_topp(const float* logits, int n, int top_k, float t, float top_p, u64 seed,
                                           u64 position, float zmax, u64* keys, float* redv, int* redi) {
  float* w = (float*)(keys + MPK_MK_SAMPLE_GROUP);  // mk_sample_topk's layout
  unsigned* hist = (unsigned*)(w + MPK_MK_SAMPLE_KMAX);
  u64* sc = (u64*)(hist + 256);
  const int lane = threadIdx.x & 31;
  u64* mass = keys + MPK_MK_SAMPLE_KMAX;  // past the keys this draw gathers (GROUP >= KMAX + 256)
  double* target = (double*)&sc[5];
  u64 prefix = 0, above = 0;  // the last key's bits above `shift`; the mass ranked before its bin
  int shift = 64, group = n;  // group: the keys agreeing with prefix
  u64 blo = 0, bhi = 0;       // or the guess's bracket on the keys' top 32 bits
  // The top-k's last key: the keys below it are out (0: none are).
  // In shared memory, read where used: a register held through the passes spilled the entry.
  const volatile u64& floor = sc[8];
  if (top_k > 0 && top_k < n) {
    const u64 kth = mk_sample_radix_kth(logits, n, top_k, keys, hist, sc);
    if (threadIdx.x == 0) sc[8] = kth;
  } else if (threadIdx.x == 0) {
    sc[8] = 0;
  }
  mk_sync();
  bool guessed = n > MPK_MK_SAMPLE_GROUP && floor == 0 && top_p < 1.f;
  if (guessed) {
    mk_sample_topp_guess(logits, n, t, top_p, zmax, keys, w, sc);
    blo = sc[0];
    bhi = sc[2];
    mk_sync();
  }
  // The keys of the guess's bracket (the mass above it known), or of the radix select's bin,
  // gathered, sorted, weighed, and the cut among them; the guess's bracket only where it fits
  // the sort and the cut lies inside it, else the radix select.
  int got = 0;
  while (top_p < 1.f) {  // until the cut is found
    if (!guessed) {
      if (threadIdx.x == 0) sc[4] = 0;  // the total mass
      do {
        shift -= 8;
        const bool first = shift == 56;
        mk_sample_mass_clear(hist, mass);  // printed from ir::sample_mass_clear_nest
        mk_sync();
        u64 total = 0;  // this thread's mass, first pass
        mk_sample_scan2(logits, n, [&](int j, float v, bool in) {
          int bin = -1;
          u64 m = 0;
          if (in) {
            const u64 key = mk_sample_key(v, j);
            if (key >= floor && mk_sample_in(key, prefix, shift + 8)) {
              bin = (int)((key >> shift) & 255);
              m = mk_sample_mass(v, t, zmax);
              total += m;
            }
          }
          // The lanes of one bin add once: a mass is at most 2^32, so its low 16 bits and the rest
          // summed over 32 lanes each fit 32 bits.
          const unsigned same = __match_any_sync(0xffffffffu, bin);
          const unsigned lo = __reduce_add_sync(same, (unsigned)(m & 0xffffu));
          const unsigned hi = __reduce_add_sync(same, (unsigned)(m >> 16));
          if (bin >= 0 && lane == __ffs(same) - 1) {
            atomicAdd(&hist[bin], (unsigned)__popc(same));
            mk_sample_add_mass(&mass[bin], ((u64)hi << 16) + lo);
          }
        });
        if (first) {
          for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
          if (lane == 0) atomicAdd((unsigned long long*)&sc[4], (unsigned long long)total);
        }
        mk_sync();
        if (threadIdx.x == 0) {  // the bin holding the cut (printed from ir::sample_mass_walk_nest)
          if (first) *target = mpk_nucleus_target(top_p, sc[4]);
          u64 run = above;
          const int b = mk_sample_mass_walk(mass, run, *target);
          sc[0] = prefix | ((u64)b << shift);
          sc[1] = run;
          sc[2] = hist[b];
        }
        mk_sync();
        prefix = sc[0];
        above = sc[1];
        group = (int)sc[2];
        mk_sync();
      } while (group > MPK_MK_SAMPLE_KMAX && shift > 0);
    }
    if (guessed) {
      mk_sample_topp_bracket(logits, n, blo, bhi, keys, sc);
      above = sc[1];
    } else {
      if (threadIdx.x == 0) sc[3] = 0;
      mk_sync();
      mk_sample_scan2(logits, n, [&](int j, float v, bool in) {
        const u64 key = mk_sample_key(v, j);
        if (in && key >= floor && mk_sample_in(key, prefix, shift)) {
          const unsigned slot = atomicAdd((unsigned*)&sc[3], 1u);
          if (slot < MPK_MK_SAMPLE_KMAX) keys[slot] = key;
        }
      });
      mk_sync();
    }
    got = (int)(unsigned)sc[3];
    // The guess's bracket: at most the sort's keys, and the mass above it short of the target.
    if (!guessed || (got <= MPK_MK_SAMPLE_KMAX && !mpk_nucleus_reached(above, *target))) {
      got = min(got, MPK_MK_SAMPLE_KMAX);
      mk_sample_sort(keys, got);
      mk_sample_weights(keys, w, got, t, zmax);
      mk_sync();
      if (threadIdx.x == 0) {  // the nucleus's last key (every key when none was gathered)
        const int c = got > 0 ? mk_sample_cut(w, got, above, *target) : 0;
        sc[3] = c > 0 ? keys[c - 1] : 0;
        // The guess's bracket holds the cut where its keys bring the mass to the target.
        sc[6] = !guessed || mpk_nucleus_reached(above + mk_sample_total(w, got), *target);
      }
      mk_sync();
      if (sc[6]) break;
    }
    guessed = false;  // not in the guess's bracket: the radix select
    above = 0;
    mk_sync();
  }
  const u64 last = top_p < 1.f ? max(sc[3], (u64)floor) : (u64)floor;
  // The draw, with the floor the guess's sample gives it (the radix select's draw has none).
  const u64 b = mk_sample_topp_draw(logits, n, t, seed, position, last, guessed ? bhi : ~0ull, keys, sc);
  float best = __uint_as_float((unsigned)(b >> 32));
  int bi = (int)(unsigned)b;
  mk_block_argmax(best, bi, redv, redi);
  return bi;
}

// The sampled token of logits[0, n) (all finite) for `position`: top-k (0 < top_k < n) then
// top-p, or top-p over every logit (top_k 0 or >= n); `top`: the largest logit. Every compute
// thread returns it.
__device__ int mk_sample_topk(const float* logits, int n, const MkParams& prm, u64 position, float top,
                              float* smem, float* redv, int* redi) {
  u64* keys = (u64*)smem;
  float* w = (float*)(keys + MPK_MK_SAMPLE_GROUP);
  unsigned* hist = (unsigned*)(w + MPK_MK_SAMPLE_KMAX);
  u64* sc = (u64*)(hist + 256);  // scalars (mk_sample_topp lists its own)
  if (prm.top_k <= 0 || prm.top_k >= n || prm.top_k > MPK_MK_SAMPLE_KMAX) {
    // Every logit, or more keys than the sort holds.
    return mk_sample_topp(logits, n, prm.top_k, prm.temperature, prm.top_p, prm.seed, position,
                          __fdiv_rn(top, prm.temperature), keys, redv, redi);
  }
  const int k = prm.top_k;
  mk_sample_find_topk(logits, n, k, keys, hist, sc);
  // The nucleus: the shortest prefix whose weights e^(z - z_max), summed in order, reach
  // top_p times their total.
  int cut = k;
  if (prm.top_p < 1.f) {
    const float zmax = __fdiv_rn(mk_sample_logit(keys[0]), prm.temperature);
    mk_sample_weights(keys, w, k, prm.temperature, zmax);  // printed from ir::sample_weights_nest
    mk_sync();
    // Eight weights loaded at a time (printed from ir::sample_total_nest and sample_cut_nest).
    if (threadIdx.x == 0)
      sc[3] = (u64)mk_sample_cut(w, k, 0, mpk_nucleus_target(prm.top_p, mk_sample_total(w, k)));
    mk_sync();
    cut = (int)sc[3];
  }
  // The argmax of z + Gumbel noise over the nucleus (ties: the lower id).
  float best = MK_NEG_INF;
  int bi = 0x7fffffff;
  mk_sample_nucleus_draw(keys, cut, prm, position, best, bi);  // ir::sample_nucleus_draw_nest
  mk_block_argmax(best, bi, redv, redi);
  return bi;
}
#endif  // MK_DRAWS == MPK_MK_SAMPLE_TOPK
