// NN bundle for CUDA: our own CUDA C kernels (every op but the cuDNN convolutions), built once
// per bundle context through the framework's program_build (NVRTC for the device's own
// architecture, cubin cache) and launched on the backend's stream. NVRTC sees no headers: the
// half types are 16-bit words converted here (f16 by the PTX cvt instruction, bf16 by bit
// operations), and every op computes in float (f32, f16, bf16) or double (f64).
//
// Entry points are extern "C" <kernel>_<dtype> (f32, f64, f16, bf16; LRN and dropout f32/f64
// only). Pointers travel as 8-byte scalars (device addresses with the tensor's byte offset
// applied); sizes as long long, geometry as int (the decoder keeps extents below 2^31, the
// bundle the padded extents H + 2 pad, W + 2 pad, which bound every plane coordinate computed
// here). Every elementwise kernel loops with a grid stride, so any grid size is correct.
#pragma once

namespace parenchyma::nn_cuda {

inline constexpr const char* kernel_source = R"CUDA(
typedef long long i64;
typedef unsigned long long u64;

struct h16 { unsigned short b; };
struct b16 { unsigned short b; };
struct alignas(16) v16 { unsigned int a, b, c, d; };

__device__ __forceinline__ float h16_to_f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short f_to_h16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ unsigned short f_to_b16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
  return (unsigned short)(u >> 16);
}

// Storage type S, compute type C.
template <class S> struct io;
template <> struct io<float> {
  typedef float C;
  static __device__ __forceinline__ float ld(float v) { return v; }
  static __device__ __forceinline__ float st(float v) { return v; }
};
template <> struct io<double> {
  typedef double C;
  static __device__ __forceinline__ double ld(double v) { return v; }
  static __device__ __forceinline__ double st(double v) { return v; }
};
template <> struct io<h16> {
  typedef float C;
  static __device__ __forceinline__ float ld(h16 v) { return h16_to_f(v.b); }
  static __device__ __forceinline__ h16 st(float v) { h16 r; r.b = f_to_h16(v); return r; }
};
template <> struct io<b16> {
  typedef float C;
  static __device__ __forceinline__ float ld(b16 v) { return __uint_as_float((unsigned)v.b << 16); }
  static __device__ __forceinline__ b16 st(float v) { b16 r; r.b = f_to_b16(v); return r; }
};

__device__ __forceinline__ float m_exp(float v) { return expf(v); }
__device__ __forceinline__ double m_exp(double v) { return exp(v); }
__device__ __forceinline__ float m_expm1(float v) { return expm1f(v); }
__device__ __forceinline__ double m_expm1(double v) { return expm1(v); }
__device__ __forceinline__ float m_log(float v) { return logf(v); }
__device__ __forceinline__ double m_log(double v) { return log(v); }
__device__ __forceinline__ float m_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ double m_tanh(double v) { return tanh(v); }
template <class C> __device__ __forceinline__ C neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return __uint_as_float(0xff800000u); }
template <> __device__ __forceinline__ double neg_inf<double>() {
  return __longlong_as_double((long long)0xfff0000000000000ull);
}

#define GRID_LOOP(i, count)                                                                    \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (count);                        \
       i += (i64)gridDim.x * blockDim.x)

// ---- activations: 0 sigmoid, 1 relu, 2 tanh, 3 elu --------------------------------------------
template <int A, class C> __device__ __forceinline__ C act_f(C x, C alpha) {
  if (A == 0) return C(1) / (C(1) + m_exp(-x));
  if (A == 1) return x < C(0) ? C(0) : x; // -0 and NaN pass through
  if (A == 2) return m_tanh(x);
  return x > C(0) ? x : alpha * m_expm1(x); // NaN: alpha * NaN
}
// f'(x) from the forward's output y.
template <int A, class C> __device__ __forceinline__ C act_d(C y, C alpha) {
  if (A == 0) return y * (C(1) - y);
  if (A == 1) return y > C(0) ? C(1) : C(0);
  if (A == 2) return C(1) - y * y;
  return y > C(0) ? C(1) : y + alpha;
}

