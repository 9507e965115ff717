// Prefill attention: the chunk's query rows attend causally to the layer's KV cache, which
// already holds the cached prefix and the chunk's own keys and values (pf_kv_store). Query row
// t sits at position pos0 + t and sees keys [0, pos0 + t]; query head h reads KV head
// h / (Hq / Hkv). q is [T, Hq * D] fp32; keys and values are read from the cache's bf16
// shadow [Hkv][cap][D] (the operands the tensor cores take; pf_kv_store and pf_kv_shadow
// keep it equal to the fp32 cache rounded).
//
// A CTA takes 64 query rows of one head, 16 per warp, and walks the keys in blocks of 64,
// double buffered: block j+1 arrives by cp.async while block j is multiplied. S = Q K^T and
// O += P V on the tensor cores, the online softmax in fp32 registers (base 2, the scale folded
// in), P reused from S's accumulators as the A operand. Head dimensions up to DP are
// zero-padded in shared memory, which adds nothing to a dot product. out is bf16 when `bf16`
// (the o_proj's operand).

// PF_ATT_ROWS (query rows of a CTA), PF_ATT_THREADS, PF_ATT_KEYS (keys of a block) and PF_ATT_PAD
// (elements past DP in a shared row) are printed before this file from runtime/prefill.h's
// kAttention, which sizes the launches and the shared memory. The code below is written for:
static_assert(PF_ATT_ROWS == PF_ATT_THREADS / 32 * 16, "a warp takes 16 query rows");
static_assert(PF_ATT_ROWS == 64 && PF_ATT_KEYS == 64, "blocks of 64 queries and 64 keys");

// 64 x DP bf16 at row stride `ld` from fp32 rows of `src` at stride `stride`: columns [0, D)
// of the first `rows` rows, zeros elsewhere.
template <int DP>
__device__ __forceinline__ void pf_stage_rows(pf_bf16* dst, int ld, const float* src, long long stride,
                                              int rows, int D) {
  for (int i = 0; i < 64 * (DP / 2) / PF_ATT_THREADS; ++i) {
    const int r = pf_pair_row<PF_ATT_THREADS, DP / 2>(threadIdx.x, i);
    const int c = pf_pair_col<PF_ATT_THREADS, DP / 2>(threadIdx.x, i);
    float2 v = make_float2(0.f, 0.f);
    if (r < rows && c < D) v = *(const float2*)(src + r * stride + c);
    *(unsigned*)&dst[r * ld + c] = pf_pack_bf16(v.x, v.y);
  }
}

// The same from bf16 rows at stride D: by cp.async when rows are 16-byte multiples (D % 8 ==
// 0; zero-filled outside), else by 4-byte loads now (D is even).
template <int DP>
__device__ __forceinline__ void pf_fetch_rows(pf_bf16* dst, int ld, const pf_bf16* src, int rows, int D) {
  if (D % 8 == 0) {
#pragma unroll
    for (int i = 0; i < 64 * (DP / 8) / PF_ATT_THREADS; ++i) {
      const int r = pf_chunk_row<PF_ATT_THREADS, DP / 8>(threadIdx.x, i);
      const int c = pf_chunk_col<PF_ATT_THREADS, DP / 8>(threadIdx.x, i);
      const bool ok = r < rows && c < D;
      pf_cp_async16(dst + r * ld + c, ok ? src + (long long)r * D + c : src, ok);
    }
  } else {
    for (int i = 0; i < 64 * (DP / 2) / PF_ATT_THREADS; ++i) {
      const int r = pf_pair_row<PF_ATT_THREADS, DP / 2>(threadIdx.x, i);
      const int c = pf_pair_col<PF_ATT_THREADS, DP / 2>(threadIdx.x, i);
      *(unsigned*)&dst[r * ld + c] = r < rows && c < D ? *(const unsigned*)(src + (long long)r * D + c) : 0u;
    }
  }
}

template <int DP>
__device__ void pf_attention(const float* __restrict__ q, const pf_bf16* __restrict__ kc,
                             const pf_bf16* __restrict__ vc, void* __restrict__ out, int T, int Hq,
                             int Hkv, int D, int cap, int pos0, float scale, int bf16) {
  constexpr int LD = DP + PF_ATT_PAD;  // ldmatrix's 8 rows on distinct banks
  const float kNegInf = -__int_as_float(0x7f800000);
  pf_bf16* sk = (pf_bf16*)pf_smem_raw;  // [2][PF_ATT_KEYS * LD], then sv the same (kAttention.smem_bytes)
  pf_bf16* sv = sk + 2 * PF_ATT_KEYS * LD;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int qb, h;
  pf_att_block(qb, h);  // the longest blocks start first
  const int q0 = qb * PF_ATT_ROWS, kvh = h / (Hq / Hkv);
  const long long qstride = (long long)Hq * D;
  const int qrows = min(PF_ATT_ROWS, T - q0);
  const int nkv = pos0 + q0 + qrows;  // keys [0, the block's last position]

  // Q through sk into registers, as A fragments for each 16-wide slice of D.
  pf_stage_rows<DP>(sk, LD, q + q0 * qstride + (long long)h * D, qstride, qrows, D);
  __syncthreads();
  unsigned qf[DP / 16][4];
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk)
    pf_ldmatrix_x4(qf[kk], &sk[(warp * 16 + pf_ldsm_a_row(lane)) * LD + kk * 16 + pf_ldsm_a_col(lane)]);

  float o[DP / 8][4];
