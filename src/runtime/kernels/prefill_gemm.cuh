// Prefill projections on the tensor cores: C[M, N] = A[M, K] W[N, K]^T (+ bias[N]) (+ R[M, N]).
// A, R and C fp32 row major; W bf16 in the nn.Linear layout, which is the column-major B
// operand mma.sync wants. Requires K % 8 == 0 (16-byte weight copies).
//
// A CTA computes a 128 x 128 tile with 8 warps of 64 x 32 each, over K in steps of 32, double
// buffered: the weights of step k+1 arrive by cp.async and the activations of step k+1 wait in
// registers (rounded to bf16 when stored) while step k is multiplied, so one barrier per step
// separates the writes of a buffer from the reads of its previous use.

#define PF_BM 128
#define PF_BN 128
#define PF_BK 32
#define PF_LDS (PF_BK + 8)  // row stride in bf16: 80 bytes puts ldmatrix's 8 rows on distinct banks
#define PF_GEMM_THREADS 256

extern "C" __global__ void __launch_bounds__(PF_GEMM_THREADS)
pf_gemm(const float* __restrict__ A, const pf_bf16* __restrict__ W, const float* __restrict__ bias,
        const float* R, float* C, int M, int N, int K) {
  __shared__ __align__(16) pf_bf16 sa[2][PF_BM * PF_LDS];
  __shared__ __align__(16) pf_bf16 sb[2][PF_BN * PF_LDS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = blockIdx.y * PF_BM, n0 = blockIdx.x * PF_BN;
  const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;
  const int ktiles = (K + PF_BK - 1) / PF_BK;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // Activations: 128 rows x 8 float4 per step, four per thread; zeros outside [M, K).
  float4 ra[4];
  auto load_a = [&](int kt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int idx = tid + j * PF_GEMM_THREADS, r = idx >> 3, c = (idx & 7) * 4;
      const int gr = m0 + r, gk = kt * PF_BK + c;
      ra[j] = gr < M && gk < K ? *(const float4*)(A + (long long)gr * K + gk) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  auto store_a = [&](int buf) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int idx = tid + j * PF_GEMM_THREADS, r = idx >> 3, c = (idx & 7) * 4;
      uint2 u;
      u.x = pf_pack_bf16(ra[j].x, ra[j].y);
      u.y = pf_pack_bf16(ra[j].z, ra[j].w);
      *(uint2*)&sa[buf][r * PF_LDS + c] = u;
    }
  };
  // Weights: 128 rows x 4 chunks of 16 bytes per step, two per thread.
  auto load_b = [&](int kt, int buf) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int idx = tid + j * PF_GEMM_THREADS, r = idx >> 2, c = (idx & 3) * 8;
      const int gn = n0 + r, gk = kt * PF_BK + c;
      const bool ok = gn < N && gk < K;
      pf_cp_async16(&sb[buf][r * PF_LDS + c], ok ? W + (long long)gn * K + gk : W, ok);
    }
    pf_cp_async_commit();
  };

  load_a(0);
  load_b(0, 0);
  store_a(0);
  for (int kt = 0; kt < ktiles; ++kt) {
    const int buf = kt & 1;
    pf_cp_async_wait<0>();
    __syncthreads();  // step kt is in buf; everyone is done with buf ^ 1
    if (kt + 1 < ktiles) {
      load_b(kt + 1, buf ^ 1);
      load_a(kt + 1);
    }
#pragma unroll
    for (int kk = 0; kk < PF_BK; kk += 16) {
      unsigned af[4][4], bf[2][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
        pf_ldmatrix_x4(af[mi], &sa[buf][(wm + mi * 16 + (lane & 15)) * PF_LDS + kk + (lane >> 4) * 8]);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)
        pf_ldmatrix_x4(bf[nj], &sb[buf][(wn + nj * 16 + (lane & 7) + (lane >> 4) * 8) * PF_LDS + kk +
                                        ((lane >> 3) & 1) * 8]);
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          pf_mma(acc[mi][ni], af[mi], bf[ni >> 1][(ni & 1) * 2], bf[ni >> 1][(ni & 1) * 2 + 1]);
    }
    if (kt + 1 < ktiles) store_a(buf ^ 1);
  }

  // The reference's order: (x . w + b) + residual.
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + wm + mi * 16 + (lane >> 2) + (e >> 1) * 8;
        const int c = n0 + wn + ni * 8 + (lane & 3) * 2 + (e & 1);
        if (r >= M || c >= N) continue;
        float v = acc[mi][ni][e];
        if (bias) v += bias[c];
        const long long o = (long long)r * N + c;
        if (R) v += R[o];
        C[o] = v;
      }
}