// y = f(x) (x == y in place); vec: every pointer is 16-byte aligned, so whole v16 words move.
template <int A, class S>
__device__ void act_fwd(i64 n, typename io<S>::C alpha, const S* x, S* y, int vec) {
  typedef typename io<S>::C C;
  i64 done = 0;
  if (vec) {
    const int V = 16 / sizeof(S);
    const i64 nv = n / V;
    const v16* xv = reinterpret_cast<const v16*>(x);
    v16* yv = reinterpret_cast<v16*>(y);
    GRID_LOOP(i, nv) {
      v16 r = xv[i];
      S* e = reinterpret_cast<S*>(&r);
#pragma unroll
      for (int j = 0; j < V; ++j) e[j] = io<S>::st(act_f<A, C>(io<S>::ld(e[j]), alpha));
      yv[i] = r;
    }
    done = nv * V;
  }
  for (i64 i = done + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (i64)gridDim.x * blockDim.x)
    y[i] = io<S>::st(act_f<A, C>(io<S>::ld(x[i]), alpha));
}
// dx = dy * f'(y) (dy == dx in place).
template <int A, class S>
__device__ void act_bwd(i64 n, typename io<S>::C alpha, const S* y, const S* dy, S* dx, int vec) {
  typedef typename io<S>::C C;
  i64 done = 0;
  if (vec) {
    const int V = 16 / sizeof(S);
    const i64 nv = n / V;
    const v16* yv = reinterpret_cast<const v16*>(y);
    const v16* dyv = reinterpret_cast<const v16*>(dy);
    v16* dxv = reinterpret_cast<v16*>(dx);
    GRID_LOOP(i, nv) {
      v16 ry = yv[i], rd = dyv[i];
      const S* ey = reinterpret_cast<const S*>(&ry);
      S* ed = reinterpret_cast<S*>(&rd);
#pragma unroll
      for (int j = 0; j < V; ++j)
        ed[j] = io<S>::st(io<S>::ld(ed[j]) * act_d<A, C>(io<S>::ld(ey[j]), alpha));
      dxv[i] = rd;
    }
    done = nv * V;
  }
  for (i64 i = done + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (i64)gridDim.x * blockDim.x)
    dx[i] = io<S>::st(io<S>::ld(dy[i]) * act_d<A, C>(io<S>::ld(y[i]), alpha));
}

// ---- reductions -------------------------------------------------------------------------------
// Blocks of 256 threads (8 warps) for every kernel that reduces.
#define NN_BLOCK 256
#define NN_WARPS 8

template <class C> __device__ __forceinline__ C warp_sum(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// The running (max, sum of e^(x - max)) of an online softmax, folded with another.
template <class C> __device__ __forceinline__ void ms_fold(C& m, C& s, C m2, C s2) {
  const C mm = m2 > m ? m2 : m;
  const C a = m == mm ? s : s * m_exp(m - mm);
  const C b = m2 == mm ? s2 : s2 * m_exp(m2 - mm);
  m = mm;
  s = a + b;
}
template <class C> __device__ __forceinline__ void ms_add(C& m, C& s, C x) {
  if (x > m) {
    s = s * m_exp(m - x) + C(1);
    m = x;
  } else if (x != neg_inf<C>()) {
    s += m_exp(x - m); // NaN lands here and propagates
  }
}
template <class C> __device__ __forceinline__ void warp_ms(C& m, C& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const C m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    ms_fold(m, s, m2, s2);
  }
}
// Whole-block versions: every thread gets the result (shared memory reused after a barrier).
template <class C> __device__ __forceinline__ C block_sum(C v, C* sh) {
  v = warp_sum(v);
  const int w = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) sh[w] = v;
  __syncthreads();
  C t = sh[0];
#pragma unroll
  for (int i = 1; i < NN_WARPS; ++i) t += sh[i];
  __syncthreads();
  return t;
}
template <class C> __device__ __forceinline__ void block_ms(C& m, C& s, C* sh) {
  warp_ms(m, s);
  const int w = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    sh[w] = m;
    sh[NN_WARPS + w] = s;
  }
  __syncthreads();
  C mm = sh[0], ss = sh[NN_WARPS];
#pragma unroll
  for (int i = 1; i < NN_WARPS; ++i) ms_fold(mm, ss, sh[i], sh[NN_WARPS + i]);
  __syncthreads();
  m = mm;
  s = ss;
}