#pragma unroll
  for (int i = 0; i < DP / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float mrow[2] = {kNegInf, kNegInf}, lrow[2] = {0.f, 0.f};
  const float sl2 = scale * 1.4426950408889634f;  // softmax in base 2
  // This thread's rows of S and O (warp tiles of 16 rows: ir::MmaTile, wn = 1).
  const int row0 = pf_frag_row<1, 16>(warp, 0, lane, 0), row1 = pf_frag_row<1, 16>(warp, 0, lane, 1);
  const long long kvbase = pf_kv_elem(kvh, 0, 0, cap, D);  // the KV head's rows, consecutive (ir::AttentionRows)
  auto fetch = [&](int k0, int buf) {
    pf_fetch_rows<DP>(sk + buf * 64 * LD, LD, kc + kvbase + (long long)k0 * D, min(64, nkv - k0), D);
    pf_fetch_rows<DP>(sv + buf * 64 * LD, LD, vc + kvbase + (long long)k0 * D, min(64, nkv - k0), D);
    pf_cp_async_commit();
  };
  __syncthreads();  // Q's fragments are read from sk
  fetch(0, 0);

  for (int k0 = 0, buf = 0; k0 < nkv; k0 += 64, buf ^= 1) {
    if (k0 + 64 < nkv) fetch(k0 + 64, buf ^ 1);
    else pf_cp_async_commit();
    pf_cp_async_wait<1>();
    __syncthreads();  // block k0 has landed for everyone
    const pf_bf16* kb = sk + buf * 64 * LD;
    const pf_bf16* vb = sv + buf * 64 * LD;
    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk)
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        unsigned b[4];
        pf_ldmatrix_x4(b, &kb[(nj * 16 + pf_ldsm_b_row(lane)) * LD + kk * 16 + pf_ldsm_b_col(lane)]);
        pf_mma(s[2 * nj], qf[kk], b[0], b[1]);
        pf_mma(s[2 * nj + 1], qf[kk], b[2], b[3]);
      }
    // Causal mask, scale, and the online-softmax update of each of the thread's two rows.
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int qpos = pos0 + q0 + (hr ? row1 : row0);
      float mx = kNegInf;
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = k0 + pf_frag_col<1, 64>(warp, ni, lane, e);
          float& v = s[ni][hr * 2 + e];
          v = key <= qpos ? v * sl2 : kNegInf;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // Key 0 is in the first block for every row, so the running maximum is finite. The
      // weights, rescale and update (pf_ss_*) are printed from ir::PrefillSoftmax and proved.
      const float mnew = fmaxf(mrow[hr], mx);
      const float corr = pf_ss_rescale(mrow[hr], mnew);
      mrow[hr] = mnew;
      float sum = 0.f;
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& v = s[ni][hr * 2 + e];
          v = pf_ss_weight(v, mnew);
          sum += v;
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      lrow[hr] = pf_ss_update(lrow[hr], corr, sum, 1.f);
#pragma unroll
      for (int dn = 0; dn < DP / 8; ++dn) {
        o[dn][hr * 2] *= corr;
        o[dn][hr * 2 + 1] *= corr;
      }
    }
    // O += P V: S's accumulators of key tiles 2kk, 2kk+1 are P's A fragment for keys 16kk..
    // (ir::AccAsA); the ldmatrix lane addresses are ir::LdmatrixOperands' (proved).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      unsigned a[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float* acc = s[2 * kk + pf_acc_a_tile(i)];
        a[i] = pf_pack_bf16(acc[pf_acc_a_elem(i, 0)], acc[pf_acc_a_elem(i, 1)]);
      }
#pragma unroll
      for (int dj = 0; dj < DP / 16; ++dj) {
        unsigned b[4];
        pf_ldmatrix_x4_trans(b, &vb[(kk * 16 + pf_ldsm_bt_row(lane)) * LD + dj * 16 + pf_ldsm_bt_col(lane)]);
        pf_mma(o[2 * dj], a, b[0], b[1]);
        pf_mma(o[2 * dj + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // block k0's buffer is refilled next
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = hr ? row1 : row0;
    if (r >= qrows) continue;
    const float inv = 1.f / lrow[hr];
    const long long row = (q0 + r) * qstride + (long long)h * D;
#pragma unroll
    for (int dn = 0; dn < DP / 8; ++dn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = pf_frag_col<1, DP>(warp, dn, lane, e);
        if (d < D) pf_store(out, row + d, o[dn][hr * 2 + e] * inv, bf16);
      }
  }
}

// One entry per padded head dimension; the host picks the smallest DP >= D.
#define PF_ATTENTION_ENTRY(DP)                                                                     \
  extern "C" __global__ void __launch_bounds__(PF_ATT_THREADS, 2)                                  \
      pf_attention_##DP(const float* q, const pf_bf16* kc, const pf_bf16* vc, void* out, int T, int Hq, \
                        int Hkv, int D, int cap, int pos0, float scale, int bf16) {                \
    pf_wait_prior();                                                                               \
    pf_attention<DP>(q, kc, vc, out, T, Hq, Hkv, D, cap, pos0, scale, bf16);                       \
  }
PF_ATTENTION_ENTRY(16)
PF_ATTENTION_ENTRY(32)
PF_ATTENTION_ENTRY(64)
PF_ATTENTION_ENTRY(128)
