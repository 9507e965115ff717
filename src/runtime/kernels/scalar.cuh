// Scalar device rules both kernel sources share (the megakernel's and the prefill's): the bf16
// widening, SwiGLU's silu(gate) * up and the argmax order.

__device__ __forceinline__ float mk_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned)h) << 16);
}

// silu(gate) * up, in fp32 as the reference.
__device__ __forceinline__ float mk_silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// Argmax pairs: the first maximum wins; a NaN counts as the maximum (first NaN wins).
__device__ __forceinline__ void mk_better(float& v, int& i, float v2, int i2) {
  const bool n1 = v != v, n2 = v2 != v2;
  bool take;
  if (n1 || n2)
    take = (n1 && n2) ? i2 < i : n2;
  else
    take = v2 > v || (v2 == v && i2 < i);
  if (take) { v = v2; i = i2; }
}