// ---- softmax: 0 softmax, 1 log_softmax, 2 softmax_grad, 3 log_softmax_grad -------------------
// inner == 1, rows of len contiguous values: one warp per row (per_warp) or one block per row.
// Forward: in = x, out = y; gradients: in = y, d = dy, out = dx.
template <int M, class S>
__device__ void softmax_rows(i64 outer, i64 len, int per_warp, const S* in, const S* d, S* out,
                             typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  const int lane = per_warp ? (threadIdx.x & 31) : threadIdx.x;
  const int width = per_warp ? 32 : NN_BLOCK;
  const i64 first = per_warp ? (i64)blockIdx.x * NN_WARPS + (threadIdx.x >> 5) : blockIdx.x;
  const i64 step = per_warp ? (i64)gridDim.x * NN_WARPS : gridDim.x;
  for (i64 row = first; row < outer; row += step) {
    const S* a = in + row * len;
    S* o = out + row * len;
    if (M < 2) {
      C m = neg_inf<C>(), s = C(0);
      for (i64 j = lane; j < len; j += width) ms_add(m, s, io<S>::ld(a[j]));
      if (per_warp) warp_ms(m, s);
      else block_ms(m, s, sh);
      if (m == -neg_inf<C>()) s = m - m; // a +inf maximum: e^(inf - inf) is NaN, as the reference
      if (M == 0) {
        for (i64 j = lane; j < len; j += width) o[j] = io<S>::st(m_exp(io<S>::ld(a[j]) - m) / s);
      } else {
        const C ls = m_log(s);
        for (i64 j = lane; j < len; j += width) o[j] = io<S>::st(io<S>::ld(a[j]) - m - ls);
      }
    } else {
      const S* g = d + row * len;
      C t = C(0);
      for (i64 j = lane; j < len; j += width)
        t += M == 2 ? io<S>::ld(g[j]) * io<S>::ld(a[j]) : io<S>::ld(g[j]);
      t = per_warp ? warp_sum(t) : block_sum(t, sh);
      for (i64 j = lane; j < len; j += width) {
        const C yv = io<S>::ld(a[j]), dv = io<S>::ld(g[j]);
        o[j] = io<S>::st(M == 2 ? yv * (dv - t) : dv - m_exp(yv) * t);
      }
    }
  }
}
// inner > 1: one thread per (outer, inner) column, stepping by inner (coalesced across columns).
template <int M, class S>
__device__ void softmax_cols(i64 outer, i64 len, i64 inner, const S* in, const S* d, S* out) {
  typedef typename io<S>::C C;
  GRID_LOOP(col, outer * inner) {
    const i64 base = (col / inner) * len * inner + col % inner;
    const S* a = in + base;
    S* o = out + base;
    if (M < 2) {
      C m = neg_inf<C>(), s = C(0);
      for (i64 j = 0; j < len; ++j) ms_add(m, s, io<S>::ld(a[j * inner]));
      if (m == -neg_inf<C>()) s = m - m; // a +inf maximum: e^(inf - inf) is NaN, as the reference
      if (M == 0) {
        for (i64 j = 0; j < len; ++j) o[j * inner] = io<S>::st(m_exp(io<S>::ld(a[j * inner]) - m) / s);
      } else {
        const C ls = m_log(s);
        for (i64 j = 0; j < len; ++j) o[j * inner] = io<S>::st(io<S>::ld(a[j * inner]) - m - ls);
      }
    } else {
      const S* g = d + base;
      C t = C(0);
      for (i64 j = 0; j < len; ++j)
        t += M == 2 ? io<S>::ld(g[j * inner]) * io<S>::ld(a[j * inner]) : io<S>::ld(g[j * inner]);
      for (i64 j = 0; j < len; ++j) {
        const C yv = io<S>::ld(a[j * inner]), dv = io<S>::ld(g[j * inner]);
        o[j * inner] = io<S>::st(M == 2 ? yv * (dv - t) : dv - m_exp(yv) * t);
      }
    }
  }
}

// ---- pooling (x planes H x W, pooled planes P x Q) --------------------------------------------
// Max over the window (padding excluded), the first maximum in row-major window order; NaN is
// larger than any number (the first NaN wins). y and/or idx may be null.
template <class S>
__device__ void pool_max(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh, int sw,
                         int ph, int pw, const S* x, S* y, int* idx) {
  typedef typename io<S>::C C;
  GRID_LOOP(i, total) {
    const int q = (int)(i % Q), p = (int)((i / Q) % P);
    const i64 nc = i / ((i64)P * Q);
    const S* xp = x + nc * H * W;
    const int h0 = p * sh - ph, w0 = q * sw - pw;
    const int hs = h0 < 0 ? 0 : h0, he = h0 + wh < H ? h0 + wh : H;
    const int ws = w0 < 0 ? 0 : w0, we = w0 + ww < W ? w0 + ww : W;
    C best = C(0);
    int bi = -1;
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) {
        const C v = io<S>::ld(xp[(i64)h * W + w]);
        if (bi < 0 || v > best || (v != v && best == best)) {
          best = v;
          bi = h * W + w;
        }
      }
    if (y) y[i] = io<S>::st(best);
    if (idx) idx[i] = bi;
  }
}
// The windows (p, q) that hold row h: p in [lo, hi].
__device__ __forceinline__ void covering(int h, int pad, int win, int stride, int P, int& lo,
                                         int& hi) {
  lo = h + pad < win ? 0 : (h + pad - win) / stride + 1;
  hi = (h + pad) / stride;
  if (hi > P - 1) hi = P - 1;
}
// dx[h, w] = the sum of dy over the windows whose first maximum (idx) is (h, w): a gather.
template <class S>
__device__ void pool_max_gather(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh,
                                int sw, int ph, int pw, const int* idx, const S* dy, S* dx) {
  typedef typename io<S>::C C;
  GRID_LOOP(i, total) {
    const int w = (int)(i % W), h = (int)((i / W) % H);
    const i64 nc = i / ((i64)H * W);
    int p0, p1, q0, q1;
    covering(h, ph, wh, sh, P, p0, p1);
    covering(w, pw, ww, sw, Q, q0, q1);
    const int me = h * W + w;
    const i64 base = nc * P * Q;
    C acc = C(0);
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q) {
        const i64 o = base + (i64)p * Q + q;
        if (idx[o] == me) acc += io<S>::ld(dy[o]);
      }
    dx[i] = io<S>::st(acc);
  }
}
__device__ __forceinline__ int window_count(int p, int q, int H, int W, int wh, int ww, int sh,
                                            int sw, int ph, int pw) {
  const int h0 = p * sh - ph, w0 = q * sw - pw;
  const int hs = h0 < 0 ? 0 : h0, he = h0 + wh < H ? h0 + wh : H;
  const int ws = w0 < 0 ? 0 : w0, we = w0 + ww < W ? w0 + ww : W;
  return (he - hs) * (we - ws);
}
template <class S>
__device__ void pool_avg(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh, int sw,
                         int ph, int pw, int include_padding, const S* x, S* y) {
  typedef typename io<S>::C C;
  GRID_LOOP(i, total) {
    const int q = (int)(i % Q), p = (int)((i / Q) % P);
    const i64 nc = i / ((i64)P * Q);
    const S* xp = x + nc * H * W;
    const int h0 = p * sh - ph, w0 = q * sw - pw;
    const int hs = h0 < 0 ? 0 : h0, he = h0 + wh < H ? h0 + wh : H;
    const int ws = w0 < 0 ? 0 : w0, we = w0 + ww < W ? w0 + ww : W;
    C acc = C(0);
    for (int h = hs; h < he; ++h)
      for (int w = ws; w < we; ++w) acc += io<S>::ld(xp[(i64)h * W + w]);
    const C div = include_padding ? C(wh) * C(ww) : C((he - hs) * (we - ws)); // no int overflow
    y[i] = io<S>::st(acc / div);
  }
}
template <class S>
__device__ void pool_avg_grad(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh,
                              int sw, int ph, int pw, int include_padding, const S* dy, S* dx) {
  typedef typename io<S>::C C;
  GRID_LOOP(i, total) {
    const int w = (int)(i % W), h = (int)((i / W) % H);
    const i64 nc = i / ((i64)H * W);
    int p0, p1, q0, q1;
    covering(h, ph, wh, sh, P, p0, p1);
    covering(w, pw, ww, sw, Q, q0, q1);
    const i64 base = nc * P * Q;
    C acc = C(0);
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q) {
        const C div = include_padding ? C(wh) * C(ww)
                                      : C(window_count(p, q, H, W, wh, ww, sh, sw, ph, pw));
        acc += io<S>::ld(dy[base + (i64)p * Q + q]) / div;
      }
    dx[i] = io<S>::st(acc);
  }
}
// From indices alone (no geometry to gather by): dx (or, for half types, a float buffer)
// zeroed first, then dy added at each index inside the plane by atomics.
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) {
#if __CUDA_ARCH__ >= 600
  atomicAdd(p, v);
#else
  unsigned long long* a = reinterpret_cast<unsigned long long*>(p);
  unsigned long long old = *a, assumed;
  do {
    assumed = old;
    old = atomicCAS(a, assumed, (unsigned long long)__double_as_longlong(
                                    __longlong_as_double((long long)assumed) + v));
  } while (assumed != old);
#endif
}
template <class S>
__device__ void pool_scatter(i64 total, i64 PQ, i64 HW, const int* idx, const S* dy,
                             typename io<S>::C* acc) {
  GRID_LOOP(o, total) {
    const int j = idx[o];
    if (j < 0 || (i64)j >= HW) continue; // outside the plane: adds nothing
    atomic_add(acc + (o / PQ) * HW + j, io<S>::ld(dy[o]));
  }
}
template <class S> __device__ void fill_zero(i64 n, S* x) {
  GRID_LOOP(i, n) x[i] = io<S>::st(typename io<S>::C(0));
}
template <class S> __device__ void from_float(i64 n, const float* a, S* x) {
  GRID_LOOP(i, n) x[i] = io<S>::st(a[i]);
}

// ---- convolution bias -------------------------------------------------------------------------
template <class S> __device__ void bias_add(i64 total, i64 PQ, int K, const S* b, S* y) {
  GRID_LOOP(i, total) {
    const int k = (int)((i / PQ) % K);
    y[i] = io<S>::st(io<S>::ld(y[i]) + io<S>::ld(b[k]));
  }
}
// One block per channel k (grid-stride over channels): db[k] = sum over n, p, q.
template <class S>
__device__ void bias_grad(int N, int K, i64 PQ, const S* dy, S* db, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  for (int k = blockIdx.x; k < K; k += gridDim.x) {
    C acc = C(0);
    for (i64 t = threadIdx.x; t < (i64)N * PQ; t += NN_BLOCK) {
      const i64 n = t / PQ, j = t % PQ;
      acc += io<S>::ld(dy[(n * K + k) * PQ + j]);
    }
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) db[k] = io<S>::st(acc);
  }
}

// ---- convolution without cuDNN: direct loops, accumulated in the compute type -----------------
struct conv_geom {
  int N, C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw, G;
};
template <class S>
__device__ void conv_fwd(i64 total, conv_geom g, const S* x, const S* w, S* y) {
  typedef typename io<S>::C C;
  const int Cg = g.C / g.G, Kg = g.K / g.G;
  GRID_LOOP(i, total) {
    const int q = (int)(i % g.Q), p = (int)((i / g.Q) % g.P), k = (int)((i / ((i64)g.Q * g.P)) % g.K);
    const i64 n = i / ((i64)g.Q * g.P * g.K);
    const int grp = k / Kg;
    C acc = C(0);
    for (int c = 0; c < Cg; ++c) {
      const S* xc = x + ((n * g.C + (i64)grp * Cg + c) * g.H) * g.W;
      const S* wc = w + (((i64)k * Cg + c) * g.R) * g.S;
      for (int r = 0; r < g.R; ++r) {
        const int h = p * g.sh - g.ph + r * g.dh;
        if (h < 0 || h >= g.H) continue;
        for (int s = 0; s < g.S; ++s) {
          const int u = q * g.sw - g.pw + s * g.dw;
          if (u < 0 || u >= g.W) continue;
          acc += io<S>::ld(xc[(i64)h * g.W + u]) * io<S>::ld(wc[(i64)r * g.S + s]);
        }
      }
    }
    y[i] = io<S>::st(acc);
  }
}
template <class S>
__device__ void conv_bwd_data(i64 total, conv_geom g, const S* w, const S* dy, S* dx) {
  typedef typename io<S>::C C;
  const int Cg = g.C / g.G, Kg = g.K / g.G;
  GRID_LOOP(i, total) {
    const int u = (int)(i % g.W), h = (int)((i / g.W) % g.H), c = (int)((i / ((i64)g.W * g.H)) % g.C);
    const i64 n = i / ((i64)g.W * g.H * g.C);
    const int grp = c / Cg, cl = c % Cg;
    C acc = C(0);
    for (int kk = 0; kk < Kg; ++kk) {
      const int k = grp * Kg + kk;
      const S* dyk = dy + ((n * g.K + k) * g.P) * g.Q;
      const S* wk = w + (((i64)k * Cg + cl) * g.R) * g.S;
      for (int r = 0; r < g.R; ++r) {
        const int t = h + g.ph - r * g.dh;
        if (t < 0 || t % g.sh != 0) continue;
        const int p = t / g.sh;
        if (p >= g.P) continue;
        for (int s = 0; s < g.S; ++s) {
          const int v = u + g.pw - s * g.dw;
          if (v < 0 || v % g.sw != 0) continue;
          const int q = v / g.sw;
          if (q >= g.Q) continue;
          acc += io<S>::ld(dyk[(i64)p * g.Q + q]) * io<S>::ld(wk[(i64)r * g.S + s]);
        }
      }
    }
    dx[i] = io<S>::st(acc);
  }
}
// One warp per filter element, its lanes over n, p, q.
template <class S>
__device__ void conv_bwd_filter(i64 total, conv_geom g, const S* x, const S* dy, S* dw) {
  typedef typename io<S>::C C;
  const int Cg = g.C / g.G, Kg = g.K / g.G;
  const int lane = threadIdx.x & 31;
  const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);
  const i64 terms = (i64)g.N * g.P * g.Q;
  for (i64 e = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); e < total; e += warps) {
    const int s = (int)(e % g.S), r = (int)((e / g.S) % g.R), cl = (int)((e / ((i64)g.S * g.R)) % Cg);
    const int k = (int)(e / ((i64)g.S * g.R * Cg));
    const int c = (k / Kg) * Cg + cl;
    C acc = C(0);
    for (i64 t = lane; t < terms; t += 32) {
      const int q = (int)(t % g.Q), p = (int)((t / g.Q) % g.P);
      const i64 n = t / ((i64)g.Q * g.P);
      const int h = p * g.sh - g.ph + r * g.dh, u = q * g.sw - g.pw + s * g.dw;
      if (h < 0 || h >= g.H || u < 0 || u >= g.W) continue;
      acc += io<S>::ld(x[((n * g.C + c) * g.H + h) * g.W + u]) *
             io<S>::ld(dy[((n * g.K + k) * g.P + p) * g.Q + q]);
    }
    acc = warp_sum(acc);
    if (lane == 0) dw[e] = io<S>::st(acc);
  }
}

// ---- LRN across channels (computed in double; f32 and f64) ------------------------------------
// One thread per (n, h, w) column. Window of c: [c - lo, c + hi] clipped to [0, C), lo = n/2,
// hi = (n-1)/2, summed directly for every c (as the reference does): a running sum would lose
// small squares after large ones (cancellation) and keep a NaN or Inf after it left the window.
template <class S>
__device__ __forceinline__ double lrn_scale(const S* x, i64 base, i64 plane, int C, int c, int lo,
                                            int hi, double an, double k) {
  const i64 c0 = (i64)c - lo < 0 ? 0 : (i64)c - lo;
  const i64 c1 = (i64)c + hi < (i64)C - 1 ? (i64)c + hi : (i64)C - 1;
  double sum = 0;
  for (i64 j = c0; j <= c1; ++j) {
    const double v = x[base + j * plane];
    sum += v * v;
  }
  return k + an * sum;
}
template <class S>
__device__ void lrn_fwd(i64 cols, int C, i64 plane, int n, double alpha, double beta, double k,
                        const S* x, S* y) {
  const int lo = n / 2, hi = (n - 1) / 2;
  const double an = alpha / n;
  GRID_LOOP(col, cols) {
    const i64 base = (col / plane) * C * plane + col % plane;
    for (int c = 0; c < C; ++c) {
      const i64 e = base + (i64)c * plane;
      const double s = lrn_scale(x, base, plane, C, c, lo, hi, an, k);
      y[e] = (S)((double)x[e] * pow(s, -beta));
    }
  }
}
// ws: 2 doubles per element (t = dy y / s, and dy s^-beta), written and read by the same thread.
template <class S>
__device__ void lrn_bwd(i64 cols, int C, i64 plane, int n, double alpha, double beta, double k,
                        const S* x, const S* y, const S* dy, S* dx, double* ws, i64 count) {
  const int lo = n / 2, hi = (n - 1) / 2;
  const double an = alpha / n, f = 2.0 * alpha * beta / n;
  GRID_LOOP(col, cols) {
    const i64 base = (col / plane) * C * plane + col % plane;
    for (int c = 0; c < C; ++c) {
      const i64 e = base + (i64)c * plane;
      const double s = lrn_scale(x, base, plane, C, c, lo, hi, an, k);
      const double d = dy[e];
      ws[e] = d * (double)y[e] / s;
      ws[count + e] = d * pow(s, -beta);
    }
    // dx[c] = dy s^-beta - f x[c] sum of t over c' with c in W(c'): c' in [c - hi, c + lo].
    for (int c = 0; c < C; ++c) {
      const i64 e = base + (i64)c * plane;
      const i64 c0 = (i64)c - hi < 0 ? 0 : (i64)c - hi;
      const i64 c1 = (i64)c + lo < (i64)C - 1 ? (i64)c + lo : (i64)C - 1;
      double ts = 0;
      for (i64 j = c0; j <= c1; ++j) ts += ws[base + j * plane];
      dx[e] = (S)(ws[count + e] - f * (double)x[e] * ts);
    }
  }
}

// ---- dropout (splitmix64, pcy_nn.h) -----------------------------------------------------------
template <class S>
__device__ void dropout_fwd(i64 n, u64 seed, unsigned int threshold, S scale, const S* x, S* y,
                            unsigned char* mask) {
  GRID_LOOP(i, n) {
    u64 z = seed + ((u64)i + 1ull) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    const bool keep = (z >> 40) >= (u64)threshold;
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : S(0);
  }
}
template <class S>
__device__ void dropout_bwd(i64 n, S scale, const S* dy, const unsigned char* mask, S* dx) {
  GRID_LOOP(i, n) dx[i] = mask[i] != 0 ? dy[i] * scale : S(0);
}

// ---- entry points -----------------------------------------------------------------------------
#define NN_ACT(A, NAME, S, D)                                                                  \
  extern "C" __global__ void NAME##_fwd_##D(i64 n, io<S>::C alpha, const S* x, S* y,           \
                                            int vec) {                                         \
    act_fwd<A, S>(n, alpha, x, y, vec);                                                        \
  }                                                                                            \
  extern "C" __global__ void NAME##_bwd_##D(i64 n, io<S>::C alpha, const S* y, const S* dy,    \
                                            S* dx, int vec) {                                  \
    act_bwd<A, S>(n, alpha, y, dy, dx, vec);                                                   \
  }
#define NN_SOFTMAX(M, NAME, S, D)                                                              \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                       \
      NAME##_rows_##D(i64 outer, i64 len, int per_warp, const S* in, const S* d, S* out) {     \
    __shared__ io<S>::C sh[2 * NN_WARPS];                                                      \
    softmax_rows<M, S>(outer, len, per_warp, in, d, out, sh);                                  \
  }                                                                                            \
  extern "C" __global__ void NAME##_cols_##D(i64 outer, i64 len, i64 inner, const S* in,       \
                                             const S* d, S* out) {                             \
    softmax_cols<M, S>(outer, len, inner, in, d, out);                                         \
  }
#define NN_POOL_GEOM int H, int W, int P, int Q, int wh, int ww, int sh, int sw, int ph, int pw
#define NN_POOL_PASS H, W, P, Q, wh, ww, sh, sw, ph, pw
#define NN_KERNELS(S, D)                                                                       \
  NN_ACT(0, sigmoid, S, D)                                                                     \
  NN_ACT(1, relu, S, D)                                                                        \
  NN_ACT(2, tanh, S, D)                                                                        \
  NN_ACT(3, elu, S, D)                                                                         \
  NN_SOFTMAX(0, softmax, S, D)                                                                 \
  NN_SOFTMAX(1, log_softmax, S, D)                                                             \
  NN_SOFTMAX(2, softmax_grad, S, D)                                                            \
  NN_SOFTMAX(3, log_softmax_grad, S, D)                                                        \
  extern "C" __global__ void pool_max_##D(i64 total, NN_POOL_GEOM, const S* x, S* y,           \
                                          int* idx) {                                          \
    pool_max<S>(total, NN_POOL_PASS, x, y, idx);                                               \
  }                                                                                            \
  extern "C" __global__ void pool_max_gather_##D(i64 total, NN_POOL_GEOM, const int* idx,      \
                                                 const S* dy, S* dx) {                         \
    pool_max_gather<S>(total, NN_POOL_PASS, idx, dy, dx);                                      \
  }                                                                                            \
  extern "C" __global__ void pool_avg_##D(i64 total, NN_POOL_GEOM, int include_padding,        \
                                          const S* x, S* y) {                                  \
    pool_avg<S>(total, NN_POOL_PASS, include_padding, x, y);                                   \
  }                                                                                            \
  extern "C" __global__ void pool_avg_grad_##D(i64 total, NN_POOL_GEOM, int include_padding,   \
                                               const S* dy, S* dx) {                           \
    pool_avg_grad<S>(total, NN_POOL_PASS, include_padding, dy, dx);                            \
  }                                                                                            \
  extern "C" __global__ void pool_scatter_##D(i64 total, i64 PQ, i64 HW, const int* idx,       \
                                              const S* dy, io<S>::C* acc) {                    \
    pool_scatter<S>(total, PQ, HW, idx, dy, acc);                                              \
  }                                                                                            \
  extern "C" __global__ void fill_zero_##D(i64 n, S* x) { fill_zero<S>(n, x); }                \
  extern "C" __global__ void bias_add_##D(i64 total, i64 PQ, int K, const S* b, S* y) {        \
    bias_add<S>(total, PQ, K, b, y);                                                           \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                       \
      bias_grad_##D(int N, int K, i64 PQ, const S* dy, S* db) {                                \
    __shared__ io<S>::C sh[NN_WARPS];                                                          \
    bias_grad<S>(N, K, PQ, dy, db, sh);                                                        \
  }                                                                                            \
  extern "C" __global__ void conv_fwd_##D(i64 total, conv_geom g, const S* x, const S* w,      \
                                          S* y) {                                              \
    conv_fwd<S>(total, g, x, w, y);                                                            \
  }                                                                                            \
  extern "C" __global__ void conv_bwd_data_##D(i64 total, conv_geom g, const S* w,             \
                                               const S* dy, S* dx) {                           \
    conv_bwd_data<S>(total, g, w, dy, dx);                                                     \
  }                                                                                            \
  extern "C" __global__ void conv_bwd_filter_##D(i64 total, conv_geom g, const S* x,           \
                                                 const S* dy, S* dw) {                         \
    conv_bwd_filter<S>(total, g, x, dy, dw);                                                   \
  }
#define NN_WIDE_KERNELS(S, D)                                                                  \
  extern "C" __global__ void lrn_fwd_##D(i64 cols, int C, i64 plane, int n, double alpha,      \
                                         double beta, double k, const S* x, S* y) {            \
    lrn_fwd<S>(cols, C, plane, n, alpha, beta, k, x, y);                                       \
  }                                                                                            \
  extern "C" __global__ void lrn_bwd_##D(i64 cols, int C, i64 plane, int n, double alpha,      \
                                         double beta, double k, const S* x, const S* y,        \
                                         const S* dy, S* dx, double* ws, i64 count) {          \
    lrn_bwd<S>(cols, C, plane, n, alpha, beta, k, x, y, dy, dx, ws, count);                    \
  }                                                                                            \
  extern "C" __global__ void dropout_fwd_##D(i64 n, u64 seed, unsigned int threshold, S scale, \
                                             const S* x, S* y, unsigned char* mask) {          \
    dropout_fwd<S>(n, seed, threshold, scale, x, y, mask);                                     \
  }                                                                                            \
  extern "C" __global__ void dropout_bwd_##D(i64 n, S scale, const S* dy,                      \
                                             const unsigned char* mask, S* dx) {               \
    dropout_bwd<S>(n, scale, dy, mask, dx);                                                    \
  }

NN_KERNELS(float, f32)
NN_KERNELS(double, f64)
NN_KERNELS(h16, f16)
NN_KERNELS(b16, bf16)
NN_WIDE_KERNELS(float, f32)
NN_WIDE_KERNELS(double, f64)
extern "C" __global__ void from_float_f16(i64 n, const float* a, h16* x) { from_float<h16>(n, a, x); }
extern "C" __global__ void from_float_bf16(i64 n, const float* a, b16* x) { from_float<b16>(n, a, x); }
)CUDA";

} // namespace parenchyma::nn_cuda
