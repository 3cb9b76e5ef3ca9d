
typedef unsigned long long u64;

struct alignas(16) v16 { unsigned int a, b, c, d; };

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
template <class C> __device__ __forceinline__ C m_nan();
template <> __device__ __forceinline__ float m_nan<float>() { return __uint_as_float(0x7fc00000u); }
template <> __device__ __forceinline__ double m_nan<double>() {
  return __longlong_as_double((long long)0x7ff8000000000000ull);
}

// Blocks of 256 threads (8 warps) for every kernel but the softmax row kernels (their own sizes).
#define NN_BLOCK 256
#define NN_WARPS 8

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

// Streaming loops: blocks of NN_BLOCK threads; a block takes a tile of EW_U * NN_BLOCK items
// (T: a 16-byte word v16, or one element S) per step, its threads EW_U items each, coalesced:
// all EW_U loads are issued before any store (x == y in place is safe: each item is read and
// written by the same thread). Items after the last whole tile go one per thread.
#define EW_U 4
template <int A, class S, class T>
__device__ __forceinline__ void act_fwd_t(i64 nv, typename io<S>::C alpha, const T* x, T* y) {
  typedef typename io<S>::C C;
  const int V = sizeof(T) / sizeof(S);
  const i64 tile = EW_U * NN_BLOCK, tiles = nv / tile;
  for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
    const i64 b = t * tile + threadIdx.x;
    T r[EW_U];
#pragma unroll
    for (int u = 0; u < EW_U; ++u) r[u] = x[b + u * NN_BLOCK];
#pragma unroll
    for (int u = 0; u < EW_U; ++u) {
      S* e = reinterpret_cast<S*>(&r[u]);
#pragma unroll
      for (int j = 0; j < V; ++j) e[j] = io<S>::st(act_f<A, C>(io<S>::ld(e[j]), alpha));
    }
#pragma unroll
    for (int u = 0; u < EW_U; ++u) y[b + u * NN_BLOCK] = r[u];
  }
  for (i64 i = tiles * tile + (i64)blockIdx.x * NN_BLOCK + threadIdx.x; i < nv;
       i += (i64)gridDim.x * NN_BLOCK) {
    T r = x[i];
    S* e = reinterpret_cast<S*>(&r);
#pragma unroll
    for (int j = 0; j < V; ++j) e[j] = io<S>::st(act_f<A, C>(io<S>::ld(e[j]), alpha));
    y[i] = r;
  }
}
template <int A, class S, class T>
__device__ __forceinline__ void act_bwd_t(i64 nv, typename io<S>::C alpha, const T* y,
                                          const T* dy, T* dx) {
  typedef typename io<S>::C C;
  const int V = sizeof(T) / sizeof(S);
  const i64 tile = EW_U * NN_BLOCK, tiles = nv / tile;
  for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
    const i64 b = t * tile + threadIdx.x;
    T ry[EW_U], rd[EW_U];
#pragma unroll
    for (int u = 0; u < EW_U; ++u) {
      ry[u] = y[b + u * NN_BLOCK];
      rd[u] = dy[b + u * NN_BLOCK];
    }
#pragma unroll
    for (int u = 0; u < EW_U; ++u) {
      const S* ey = reinterpret_cast<const S*>(&ry[u]);
      S* ed = reinterpret_cast<S*>(&rd[u]);
#pragma unroll
      for (int j = 0; j < V; ++j)
        ed[j] = io<S>::st(io<S>::ld(ed[j]) * act_d<A, C>(io<S>::ld(ey[j]), alpha));
    }
#pragma unroll
    for (int u = 0; u < EW_U; ++u) dx[b + u * NN_BLOCK] = rd[u];
  }
  for (i64 i = tiles * tile + (i64)blockIdx.x * NN_BLOCK + threadIdx.x; i < nv;
       i += (i64)gridDim.x * NN_BLOCK) {
    T ry = y[i], rd = dy[i];
    const S* ey = reinterpret_cast<const S*>(&ry);
    S* ed = reinterpret_cast<S*>(&rd);
#pragma unroll
    for (int j = 0; j < V; ++j)
      ed[j] = io<S>::st(io<S>::ld(ed[j]) * act_d<A, C>(io<S>::ld(ey[j]), alpha));
    dx[i] = rd;
  }
}
// y = f(x) (x == y in place); vec: every pointer is 16-byte aligned, so whole v16 words move and
// the last n % V elements go one per thread.
template <int A, class S>
__device__ void act_fwd(i64 n, typename io<S>::C alpha, const S* x, S* y, int vec) {
  typedef typename io<S>::C C;
  if (!vec) {
    act_fwd_t<A, S, S>(n, alpha, x, y);
    return;
  }
  const int V = 16 / sizeof(S);
  const i64 nv = n / V;
  act_fwd_t<A, S, v16>(nv, alpha, reinterpret_cast<const v16*>(x), reinterpret_cast<v16*>(y));
  const i64 i = nv * V + (i64)blockIdx.x * NN_BLOCK + threadIdx.x;
  if (i < n) y[i] = io<S>::st(act_f<A, C>(io<S>::ld(x[i]), alpha));
}
// dx = dy * f'(y) (dy == dx in place).
template <int A, class S>
__device__ void act_bwd(i64 n, typename io<S>::C alpha, const S* y, const S* dy, S* dx, int vec) {
  typedef typename io<S>::C C;
  if (!vec) {
    act_bwd_t<A, S, S>(n, alpha, y, dy, dx);
    return;
  }
  const int V = 16 / sizeof(S);
  const i64 nv = n / V;
  act_bwd_t<A, S, v16>(nv, alpha, reinterpret_cast<const v16*>(y),
                       reinterpret_cast<const v16*>(dy), reinterpret_cast<v16*>(dx));
  const i64 i = nv * V + (i64)blockIdx.x * NN_BLOCK + threadIdx.x;
  if (i < n) dx[i] = io<S>::st(io<S>::ld(dy[i]) * act_d<A, C>(io<S>::ld(y[i]), alpha));
}

// ---- reductions -------------------------------------------------------------------------------

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
// Two sums at once (one pair of barriers); sh holds 2 NN_WARPS values.
template <class C> __device__ __forceinline__ void block_sum2(C& a, C& b, C* sh) {
  a = warp_sum(a);
  b = warp_sum(b);
  const int w = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    sh[w] = a;
    sh[NN_WARPS + w] = b;
  }
  __syncthreads();
  C ta = sh[0], tb = sh[NN_WARPS];
#pragma unroll
  for (int i = 1; i < NN_WARPS; ++i) {
    ta += sh[i];
    tb += sh[NN_WARPS + i];
  }
  __syncthreads();
  a = ta;
  b = tb;
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
        const C r = C(1) / s;
        for (i64 j = lane; j < len; j += width) o[j] = io<S>::st(m_exp(io<S>::ld(a[j]) - m) * r);
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
// The same rows held in registers: the input is read once. NT threads per block; W (1) one warp
// per row, NT / 32 rows per block, or (0) one block per row; E values per thread (a compile-time
// count, so the row lives in registers), so rows up to (W ? 32 : NT) * E long. vec: the rows'
// starts and lengths are whole 16-byte words: thread t holds words t, t + width, ... (E / V of
// them); otherwise elements t, t + width, ... Padding: -inf (forward; not summed) or 0 (grads).
// Same rules as above: the maximum ignores NaN, -inf adds nothing to the sum, a NaN makes it NaN,
// a +inf maximum makes it NaN.
template <class C> __device__ __forceinline__ C max_of(C a, C b) { return b > a ? b : a; }
template <class C> __device__ __forceinline__ C warp_max(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max_of(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Whole-block sum or max of NW warps (sh: 32 values), every thread gets it.
template <int NW, int MAX, class C> __device__ __forceinline__ C block_red(C v, C* sh) {
  v = MAX ? warp_max(v) : warp_sum(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  C t = sh[0];
#pragma unroll
  for (int i = 1; i < NW; ++i) t = MAX ? max_of(t, sh[i]) : t + sh[i];
  __syncthreads();
  return t;
}
template <class S, int E, int WIDTH>
__device__ __forceinline__ void row_load(const S* p, int len, int lane, int vec,
                                         typename io<S>::C pad, typename io<S>::C* a) {
  const int V = 16 / sizeof(S);
  if (vec) {
    const v16* pv = reinterpret_cast<const v16*>(p);
    const int words = len / V;
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
      const int c = k * WIDTH + lane;
      if (c < words) {
        v16 r = pv[c];
        const S* e = reinterpret_cast<const S*>(&r);
#pragma unroll
        for (int j = 0; j < V; ++j) a[k * V + j] = io<S>::ld(e[j]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) a[k * V + j] = pad;
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const int j = k * WIDTH + lane;
      a[k] = j < len ? io<S>::ld(p[j]) : pad;
    }
  }
}
template <class S, int E, int WIDTH>
__device__ __forceinline__ void row_store(S* p, int len, int lane, int vec,
                                          const typename io<S>::C* a) {
  const int V = 16 / sizeof(S);
  if (vec) {
    v16* pv = reinterpret_cast<v16*>(p);
    const int words = len / V;
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
      const int c = k * WIDTH + lane;
      if (c < words) {
        v16 r;
        S* e = reinterpret_cast<S*>(&r);
#pragma unroll
        for (int j = 0; j < V; ++j) e[j] = io<S>::st(a[k * V + j]);
        pv[c] = r;
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const int j = k * WIDTH + lane;
      if (j < len) p[j] = io<S>::st(a[k]);
    }
  }
}
template <int M, class S, int NT, int W, int E>
__device__ __forceinline__ void softmax_reg(i64 outer, int len, int vec, const S* in, const S* d,
                                            S* out, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  const int WIDTH = W ? 32 : NT;
  const int lane = W ? (threadIdx.x & 31) : threadIdx.x;
  const i64 first = W ? (i64)blockIdx.x * (NT / 32) + (threadIdx.x >> 5) : blockIdx.x;
  const i64 step = W ? (i64)gridDim.x * (NT / 32) : gridDim.x;
  for (i64 row = first; row < outer; row += step) {
    const i64 base = row * len;
    C a[E];
    if (M < 2) {
      row_load<S, E, WIDTH>(in + base, len, lane, vec, neg_inf<C>(), a);
      C m = neg_inf<C>();
#pragma unroll
      for (int k = 0; k < E; ++k) m = max_of(m, a[k]);
      m = W ? warp_max(m) : block_red<NT / 32, 1>(m, sh);
      C s = C(0);
#pragma unroll
      for (int k = 0; k < E; ++k) {
        const C e = m_exp(a[k] - m);
        if (a[k] != neg_inf<C>()) s += e; // NaN lands here and propagates
        if (M == 0) a[k] = e;
      }
      s = W ? warp_sum(s) : block_red<NT / 32, 0>(s, sh);
      if (m == -neg_inf<C>()) s = m - m; // a +inf maximum: e^(inf - inf) is NaN, as the reference
      if (M == 0) {
        const C r = C(1) / s; // one division a row: a division per value was a fifth of the time
#pragma unroll
        for (int k = 0; k < E; ++k) a[k] = a[k] * r;
      } else {
        const C ls = m_log(s);
#pragma unroll
        for (int k = 0; k < E; ++k) a[k] = a[k] - m - ls;
      }
    } else {
      C g[E];
      row_load<S, E, WIDTH>(in + base, len, lane, vec, C(0), a);
      row_load<S, E, WIDTH>(d + base, len, lane, vec, C(0), g);
      C t = C(0);
#pragma unroll
      for (int k = 0; k < E; ++k) t += M == 2 ? g[k] * a[k] : g[k];
      t = W ? warp_sum(t) : block_red<NT / 32, 0>(t, sh);
#pragma unroll
      for (int k = 0; k < E; ++k) a[k] = M == 2 ? a[k] * (g[k] - t) : g[k] - m_exp(a[k]) * t;
    }
    row_store<S, E, WIDTH>(out + base, len, lane, vec, a);
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
        const C r = C(1) / s;
        for (i64 j = 0; j < len; ++j) o[j * inner] = io<S>::st(m_exp(io<S>::ld(a[j * inner]) - m) * r);
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
// Every kernel runs on 32-bit unsigned indices when the count allows (the divisions by the
// extents are the costly part), else on 64-bit ones: body_i<S, I>, dispatched by the entry.
#define IDX_LOOP(I, i, count)                                                                  \
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (count); i += (I)gridDim.x * blockDim.x)
#define IDX_DISPATCH(F, total, ...)                                                            \
  if ((total) <= 0x7fffffffll)                                                                 \
    F<S, unsigned>((unsigned)(total), __VA_ARGS__);                                            \
  else                                                                                         \
    F<S, u64>((u64)(total), __VA_ARGS__)
// Max over the window (padding excluded), the first maximum in row-major window order; NaN is
// larger than any number (the first NaN wins). y and/or idx may be null.
template <class S, class I>
__device__ __forceinline__ void pool_max_i(I total, int H, int W, int P, int Q, int wh, int ww, int sh, int sw,
                         int ph, int pw, const S* x, S* y, int* idx) {
  typedef typename io<S>::C C;
  IDX_LOOP(I, i, total) {
    const I r = i / (I)Q, nc = r / (I)P;
    const int q = (int)(i - r * (I)Q), p = (int)(r - nc * (I)P);
    const S* xp = x + (i64)nc * H * W;
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
template <class S, class I>
__device__ __forceinline__ void pool_max_gather_i(I total, int H, int W, int P, int Q, int wh, int ww, int sh,
                                int sw, int ph, int pw, const int* idx, const S* dy, S* dx) {
  typedef typename io<S>::C C;
  IDX_LOOP(I, i, total) {
    const I r = i / (I)W, nc = r / (I)H;
    const int w = (int)(i - r * (I)W), h = (int)(r - nc * (I)H);
    int p0, p1, q0, q1;
    covering(h, ph, wh, sh, P, p0, p1);
    covering(w, pw, ww, sw, Q, q0, q1);
    const int me = h * W + w;
    const i64 base = (i64)nc * P * Q;
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
template <class S, class I>
__device__ __forceinline__ void pool_avg_i(I total, int H, int W, int P, int Q, int wh, int ww, int sh, int sw,
                         int ph, int pw, int include_padding, const S* x, S* y) {
  typedef typename io<S>::C C;
  IDX_LOOP(I, i, total) {
    const I r = i / (I)Q, nc = r / (I)P;
    const int q = (int)(i - r * (I)Q), p = (int)(r - nc * (I)P);
    const S* xp = x + (i64)nc * H * W;
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
template <class S, class I>
__device__ __forceinline__ void pool_avg_grad_i(I total, int H, int W, int P, int Q, int wh, int ww, int sh,
                              int sw, int ph, int pw, int include_padding, const S* dy, S* dx) {
  typedef typename io<S>::C C;
  IDX_LOOP(I, i, total) {
    const I r = i / (I)W, nc = r / (I)H;
    const int w = (int)(i - r * (I)W), h = (int)(r - nc * (I)H);
    int p0, p1, q0, q1;
    covering(h, ph, wh, sh, P, p0, p1);
    covering(w, pw, ww, sw, Q, q0, q1);
    const i64 base = (i64)nc * P * Q;
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
template <class S>
__device__ void pool_max(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh, int sw,
                         int ph, int pw, const S* x, S* y, int* idx) {
  IDX_DISPATCH(pool_max_i, total, H, W, P, Q, wh, ww, sh, sw, ph, pw, x, y, idx);
}
template <class S>
__device__ void pool_max_gather(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh,
                                int sw, int ph, int pw, const int* idx, const S* dy, S* dx) {
  IDX_DISPATCH(pool_max_gather_i, total, H, W, P, Q, wh, ww, sh, sw, ph, pw, idx, dy, dx);
}
template <class S>
__device__ void pool_avg(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh, int sw,
                         int ph, int pw, int include_padding, const S* x, S* y) {
  IDX_DISPATCH(pool_avg_i, total, H, W, P, Q, wh, ww, sh, sw, ph, pw, include_padding, x, y);
}
template <class S>
__device__ void pool_avg_grad(i64 total, int H, int W, int P, int Q, int wh, int ww, int sh,
                              int sw, int ph, int pw, int include_padding, const S* dy, S* dx) {
  IDX_DISPATCH(pool_avg_grad_i, total, H, W, P, Q, wh, ww, sh, sw, ph, pw, include_padding, dy,
               dx);
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
// Window of c: [c - lo, c + hi] clipped to [0, C), lo = n/2, hi = (n-1)/2, summed directly for
// every c (as the reference does): a running sum would lose small squares after large ones
// (cancellation) and keep a NaN or Inf after it left the window. One thread per element (the
// windows' neighbours are cache hits).
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
// One thread per element (count of them); base: the element's channel-0 index in its column.
template <class S, class I>
__device__ __forceinline__ void lrn_fwd_i(I count, int C, i64 plane, int n, double alpha,
                                          double beta, double k, const S* x, S* y) {
  const int lo = n / 2, hi = (n - 1) / 2;
  const double an = alpha / n;
  IDX_LOOP(I, e, count) {
    const I r = e / (I)plane, nn = r / (I)C;
    const int c = (int)(r - nn * (I)C);
    const i64 base = (i64)e - (i64)c * plane;
    const double s = lrn_scale(x, base, plane, C, c, lo, hi, an, k);
    y[e] = (S)((double)x[e] * pow(s, -beta));
  }
}
template <class S>
__device__ void lrn_fwd(i64 count, int C, i64 plane, int n, double alpha, double beta, double k,
                        const S* x, S* y) {
  IDX_DISPATCH(lrn_fwd_i, count, C, plane, n, alpha, beta, k, x, y);
}
// Two launches over the elements: phase 0 fills ws (2 doubles per element: t = dy y / s, and
// dy s^-beta), phase 1 computes dx from it:
// dx[c] = dy s^-beta - f x[c] sum of t over c' with c in W(c'): c' in [c - hi, c + lo].
template <class S, class I>
__device__ __forceinline__ void lrn_bwd_i(I count, int C, i64 plane, int n, double alpha,
                                          double beta, double k, const S* x, const S* y,
                                          const S* dy, S* dx, double* ws, int phase) {
  const int lo = n / 2, hi = (n - 1) / 2;
  const double an = alpha / n, f = 2.0 * alpha * beta / n;
  IDX_LOOP(I, e, count) {
    const I r = e / (I)plane, nn = r / (I)C;
    const int c = (int)(r - nn * (I)C);
    const i64 base = (i64)e - (i64)c * plane;
    if (phase == 0) {
      const double s = lrn_scale(x, base, plane, C, c, lo, hi, an, k);
      const double d = dy[e];
      ws[e] = d * (double)y[e] / s;
      ws[(i64)count + e] = d * pow(s, -beta);
    } else {
      const i64 c0 = (i64)c - hi < 0 ? 0 : (i64)c - hi;
      const i64 c1 = (i64)c + lo < (i64)C - 1 ? (i64)c + lo : (i64)C - 1;
      double ts = 0;
      for (i64 j = c0; j <= c1; ++j) ts += ws[base + j * plane];
      dx[e] = (S)(ws[(i64)count + e] - f * (double)x[e] * ts);
    }
  }
}
template <class S>
__device__ void lrn_bwd(i64 count, int C, i64 plane, int n, double alpha, double beta, double k,
                        const S* x, const S* y, const S* dy, S* dx, double* ws, int phase) {
  IDX_DISPATCH(lrn_bwd_i, count, C, plane, n, alpha, beta, k, x, y, dy, dx, ws, phase);
}

// ---- dropout (splitmix64, pcy_nn.h) -----------------------------------------------------------
// vec: x, y (dy, dx) 16-byte aligned and the mask 4-byte aligned: groups of 4 elements (one or
// two 16-byte words and 4 mask bytes) a thread, the last n % 4 elements one per thread.
template <class S> struct alignas(16) quad { S v[4]; };
struct alignas(4) mask4 { unsigned char v[4]; };
__device__ __forceinline__ bool dropout_keep(u64 seed, unsigned int threshold, i64 i) {
  u64 z = seed + ((u64)i + 1ull) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return (z >> 40) >= (u64)threshold;
}
template <class S>
__device__ void dropout_fwd(i64 n, u64 seed, unsigned int threshold, S scale, const S* x, S* y,
                            unsigned char* mask, int vec) {
  i64 done = 0;
  if (vec) {
    const i64 ng = n / 4;
    const quad<S>* xq = reinterpret_cast<const quad<S>*>(x);
    quad<S>* yq = reinterpret_cast<quad<S>*>(y);
    mask4* mq = reinterpret_cast<mask4*>(mask);
    GRID_LOOP(g, ng) {
      quad<S> r = xq[g];
      mask4 m;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool keep = dropout_keep(seed, threshold, 4 * g + j);
        m.v[j] = keep ? 1 : 0;
        r.v[j] = keep ? r.v[j] * scale : S(0);
      }
      mq[g] = m;
      yq[g] = r;
    }
    done = ng * 4;
  }
  for (i64 i = done + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (i64)gridDim.x * blockDim.x) {
    const bool keep = dropout_keep(seed, threshold, i);
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : S(0);
  }
}
template <class S>
__device__ void dropout_bwd(i64 n, S scale, const S* dy, const unsigned char* mask, S* dx,
                            int vec) {
  i64 done = 0;
  if (vec) {
    const i64 ng = n / 4;
    const quad<S>* dq = reinterpret_cast<const quad<S>*>(dy);
    quad<S>* xq = reinterpret_cast<quad<S>*>(dx);
    const mask4* mq = reinterpret_cast<const mask4*>(mask);
    GRID_LOOP(g, ng) {
      quad<S> r = dq[g];
      const mask4 m = mq[g];
#pragma unroll
      for (int j = 0; j < 4; ++j) r.v[j] = m.v[j] != 0 ? r.v[j] * scale : S(0);
      xq[g] = r;
    }
    done = ng * 4;
  }
  for (i64 i = done + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (i64)gridDim.x * blockDim.x)
    dx[i] = mask[i] != 0 ? dy[i] * scale : S(0);
}

// ---- layer_norm / rms_norm (pcy_nn.h) ----------------------------------------------------------
// One block of NN_BLOCK threads per row, two passes (the mean, then the squares about it), in
// the compute type C (the statistics dtype). mean and rstd may be null (not saved).
__device__ __forceinline__ float m_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double m_sqrt(double v) { return sqrt(v); }
template <class S>
__device__ void norm_fwd(i64 outer, i64 n, int layer, typename io<S>::C eps, const S* x, const S* w,
                         const S* b, S* y, typename io<S>::C* mean, typename io<S>::C* rstd,
                         typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  for (i64 r = blockIdx.x; r < outer; r += gridDim.x) {
    const S* xr = x + r * n;
    S* yr = y + r * n;
    C mu = C(0);
    if (layer) {
      C acc = C(0);
      for (i64 j = threadIdx.x; j < n; j += NN_BLOCK)
        acc += io<S>::ld(xr[j]);
      mu = block_sum(acc, sh) / C(n);
    }
    C acc = C(0);
    for (i64 j = threadIdx.x; j < n; j += NN_BLOCK) {
      const C d = io<S>::ld(xr[j]) - mu;
      acc += d * d;
    }
    const C rs = C(1) / m_sqrt(block_sum(acc, sh) / C(n) + eps);
    for (i64 j = threadIdx.x; j < n; j += NN_BLOCK) {
      C h = (io<S>::ld(xr[j]) - mu) * rs * io<S>::ld(w[j]);
      if (layer) h += io<S>::ld(b[j]);
      yr[j] = io<S>::st(h);
    }
    if (threadIdx.x == 0) {
      if (mean) mean[r] = mu;
      if (rstd) rstd[r] = rs;
    }
  }
}
// dx per row: rstd (g - mean(g) - xhat mean(g xhat)), g = dy w (rms_norm: no mean(g) term).
template <class S>
__device__ void norm_bwd_row(i64 outer, i64 n, int layer, const S* x, const S* w,
                             const typename io<S>::C* mean, const typename io<S>::C* rstd,
                             const S* dy, S* dx, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  for (i64 r = blockIdx.x; r < outer; r += gridDim.x) {
    const S* xr = x + r * n;
    const S* dyr = dy + r * n;
    S* dxr = dx + r * n;
    const C mu = layer ? mean[r] : C(0), rs = rstd[r];
    C sg = C(0), sgx = C(0);
    for (i64 j = threadIdx.x; j < n; j += NN_BLOCK) {
      const C g = io<S>::ld(dyr[j]) * io<S>::ld(w[j]);
      sg += g;
      sgx += g * ((io<S>::ld(xr[j]) - mu) * rs);
    }
    block_sum2(sg, sgx, sh);
    sg = layer ? sg / C(n) : C(0);
    sgx = sgx / C(n);
    for (i64 j = threadIdx.x; j < n; j += NN_BLOCK) {
      const C g = io<S>::ld(dyr[j]) * io<S>::ld(w[j]);
      dxr[j] = io<S>::st(rs * (g - sg - ((io<S>::ld(xr[j]) - mu) * rs) * sgx));
    }
  }
}
// Rows held in registers (n <= V * NN_BLOCK): each element is read once. A thread holds V
// values of a row in groups of P consecutive elements (P 4: one 4-element word a load, the host
// checks n % 4 == 0 and the rows' alignment; P 1: single elements), group k of thread t at
// element (k NN_BLOCK + t) P. The forward: a block per row (grid-stride).
template <class S> struct alignas(4 * sizeof(S)) word4 { S v[4]; };
template <class S, int P>
__device__ __forceinline__ void ld_group(const S* p, typename io<S>::C* out) {
  if (P == 4) {
    const word4<S> t = *reinterpret_cast<const word4<S>*>(p);
#pragma unroll
    for (int e = 0; e < 4; ++e)
      out[e] = io<S>::ld(t.v[e]);
  } else {
    out[0] = io<S>::ld(*p);
  }
}
template <class S, int P>
__device__ __forceinline__ void st_group(S* p, const typename io<S>::C* in) {
  if (P == 4) {
    word4<S> t;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      t.v[e] = io<S>::st(in[e]);
    *reinterpret_cast<word4<S>*>(p) = t;
  } else {
    *p = io<S>::st(in[0]);
  }
}
// WARP: a warp per row (8 rows a block, lane l = threadIdx.x % 32, groups at stride 32, the sums
// by shuffles alone: no barrier), else a block per row (groups at stride NN_BLOCK).
template <class S, int V, int P, bool WARP>
__device__ void norm_fwd_rows(i64 outer, i64 n, int layer, typename io<S>::C eps, const S* x,
                              const S* w, const S* b, S* y, typename io<S>::C* mean,
                              typename io<S>::C* rstd, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  constexpr int G = V / P, STRIDE = WARP ? 32 : NN_BLOCK;
  const int lane = WARP ? (threadIdx.x & 31) : threadIdx.x;
  const i64 first = WARP ? (i64)blockIdx.x * NN_WARPS + (threadIdx.x >> 5) : blockIdx.x,
            step = WARP ? (i64)gridDim.x * NN_WARPS : gridDim.x;
  auto sum = [&](C v) {
    if constexpr (WARP)
      return warp_sum(v);
    else
      return block_sum(v, sh);
  };
  for (i64 r = first; r < outer; r += step) {
    const S* xr = x + r * n;
    S* yr = y + r * n;
    C v[V];
    C acc = C(0);
#pragma unroll
    for (int k = 0; k < G; ++k) {
      const i64 j = ((i64)k * STRIDE + lane) * P;
      if (j < n) {
        ld_group<S, P>(xr + j, v + k * P);
      } else {
#pragma unroll
        for (int e = 0; e < P; ++e)
          v[k * P + e] = C(0);
      }
#pragma unroll
      for (int e = 0; e < P; ++e)
        acc += v[k * P + e];
    }
    const C mu = layer ? sum(acc) / C(n) : C(0);
    acc = C(0);
#pragma unroll
    for (int k = 0; k < G; ++k) {
      const i64 j = ((i64)k * STRIDE + lane) * P;
#pragma unroll
      for (int e = 0; e < P; ++e) {
        const C d = j < n ? v[k * P + e] - mu : C(0);
        acc += d * d;
      }
    }
    const C rs = C(1) / m_sqrt(sum(acc) / C(n) + eps);
#pragma unroll
    for (int k = 0; k < G; ++k) {
      const i64 j = ((i64)k * STRIDE + lane) * P;
      if (j < n) {
        C wk[P], h[P];
        ld_group<S, P>(w + j, wk);
        if (layer) ld_group<S, P>(b + j, h);
#pragma unroll
        for (int e = 0; e < P; ++e)
          h[e] = (v[k * P + e] - mu) * rs * wk[e] + (layer ? h[e] : C(0));
        st_group<S, P>(yr + j, h);
      }
    }
    if (lane == 0) {
      if (mean) mean[r] = mu;
      if (rstd) rstd[r] = rs;
    }
  }
}
// The fused gradients' shared steps. One element: xhat, g = dy w, the row sums and the column
// sums of dy xhat and dy.
template <class C>
__device__ __forceinline__ void norm_bwd_elem(C d, C xv, C mu, C rs, C wq, C& xh, C& g, C& sg,
                                              C& sgx, C& aw, C& ab) {
  xh = (xv - mu) * rs;
  g = d * wq;
  sg += g;
  sgx += g * xh;
  aw += d * xh;
  ab += d;
}
// Row r's dx from its xhat and g: the block's two sums, then rstd (g - mean(g) - xhat mean(g
// xhat)) (rms_norm: no mean(g)).
template <class S, int V, int P>
__device__ __forceinline__ void norm_bwd_dx(i64 n, int layer, i64 r, typename io<S>::C rs,
                                            typename io<S>::C sg, typename io<S>::C sgx,
                                            const typename io<S>::C* g, const typename io<S>::C* xh,
                                            S* dx, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  block_sum2(sg, sgx, sh);
  sg = layer ? sg / C(n) : C(0);
  sgx = sgx / C(n);
#pragma unroll
  for (int k = 0; k < V / P; ++k) {
    const i64 j = ((i64)k * NN_BLOCK + threadIdx.x) * P;
    if (j < n) {
      C o[P];
#pragma unroll
      for (int e = 0; e < P; ++e)
        o[e] = rs * (g[k * P + e] - sg - xh[k * P + e] * sgx);
      st_group<S, P>(dx + r * n + j, o);
    }
  }
}
// The block's column sums to part[c][j] (dweight) and part[gridDim.x + c][j] (dbias); col(q, 0)
// and col(q, 1): this thread's sums of its value q.
template <int V, int P, class C, class F>
__device__ __forceinline__ void norm_bwd_flush(i64 n, int layer, C* part, F col) {
#pragma unroll
  for (int k = 0; k < V / P; ++k) {
    const i64 j = ((i64)k * NN_BLOCK + threadIdx.x) * P;
    if (j < n) {
#pragma unroll
      for (int e = 0; e < P; ++e) {
        part[(i64)blockIdx.x * n + j + e] = col(k * P + e, 0);
        if (layer) part[((i64)gridDim.x + blockIdx.x) * n + j + e] = col(k * P + e, 1);
      }
    }
  }
}
// The gradient, fused: block c takes rows [c rows_per, (c + 1) rows_per), reads each row's x and
// dy once (into registers), writes dx, and keeps its columns' sums of dy xhat and dy in registers;
// at the end they go to part[c][j] and part[gridDim.x + c][j] (norm_cols_sum adds the blocks'
// sums in a fixed order: the same bits on every run).
template <class S, int V, int P>
__device__ void norm_bwd_reg(i64 outer, i64 n, int layer, i64 rows_per, const S* x, const S* w,
                             const typename io<S>::C* mean, const typename io<S>::C* rstd,
                             const S* dy, S* dx, typename io<S>::C* part, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  constexpr int G = V / P;
  C wv[V], aw[V], ab[V];
#pragma unroll
  for (int k = 0; k < G; ++k) {
    const i64 j = ((i64)k * NN_BLOCK + threadIdx.x) * P;
    if (j < n) {
      ld_group<S, P>(w + j, wv + k * P);
    } else {
#pragma unroll
      for (int e = 0; e < P; ++e)
        wv[k * P + e] = C(0);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    aw[k] = C(0);
    ab[k] = C(0);
  }
  const i64 r0 = (i64)blockIdx.x * rows_per, r1 = r0 + rows_per < outer ? r0 + rows_per : outer;
  for (i64 r = r0; r < r1; ++r) {
    const C mu = layer ? mean[r] : C(0), rs = rstd[r];
    C xh[V], g[V];
    C sg = C(0), sgx = C(0);
#pragma unroll
    for (int k = 0; k < G; ++k) {
      const i64 j = ((i64)k * NN_BLOCK + threadIdx.x) * P;
      if (j < n) {
        C d[P];
        ld_group<S, P>(dy + r * n + j, d);
        ld_group<S, P>(x + r * n + j, xh + k * P);
#pragma unroll
        for (int e = 0; e < P; ++e) {
          const int q = k * P + e;
          norm_bwd_elem(d[e], xh[q], mu, rs, wv[q], xh[q], g[q], sg, sgx, aw[q], ab[q]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < P; ++e) {
          xh[k * P + e] = C(0);
          g[k * P + e] = C(0);
        }
      }
    }
    norm_bwd_dx<S, V, P>(n, layer, r, rs, sg, sgx, g, xh, dx, sh);
  }
  norm_bwd_flush<V, P>(n, layer, part, [&](int q, int b) { return b ? ab[q] : aw[q]; });
}
// The gradient for rows of n % 4 == 0, at most 4096 elements, f32 / f16 / bf16 (the host checks
// the words' alignment): as norm_bwd_reg<S, 16, 4>, but the columns' running sums live in shared
// memory (thread t's slot q at cs[q NN_BLOCK + t]: its own words, no barrier) and the next row's
// x, dy, mean and rstd are loaded before this row is reduced and written: each block keeps loads
// in flight through its barriers, and holds fewer registers (three blocks an SM).
template <class S>
__device__ void norm_bwd_pf(i64 outer, i64 n, int layer, i64 rows_per, const S* x, const S* w,
                            const typename io<S>::C* mean, const typename io<S>::C* rstd,
                            const S* dy, S* dx, typename io<S>::C* part, typename io<S>::C* sh,
                            typename io<S>::C* cs) {
  typedef typename io<S>::C C;
  constexpr int V = 16, P = 4, G = V / P;
  const int t = threadIdx.x;
  C* aw = cs;
  C* ab = cs + V * NN_BLOCK;
#pragma unroll
  for (int q = 0; q < V; ++q) {
    aw[q * NN_BLOCK + t] = C(0);
    ab[q * NN_BLOCK + t] = C(0);
  }
  const i64 r0 = (i64)blockIdx.x * rows_per, r1 = r0 + rows_per < outer ? r0 + rows_per : outer;
  word4<S> xr[G], dr[G];
  C mu_n = C(0), rs_n = C(0);
  if (r0 < r1) {
#pragma unroll
    for (int k = 0; k < G; ++k) {
      const i64 j = ((i64)k * NN_BLOCK + t) * P;
      if (j < n) {
        xr[k] = *reinterpret_cast<const word4<S>*>(x + r0 * n + j);
        dr[k] = *reinterpret_cast<const word4<S>*>(dy + r0 * n + j);
      }
    }
    mu_n = layer ? mean[r0] : C(0);
    rs_n = rstd[r0];
  }
  for (i64 r = r0; r < r1; ++r) {
    const C mu = mu_n, rs = rs_n;
    C xh[V], g[V];
    C sg = C(0), sgx = C(0);
#pragma unroll
    for (int k = 0; k < G; ++k) {
      const i64 j = ((i64)k * NN_BLOCK + t) * P;
      if (j < n) {
        C wk[P];
        ld_group<S, P>(w + j, wk);
#pragma unroll
        for (int e = 0; e < P; ++e) {
          const int q = k * P + e;
          norm_bwd_elem(io<S>::ld(dr[k].v[e]), io<S>::ld(xr[k].v[e]), mu, rs, wk[e], xh[q], g[q],
                        sg, sgx, aw[q * NN_BLOCK + t], ab[q * NN_BLOCK + t]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < P; ++e) {
          xh[k * P + e] = C(0);
          g[k * P + e] = C(0);
        }
      }
    }
    if (r + 1 < r1) { // the next row's loads fly while this row is reduced and written
#pragma unroll
      for (int k = 0; k < G; ++k) {
        const i64 j = ((i64)k * NN_BLOCK + t) * P;
        if (j < n) {
          xr[k] = *reinterpret_cast<const word4<S>*>(x + (r + 1) * n + j);
          dr[k] = *reinterpret_cast<const word4<S>*>(dy + (r + 1) * n + j);
        }
      }
      mu_n = layer ? mean[r + 1] : C(0);
      rs_n = rstd[r + 1];
    }
    norm_bwd_dx<S, V, P>(n, layer, r, rs, sg, sgx, g, xh, dx, sh);
  }
  norm_bwd_flush<V, P>(n, layer, part,
                       [&](int q, int b) { return (b ? ab : aw)[q * NN_BLOCK + t]; });
}
// dweight[j] = sum over rows of dy xhat, dbias[j] = sum of dy, in two steps with a fixed order
// (the same bits on every run): step 1, blockIdx.y = chunk c of `rows_per` rows: a block takes
// 32 columns, its 8 warps every 8th row of the chunk each (coalesced along the columns), the 8
// partial sums added in warp order into part[c][j] (dweight) and part[chunks + c][j] (dbias);
// step 2 (norm_cols_sum) adds the chunks' partial sums in a fixed order.
template <class S>
__device__ void norm_bwd_cols(i64 outer, i64 n, int layer, i64 rows_per, const S* x,
                              const typename io<S>::C* mean, const typename io<S>::C* rstd,
                              const S* dy, typename io<S>::C* part, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  const int cl = threadIdx.x & 31, rl = threadIdx.x >> 5;
  const i64 chunks = gridDim.y, c = blockIdx.y;
  const i64 r0 = c * rows_per, r1 = r0 + rows_per < outer ? r0 + rows_per : outer;
  for (i64 g = blockIdx.x; g * 32 < n; g += gridDim.x) {
    const i64 j = g * 32 + cl;
    C aw = C(0), ab = C(0);
    if (j < n)
      for (i64 r = r0 + rl; r < r1; r += NN_WARPS) {
        const C d = io<S>::ld(dy[r * n + j]);
        const C mu = layer ? mean[r] : C(0);
        aw += d * ((io<S>::ld(x[r * n + j]) - mu) * rstd[r]);
        ab += d;
      }
    sh[threadIdx.x] = aw;
    sh[NN_BLOCK + threadIdx.x] = ab;
    __syncthreads();
    if (rl == 0 && j < n) {
      C sw = C(0), sb = C(0);
#pragma unroll
      for (int k = 0; k < NN_WARPS; ++k) {
        sw += sh[k * 32 + cl];
        sb += sh[NN_BLOCK + k * 32 + cl];
      }
      part[c * n + j] = sw;
      if (layer) part[(chunks + c) * n + j] = sb;
    }
    __syncthreads();
  }
}
// Step 2: a block of NS_THREADS threads takes 32 columns, its warps every NS_WARPS-th chunk each
// (four partial sums a thread, so four loads are in flight), then the warps' sums in warp order:
// a fixed order, the same bits on every run.
#define NS_THREADS 1024
#define NS_WARPS 32
template <class S>
__device__ void norm_cols_sum(i64 n, int layer, i64 chunks, const typename io<S>::C* part, S* dw,
                              S* db, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  const int cl = threadIdx.x & 31, wl = threadIdx.x >> 5;
  for (i64 g = blockIdx.x; g * 32 < n; g += gridDim.x) {
    const i64 j = g * 32 + cl;
    C w4[4] = {C(0), C(0), C(0), C(0)}, b4[4] = {C(0), C(0), C(0), C(0)};
    if (j < n) {
      i64 c = wl;
      for (; c + 3 * NS_WARPS < chunks; c += 4 * NS_WARPS) {
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          w4[u] += part[(c + u * NS_WARPS) * n + j];
          if (layer) b4[u] += part[(chunks + c + u * NS_WARPS) * n + j];
        }
      }
      for (; c < chunks; c += NS_WARPS) {
        w4[0] += part[c * n + j];
        if (layer) b4[0] += part[(chunks + c) * n + j];
      }
    }
    sh[threadIdx.x] = (w4[0] + w4[1]) + (w4[2] + w4[3]);
    sh[NS_THREADS + threadIdx.x] = (b4[0] + b4[1]) + (b4[2] + b4[3]);
    __syncthreads();
    if (wl == 0 && j < n) {
      C sw = C(0), sb = C(0);
      for (int k = 0; k < NS_WARPS; ++k) {
        sw += sh[k * 32 + cl];
        sb += sh[NS_THREADS + k * 32 + cl];
      }
      dw[j] = io<S>::st(sw);
      if (layer) db[j] = io<S>::st(sb);
    }
    __syncthreads();
  }
}

// ---- batch_norm (pcy_nn.h) --------------------------------------------------------------------
// x is N x C x sp; channel c holds M = N sp elements, element i (n = i / sp, s = i % sp) at
// (n C + c) sp + s. The per-channel sums run in two steps with a fixed order (the same bits on
// every run, no atomics): bn_part, grid (chunks, channels), block (k, c) sums chunk k (elements
// [k per, (k + 1) per)) of channel c, each thread every NN_BLOCK-th element, then block_sum, into
// part[c chunks + k] (and part[C chunks + c chunks + k] for the gradient's second sum);
// bn_stats adds a channel's chunks in chunk order (a thread per channel). The chunking is a
// function of the shape only (the bundle's). mode 0: sum x; 1: sum (x - st[c])^2 (st: the
// means); 2: sum dy and sum dy (x - mean) rstd.
template <class S>
__device__ void bn_part(i64 N, i64 C_, i64 sp, i64 per, int mode, const S* x, const S* dy,
                        const typename io<S>::C* mean, const typename io<S>::C* rstd,
                        typename io<S>::C* part, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  const i64 M = N * sp, chunks = gridDim.x, k = blockIdx.x;
  const i64 i0 = k * per, i1 = i0 + per < M ? i0 + per : M;
  // (n, s) of this thread's first element, then advanced by NN_BLOCK = q sp + r each step.
  const i64 q = NN_BLOCK / sp, r = NN_BLOCK % sp;
  for (i64 c = blockIdx.y; c < C_; c += gridDim.y) {
    const C mu = mode == 0 ? C(0) : mean[c], rs = mode == 2 ? rstd[c] : C(1);
    C a0 = C(0), a1 = C(0);
    i64 i = i0 + threadIdx.x;
    i64 n = i / sp, s = i - n * sp;
    for (; i < i1; i += NN_BLOCK) {
      const i64 at = (n * C_ + c) * sp + s;
      const C v = io<S>::ld(x[at]);
      if (mode == 0) {
        a0 += v;
      } else if (mode == 1) {
        const C d = v - mu;
        a0 += d * d;
      } else {
        const C g = io<S>::ld(dy[at]);
        a0 += g;
        a1 += g * ((v - mu) * rs);
      }
      n += q;
      s += r;
      if (s >= sp) {
        s -= sp;
        ++n;
      }
    }
    a0 = block_sum(a0, sh);
    if (mode == 2) a1 = block_sum(a1, sh);
    if (threadIdx.x == 0) {
      part[c * chunks + k] = a0;
      if (mode == 2) part[(C_ + c) * chunks + k] = a1;
    }
  }
}
// A thread per channel: the chunks' sums in chunk order. st holds the statistics in use (st[c]
// the mean, st[C + c] the rstd) or, for the gradient, the sums (st[c] sum dy, st[C + c] sum dy
// xhat). phase 0: the mean; 1: the variance, rstd, the running and saved statistics (flags 2
// running_mean, 4 running_var, 8 save_mean, 16 save_rstd); 2 (evaluation): the statistics from
// the running ones, saved; 3 (gradient): dweight and dbias where given.
template <class S>
__device__ void bn_stats(i64 C_, i64 M, i64 chunks, int phase, int flags,
                         typename io<S>::C momentum, typename io<S>::C eps,
                         const typename io<S>::C* part, typename io<S>::C* st,
                         typename io<S>::C* rm, typename io<S>::C* rv, typename io<S>::C* sm,
                         typename io<S>::C* sr, S* dw, S* db) {
  typedef typename io<S>::C C;
  GRID_LOOP(c, C_) {
    C a0 = C(0), a1 = C(0);
    if (phase != 2)
      for (i64 k = 0; k < chunks; ++k) {
        a0 += part[c * chunks + k];
        if (phase == 3) a1 += part[(C_ + c) * chunks + k];
      }
    if (phase == 0) {
      st[c] = a0 / C(M);
    } else if (phase == 3) {
      st[c] = a0;
      st[C_ + c] = a1;
      if (dw) dw[c] = io<S>::st(a1);
      if (db) db[c] = io<S>::st(a0);
    } else {
      C mu, rs;
      if (phase == 1) {
        mu = st[c];
        const C var = a0 / C(M);
        rs = C(1) / m_sqrt(var + eps);
        if (flags & 2) rm[c] = (C(1) - momentum) * rm[c] + momentum * mu;
        if (flags & 4) rv[c] = (C(1) - momentum) * rv[c] + momentum * (var * C(M) / C(M - 1));
      } else {
        mu = rm[c];
        rs = C(1) / m_sqrt(rv[c] + eps);
        st[c] = mu;
      }
      st[C_ + c] = rs;
      if (flags & 8) sm[c] = mu;
      if (flags & 16) sr[c] = rs;
    }
  }
}
// y = (x - mean) rstd w + b elementwise, the statistics from st. vec: x and y 16-byte aligned
// and sp a multiple of V = 16 / sizeof(S), so a v16 word holds V elements of one channel (the
// results are those of the scalar path: each element's arithmetic is the same).
template <class S>
__device__ void bn_apply(i64 total, i64 C_, i64 sp, const S* x, const S* w, const S* b,
                         const typename io<S>::C* st, S* y, int vec) {
  typedef typename io<S>::C C;
  if (vec) {
    const int V = 16 / sizeof(S);
    const v16* xv = reinterpret_cast<const v16*>(x);
    v16* yv = reinterpret_cast<v16*>(y);
    GRID_LOOP(t, total / V) {
      const i64 c = (t * V / sp) % C_;
      const C mu = st[c], rs = st[C_ + c], wc = io<S>::ld(w[c]), bc = io<S>::ld(b[c]);
      v16 r = xv[t];
      S* e = reinterpret_cast<S*>(&r);
#pragma unroll
      for (int j = 0; j < V; ++j)
        e[j] = io<S>::st((io<S>::ld(e[j]) - mu) * rs * wc + bc);
      yv[t] = r;
    }
    return;
  }
  GRID_LOOP(i, total) {
    const i64 c = (i / sp) % C_;
    y[i] = io<S>::st((io<S>::ld(x[i]) - st[c]) * st[C_ + c] * io<S>::ld(w[c]) + io<S>::ld(b[c]));
  }
}
// One element of dx: training rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w, mean(g) =
// w sum(dy) / M and mean(g xhat) = w sum(dy xhat) / M (st, bn_stats' phase 3); otherwise rstd g
// (x does not enter: a NaN x leaves dx finite).
template <class C>
__device__ __forceinline__ C bn_dx1(int training, C xv, C dyv, C mu, C rs, C wc, C mg, C mgx) {
  const C g = dyv * wc;
  return training ? rs * (g - mg - ((xv - mu) * rs) * mgx) : rs * g;
}
// dx elementwise; vec as for bn_apply (x, dy and dx aligned).
template <class S>
__device__ void bn_dx(i64 total, i64 C_, i64 sp, i64 M, int training, const S* x, const S* w,
                      const typename io<S>::C* mean, const typename io<S>::C* rstd,
                      const typename io<S>::C* st, const S* dy, S* dx, int vec) {
  typedef typename io<S>::C C;
  if (vec) {
    const int V = 16 / sizeof(S);
    const v16 *xv = reinterpret_cast<const v16*>(x), *dyv = reinterpret_cast<const v16*>(dy);
    v16* dxv = reinterpret_cast<v16*>(dx);
    GRID_LOOP(t, total / V) {
      const i64 c = (t * V / sp) % C_;
      const C rs = rstd[c], wc = io<S>::ld(w[c]);
      const C mu = training ? mean[c] : C(0);
      const C mg = training ? wc * st[c] / C(M) : C(0),
              mgx = training ? wc * st[C_ + c] / C(M) : C(0);
      const v16 rx = xv[t];
      v16 rd = dyv[t];
      const S* ex = reinterpret_cast<const S*>(&rx);
      S* ed = reinterpret_cast<S*>(&rd);
#pragma unroll
      for (int j = 0; j < V; ++j)
        ed[j] =
            io<S>::st(bn_dx1<C>(training, io<S>::ld(ex[j]), io<S>::ld(ed[j]), mu, rs, wc, mg, mgx));
      dxv[t] = rd;
    }
    return;
  }
  GRID_LOOP(i, total) {
    const i64 c = (i / sp) % C_;
    const C rs = rstd[c], wc = io<S>::ld(w[c]);
    const C mu = training ? mean[c] : C(0);
    const C mg = training ? wc * st[c] / C(M) : C(0),
            mgx = training ? wc * st[C_ + c] / C(M) : C(0);
    dx[i] = io<S>::st(bn_dx1<C>(training, io<S>::ld(x[i]), io<S>::ld(dy[i]), mu, rs, wc, mg, mgx));
  }
}

// ---- cross_entropy (pcy_nn.h) -----------------------------------------------------------------
// One block of NN_BLOCK threads per row of C classes, in the compute type C (the statistics
// dtype): the row's max (max_of skips a NaN; the sums take it), then sum e^(x - max) and sum x.
// red 0 writes each row's loss; red 1 / 2 write it (and 1 where counted) into part[r] and
// part[rows + r] for xent_reduce. lse may be null (not saved). A label outside [0, C) that is
// not ignored is never read through: NaN.
template <class S>
__device__ void xent_fwd(i64 rows, i64 C_, i64 ignore, typename io<S>::C eps, int red, const S* x,
                         const int* labels, S* loss, typename io<S>::C* lse,
                         typename io<S>::C* part, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const S* xr = x + r * C_;
    C m = neg_inf<C>();
    for (i64 j = threadIdx.x; j < C_; j += NN_BLOCK)
      m = max_of(m, io<S>::ld(xr[j]));
    m = block_red<NN_WARPS, 1>(m, sh);
    C se = C(0), sx = C(0);
    for (i64 j = threadIdx.x; j < C_; j += NN_BLOCK) {
      const C v = io<S>::ld(xr[j]);
      se += m_exp(v - m);
      sx += v;
    }
    se = block_sum(se, sh);
    sx = block_sum(sx, sh);
    if (threadIdx.x == 0) {
      const C l = m + m_log(se);
      if (lse) lse[r] = l;
      const int t = labels[r];
      const bool counted = (i64)t != ignore;
      C v = C(0);
      if (counted)
        v = t >= 0 && (i64)t < C_
                ? (C(1) - eps) * (l - io<S>::ld(xr[t])) +
                      (eps > C(0) ? eps * (l - sx / C(C_)) : C(0)) // a -inf logit: eps 0 adds 0
                : m_nan<C>();
      if (red == 0) {
        loss[r] = io<S>::st(v);
      } else {
        part[r] = v;
        part[rows + r] = counted ? C(1) : C(0);
      }
    }
  }
}
// 'mean' / 'sum' of the rows' losses in part: one block, thread k adds rows k, k + NN_BLOCK, ...
// in order, then the block's fixed tree (the same bits on every run).
template <class S>
__device__ void xent_reduce(i64 rows, int red, const typename io<S>::C* part, S* loss,
                            typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  C t = C(0), n = C(0);
  for (i64 r = threadIdx.x; r < rows; r += NN_BLOCK) {
    t += part[r];
    n += part[rows + r];
  }
  t = block_sum(t, sh);
  n = block_sum(n, sh);
  if (threadIdx.x == 0) loss[0] = io<S>::st(red == 1 ? t / n : t); // 0 / 0: NaN
}
// The gradient's scale for 'mean' and 'sum' (one block): g[0] = dloss[0] (/ the rows counted).
template <class S>
__device__ void xent_scale(i64 rows, i64 ignore, int red, const int* labels, const S* dloss,
                           typename io<S>::C* g, typename io<S>::C* sh) {
  typedef typename io<S>::C C;
  C n = C(0);
  for (i64 r = threadIdx.x; r < rows; r += NN_BLOCK)
    n += (i64)labels[r] != ignore ? C(1) : C(0);
  n = block_sum(n, sh);
  if (threadIdx.x == 0) g[0] = red == 1 ? io<S>::ld(dloss[0]) / n : io<S>::ld(dloss[0]);
}
// dlogits = g (e^(x - lse) - (1 - eps) onehot(t) - eps / C), a block per row; g = dloss[r]
// ('none') or g0[0] (xent_scale's). Ignored rows 0.
template <class S>
__device__ void xent_bwd(i64 rows, i64 C_, i64 ignore, typename io<S>::C eps, int red, const S* x,
                         const int* labels, const typename io<S>::C* lse, const S* dloss,
                         const typename io<S>::C* g0, S* dx) {
  typedef typename io<S>::C C;
  const C off = eps / C(C_);
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const S* xr = x + r * C_;
    S* dr = dx + r * C_;
    const int t = labels[r];
    if ((i64)t == ignore) {
      for (i64 j = threadIdx.x; j < C_; j += NN_BLOCK)
        dr[j] = io<S>::st(C(0));
      continue;
    }
    const bool ok = t >= 0 && (i64)t < C_;
    const C g = red == 0 ? io<S>::ld(dloss[r]) : g0[0], l = lse[r];
    for (i64 j = threadIdx.x; j < C_; j += NN_BLOCK) {
      const C h = j == (i64)t ? C(1) - eps : C(0);
      dr[j] = io<S>::st(ok ? g * (m_exp(io<S>::ld(xr[j]) - l) - off - h) : m_nan<C>());
    }
  }
}

// ---- embedding (pcy_nn.h) ---------------------------------------------------------------------
// The forward: a block per position (grid-stride), its threads copying the row as stored, in
// 16-byte words where vec (D's bytes a multiple of 16, w and y aligned: the host checks); an
// index outside [0, V) gives a row of NaN.
template <class S>
__device__ void emb_fwd(i64 n, i64 D, i64 V, const S* w, const int* idx, S* y, int vec) {
  const S nan = io<S>::st(m_nan<typename io<S>::C>());
  for (i64 i = blockIdx.x; i < n; i += gridDim.x) {
    const int v = idx[i];
    const bool in = v >= 0 && (i64)v < V;
    if (vec) {
      const i64 words = D * (i64)sizeof(S) / 16;
      const v16* src = reinterpret_cast<const v16*>(w + (in ? (i64)v * D : 0));
      v16* dst = reinterpret_cast<v16*>(y + i * D);
      v16 nanw;
      S* nw = reinterpret_cast<S*>(&nanw);
#pragma unroll
      for (int e = 0; e < (int)(16 / sizeof(S)); ++e)
        nw[e] = nan;
      for (i64 j = threadIdx.x; j < words; j += NN_BLOCK)
        dst[j] = in ? src[j] : nanw;
    } else {
      for (i64 j = threadIdx.x; j < D; j += NN_BLOCK)
        y[i * D + j] = in ? w[(i64)v * D + j] : nan;
    }
  }
}
// The gradient, without atomics. emb_keys: P keys (index << 32 | position) for the positions
// that add (index in [0, V), not padding_idx), ~0 (after every real key) for the others and for
// the padding up to P, a power of two >= 2 NN_BLOCK. Real keys are distinct: one sorted order.
__device__ void emb_keys(i64 n, i64 P, i64 V, i64 pad, const int* idx, u64* keys) {
  for (i64 i = (i64)blockIdx.x * NN_BLOCK + threadIdx.x; i < P; i += (i64)gridDim.x * NN_BLOCK) {
    u64 k = ~0ull;
    if (i < n) {
      const int v = idx[i];
      if (v >= 0 && (i64)v < V && (i64)v != pad) k = ((u64)(unsigned)v << 32) | (u64)i;
    }
    keys[i] = k;
  }
}
// Bitonic sort, ascending. Step (k, j): element i (bit j clear) against i + j, ascending where
// bit k of i is clear. emb_sort_global: one step over the array (P / 2 pairs); emb_sort_local:
// the steps inside chunks of 2 NN_BLOCK keys in shared memory, k from k0 to k1 (doubling), j
// from (k == k0 ? j0 : k / 2) down to 1.
__device__ __forceinline__ void emb_cmpx(u64& a, u64& b, bool up) {
  if ((a > b) == up) {
    const u64 t = a;
    a = b;
    b = t;
  }
}
__device__ void emb_sort_global(i64 P, i64 k, i64 j, u64* keys) {
  for (i64 t = (i64)blockIdx.x * NN_BLOCK + threadIdx.x; t < P / 2;
       t += (i64)gridDim.x * NN_BLOCK) {
    const i64 i = 2 * j * (t / j) + t % j;
    u64 a = keys[i], b = keys[i + j];
    emb_cmpx(a, b, (i & k) == 0);
    keys[i] = a;
    keys[i + j] = b;
  }
}
__device__ void emb_sort_local(i64 P, i64 k0, i64 k1, i64 j0, u64* keys, u64* sh) {
  const int t = threadIdx.x;
  for (i64 base = (i64)blockIdx.x * 2 * NN_BLOCK; base < P; base += (i64)gridDim.x * 2 * NN_BLOCK) {
    sh[t] = keys[base + t];
    sh[t + NN_BLOCK] = keys[base + t + NN_BLOCK];
    __syncthreads();
    for (i64 k = k0; k <= k1; k <<= 1)
      for (i64 j = k == k0 ? j0 : k >> 1; j > 0; j >>= 1) {
        const i64 i = 2 * j * (t / j) + t % j;
        u64 a = sh[i], b = sh[i + j];
        emb_cmpx(a, b, ((base + i) & k) == 0);
        sh[i] = a;
        sh[i + j] = b;
        __syncthreads();
      }
    keys[base + t] = sh[t];
    keys[base + t + NN_BLOCK] = sh[t + NN_BLOCK];
    __syncthreads();
  }
}
// Each vocabulary row's segment of the sorted keys: seg[2 v] and seg[2 v + 1] (zeroed before:
// a row without keys keeps an empty segment) from the keys where the row changes.
__device__ void emb_bounds(i64 P, const u64* keys, i64* seg) {
  for (i64 k = (i64)blockIdx.x * NN_BLOCK + threadIdx.x; k < P; k += (i64)gridDim.x * NN_BLOCK) {
    const u64 key = keys[k];
    if (key == ~0ull) continue;
    const u64 v = key >> 32;
    if (k == 0 || (keys[k - 1] >> 32) != v) seg[2 * v] = k;
    if (k + 1 == P || (keys[k + 1] >> 32) != v) seg[2 * v + 1] = k + 1;
  }
}
// dweight: a block per vocabulary row v takes its segment of the sorted keys (emb_bounds), then
// its threads take the D columns, each adding its column of the segment's dy rows in position
// order (the keys' order) from +0 in the compute type, rounded once. Rows without keys get 0.
template <class S>
__device__ void emb_rows(i64 V, i64 D, i64 P, const u64* keys, const i64* seg, const S* dy, S* dw) {
  typedef typename io<S>::C C;
  for (i64 v = blockIdx.x; v < V; v += gridDim.x) {
    i64 lo = seg[2 * v], hi = seg[2 * v + 1];
    lo = lo < 0 ? 0 : lo; // never outside the keys, whatever the workspace holds
    hi = hi > P ? P : hi;
    for (i64 j = threadIdx.x; j < D; j += NN_BLOCK) {
      C acc = C(0);
      for (i64 s = lo; s < hi; ++s) {
        const u64 k = keys[s];
        // always true of sorted keys; keeps any other order from reading outside dy
        if ((i64)(k >> 32) == v) acc += io<S>::ld(dy[(i64)(k & 0xffffffffull) * D + j]);
      }
      dw[v * D + j] = io<S>::st(acc);
    }
  }
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
// Register-held rows, variant R (the bundle's table: threads NT, warp rows W, E values a thread).
#define NN_SOFTMAX_REG(M, NAME, S, D, R, NT, W, E, MINB)                                       \
  extern "C" __global__ void __launch_bounds__(NT, MINB)                                       \
      NAME##_r##R##_##D(i64 outer, int len, int vec, const S* in, const S* d, S* out) {        \
    __shared__ io<S>::C sh[32];                                                                \
    softmax_reg<M, S, NT, W, E>(outer, len, vec, in, d, out, sh);                              \
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
  }                                                                                            \
  NN_SOFTMAX_REG(M, NAME, S, D, 0, 256, 1, 8, 1)                                               \
  NN_SOFTMAX_REG(M, NAME, S, D, 1, 256, 1, 16, 1)                                              \
  NN_SOFTMAX_REG(M, NAME, S, D, 2, 256, 1, 32, 1)                                              \
  NN_SOFTMAX_REG(M, NAME, S, D, 3, 512, 0, 8, 1)                                               \
  NN_SOFTMAX_REG(M, NAME, S, D, 4, 512, 0, 16, 1)                                              \
  NN_SOFTMAX_REG(M, NAME, S, D, 5, (M < 2 ? 512 : 1024), 0, (M < 2 ? 32 : 16),                  \
                 (M < 2 && sizeof(S) < 8 ? 2 : 1))
// The register-held norm kernels for rows of at most V * NN_BLOCK elements (suffix v: P 4).
#define NN_NORM_REG(S, D, V, P, SUF)                                                               \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      norm_fwd_r##V##SUF##_##D(i64 outer, i64 n, int layer, io<S>::C eps, const S* x, const S* w,  \
                               const S* b, S* y, io<S>::C* mean, io<S>::C* rstd) {                 \
    __shared__ io<S>::C sh[NN_WARPS];                                                              \
    norm_fwd_rows<S, V, P, false>(outer, n, layer, eps, x, w, b, y, mean, rstd, sh);               \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK) norm_bwd_r##V##SUF##_##D(                 \
      i64 outer, i64 n, int layer, i64 rows_per, const S* x, const S* w, const io<S>::C* mean,     \
      const io<S>::C* rstd, const S* dy, S* dx, io<S>::C* part) {                                  \
    __shared__ io<S>::C sh[2 * NN_WARPS];                                                          \
    norm_bwd_reg<S, V, P>(outer, n, layer, rows_per, x, w, mean, rstd, dy, dx, part, sh);          \
  }
#define NN_POOL_GEOM int H, int W, int P, int Q, int wh, int ww, int sh, int sw, int ph, int pw
#define NN_POOL_PASS H, W, P, Q, wh, ww, sh, sw, ph, pw
#define NN_KERNELS(S, D)                                                                           \
  NN_ACT(0, sigmoid, S, D)                                                                         \
  NN_ACT(1, relu, S, D)                                                                            \
  NN_ACT(2, tanh, S, D)                                                                            \
  NN_ACT(3, elu, S, D)                                                                             \
  NN_SOFTMAX(0, softmax, S, D)                                                                     \
  NN_SOFTMAX(1, log_softmax, S, D)                                                                 \
  NN_SOFTMAX(2, softmax_grad, S, D)                                                                \
  NN_SOFTMAX(3, log_softmax_grad, S, D)                                                            \
  extern "C" __global__ void pool_max_##D(i64 total, NN_POOL_GEOM, const S* x, S* y, int* idx) {   \
    pool_max<S>(total, NN_POOL_PASS, x, y, idx);                                                   \
  }                                                                                                \
  extern "C" __global__ void pool_max_gather_##D(i64 total, NN_POOL_GEOM, const int* idx,          \
                                                 const S* dy, S* dx) {                             \
    pool_max_gather<S>(total, NN_POOL_PASS, idx, dy, dx);                                          \
  }                                                                                                \
  extern "C" __global__ void pool_avg_##D(i64 total, NN_POOL_GEOM, int include_padding,            \
                                          const S* x, S* y) {                                      \
    pool_avg<S>(total, NN_POOL_PASS, include_padding, x, y);                                       \
  }                                                                                                \
  extern "C" __global__ void pool_avg_grad_##D(i64 total, NN_POOL_GEOM, int include_padding,       \
                                               const S* dy, S* dx) {                               \
    pool_avg_grad<S>(total, NN_POOL_PASS, include_padding, dy, dx);                                \
  }                                                                                                \
  extern "C" __global__ void pool_scatter_##D(i64 total, i64 PQ, i64 HW, const int* idx,           \
                                              const S* dy, io<S>::C* acc) {                        \
    pool_scatter<S>(total, PQ, HW, idx, dy, acc);                                                  \
  }                                                                                                \
  extern "C" __global__ void fill_zero_##D(i64 n, S* x) { fill_zero<S>(n, x); }                    \
  extern "C" __global__ void bias_add_##D(i64 total, i64 PQ, int K, const S* b, S* y) {            \
    bias_add<S>(total, PQ, K, b, y);                                                               \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      bias_grad_##D(int N, int K, i64 PQ, const S* dy, S* db) {                                    \
    __shared__ io<S>::C sh[NN_WARPS];                                                              \
    bias_grad<S>(N, K, PQ, dy, db, sh);                                                            \
  }                                                                                                \
  extern "C" __global__ void conv_fwd_##D(i64 total, conv_geom g, const S* x, const S* w, S* y) {  \
    conv_fwd<S>(total, g, x, w, y);                                                                \
  }                                                                                                \
  extern "C" __global__ void conv_bwd_data_##D(i64 total, conv_geom g, const S* w, const S* dy,    \
                                               S* dx) {                                            \
    conv_bwd_data<S>(total, g, w, dy, dx);                                                         \
  }                                                                                                \
  extern "C" __global__ void conv_bwd_filter_##D(i64 total, conv_geom g, const S* x, const S* dy,  \
                                                 S* dw) {                                          \
    conv_bwd_filter<S>(total, g, x, dy, dw);                                                       \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      norm_fwd_##D(i64 outer, i64 n, int layer, io<S>::C eps, const S* x, const S* w, const S* b,  \
                   S* y, io<S>::C* mean, io<S>::C* rstd) {                                         \
    __shared__ io<S>::C sh[NN_WARPS];                                                              \
    norm_fwd<S>(outer, n, layer, eps, x, w, b, y, mean, rstd, sh);                                 \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      norm_bwd_row_##D(i64 outer, i64 n, int layer, const S* x, const S* w, const io<S>::C* mean,  \
                       const io<S>::C* rstd, const S* dy, S* dx) {                                 \
    __shared__ io<S>::C sh[2 * NN_WARPS];                                                          \
    norm_bwd_row<S>(outer, n, layer, x, w, mean, rstd, dy, dx, sh);                                \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      norm_bwd_cols_##D(i64 outer, i64 n, int layer, i64 rows_per, const S* x,                     \
                        const io<S>::C* mean, const io<S>::C* rstd, const S* dy, io<S>::C* part) { \
    __shared__ io<S>::C sh[2 * NN_BLOCK];                                                          \
    norm_bwd_cols<S>(outer, n, layer, rows_per, x, mean, rstd, dy, part, sh);                      \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NS_THREADS)                                         \
      norm_cols_sum_##D(i64 n, int layer, i64 chunks, const io<S>::C* part, S* dw, S* db) {        \
    __shared__ io<S>::C sh[2 * NS_THREADS];                                                        \
    norm_cols_sum<S>(n, layer, chunks, part, dw, db, sh);                                          \
  }                                                                                                \
  NN_NORM_REG(S, D, 1, 1, )                                                                        \
  NN_NORM_REG(S, D, 4, 1, )                                                                        \
  NN_NORM_REG(S, D, 16, 1, )                                                                       \
  NN_NORM_REG(S, D, 4, 4, v)                                                                       \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      norm_fwd_w1_##D(i64 outer, i64 n, int layer, io<S>::C eps, const S* x, const S* w,           \
                      const S* b, S* y, io<S>::C* mean, io<S>::C* rstd) {                          \
    norm_fwd_rows<S, 8, 1, true>(outer, n, layer, eps, x, w, b, y, mean, rstd, nullptr);           \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      norm_fwd_w4_##D(i64 outer, i64 n, int layer, io<S>::C eps, const S* x, const S* w,           \
                      const S* b, S* y, io<S>::C* mean, io<S>::C* rstd) {                          \
    norm_fwd_rows<S, 32, 4, true>(outer, n, layer, eps, x, w, b, y, mean, rstd, nullptr);          \
  }                                                                                                \
  NN_NORM_REG(S, D, 16, 4, v)                                                                      \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      bn_part_##D(i64 N, i64 C, i64 sp, i64 per, int mode, const S* x, const S* dy,                \
                  const io<S>::C* mean, const io<S>::C* rstd, io<S>::C* part) {                    \
    __shared__ io<S>::C sh[NN_WARPS];                                                              \
    bn_part<S>(N, C, sp, per, mode, x, dy, mean, rstd, part, sh);                                  \
  }                                                                                                \
  extern "C" __global__ void bn_stats_##D(i64 C, i64 M, i64 chunks, int phase, int flags,          \
                                          io<S>::C momentum, io<S>::C eps, const io<S>::C* part,   \
                                          io<S>::C* st, io<S>::C* rm, io<S>::C* rv, io<S>::C* sm,  \
                                          io<S>::C* sr, S* dw, S* db) {                            \
    bn_stats<S>(C, M, chunks, phase, flags, momentum, eps, part, st, rm, rv, sm, sr, dw, db);      \
  }                                                                                                \
  extern "C" __global__ void bn_apply_##D(i64 total, i64 C, i64 sp, const S* x, const S* w,        \
                                          const S* b, const io<S>::C* st, S* y, int vec) {         \
    bn_apply<S>(total, C, sp, x, w, b, st, y, vec);                                                \
  }                                                                                                \
  extern "C" __global__ void bn_dx_##D(i64 total, i64 C, i64 sp, i64 M, int training, const S* x,  \
                                       const S* w, const io<S>::C* mean, const io<S>::C* rstd,     \
                                       const io<S>::C* st, const S* dy, S* dx, int vec) {          \
    bn_dx<S>(total, C, sp, M, training, x, w, mean, rstd, st, dy, dx, vec);                        \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      xent_fwd_##D(i64 rows, i64 C, i64 ignore, io<S>::C eps, int red, const S* x,                 \
                   const int* labels, S* loss, io<S>::C* lse, io<S>::C* part) {                    \
    __shared__ io<S>::C sh[NN_WARPS];                                                              \
    xent_fwd<S>(rows, C, ignore, eps, red, x, labels, loss, lse, part, sh);                        \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      xent_reduce_##D(i64 rows, int red, const io<S>::C* part, S* loss) {                          \
    __shared__ io<S>::C sh[NN_WARPS];                                                              \
    xent_reduce<S>(rows, red, part, loss, sh);                                                     \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK) xent_scale_##D(                           \
      i64 rows, i64 ignore, int red, const int* labels, const S* dloss, io<S>::C* g) {             \
    __shared__ io<S>::C sh[NN_WARPS];                                                              \
    xent_scale<S>(rows, ignore, red, labels, dloss, g, sh);                                        \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK) xent_bwd_##D(                             \
      i64 rows, i64 C, i64 ignore, io<S>::C eps, int red, const S* x, const int* labels,           \
      const io<S>::C* lse, const S* dloss, const io<S>::C* g0, S* dx) {                            \
    xent_bwd<S>(rows, C, ignore, eps, red, x, labels, lse, dloss, g0, dx);                         \
  }                                                                                                \
  extern "C" __global__ void emb_fwd_##D(i64 n, i64 Dm, i64 V, const S* w, const int* idx, S* y,   \
                                         int vec) {                                                \
    emb_fwd<S>(n, Dm, V, w, idx, y, vec);                                                          \
  }                                                                                                \
  extern "C" __global__ void emb_bounds_##D(i64 P, const u64* keys, i64* seg) {                    \
    emb_bounds(P, keys, seg);                                                                      \
  }                                                                                                \
  extern "C" __global__ void emb_keys_##D(i64 n, i64 P, i64 V, i64 pad, const int* idx,            \
                                          u64* keys) {                                             \
    emb_keys(n, P, V, pad, idx, keys);                                                             \
  }                                                                                                \
  extern "C" __global__ void emb_sort_global_##D(i64 P, i64 k, i64 j, u64* keys) {                 \
    emb_sort_global(P, k, j, keys);                                                                \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      emb_sort_local_##D(i64 P, i64 k0, i64 k1, i64 j0, u64* keys) {                               \
    __shared__ u64 sh[2 * NN_BLOCK];                                                               \
    emb_sort_local(P, k0, k1, j0, keys, sh);                                                       \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK)                                           \
      emb_rows_##D(i64 V, i64 Dm, i64 P, const u64* keys, const i64* seg, const S* dy, S* dw) {    \
    emb_rows<S>(V, Dm, P, keys, seg, dy, dw);                                                      \
  }
#define NN_WIDE_KERNELS(S, D)                                                                  \
  extern "C" __global__ void lrn_fwd_##D(i64 count, int C, i64 plane, int n, double alpha,     \
                                         double beta, double k, const S* x, S* y) {            \
    lrn_fwd<S>(count, C, plane, n, alpha, beta, k, x, y);                                      \
  }                                                                                            \
  extern "C" __global__ void lrn_bwd_##D(i64 count, int C, i64 plane, int n, double alpha,     \
                                         double beta, double k, const S* x, const S* y,        \
                                         const S* dy, S* dx, double* ws, int phase) {          \
    lrn_bwd<S>(count, C, plane, n, alpha, beta, k, x, y, dy, dx, ws, phase);                   \
  }                                                                                            \
  extern "C" __global__ void dropout_fwd_##D(i64 n, u64 seed, unsigned int threshold, S scale, \
                                             const S* x, S* y, unsigned char* mask, int vec) { \
    dropout_fwd<S>(n, seed, threshold, scale, x, y, mask, vec);                                \
  }                                                                                            \
  extern "C" __global__ void dropout_bwd_##D(i64 n, S scale, const S* dy,                      \
                                             const unsigned char* mask, S* dx, int vec) {      \
    dropout_bwd<S>(n, scale, dy, mask, dx, vec);                                               \
  }

NN_KERNELS(float, f32)
NN_KERNELS(double, f64)
NN_KERNELS(h16, f16)
NN_KERNELS(b16, bf16)
// The prefetching norm gradient (32 KB of shared memory a block in f32; f64 would need 64).
#define NN_NORM_PF(S, D)                                                                           \
  extern "C" __global__ void __launch_bounds__(NN_BLOCK, 3) norm_bwd_r16p_##D(                     \
      i64 outer, i64 n, int layer, i64 rows_per, const S* x, const S* w, const io<S>::C* mean,     \
      const io<S>::C* rstd, const S* dy, S* dx, io<S>::C* part) {                                  \
    __shared__ io<S>::C sh[2 * NN_WARPS];                                                          \
    __shared__ io<S>::C cs[2 * 16 * NN_BLOCK];                                                     \
    norm_bwd_pf<S>(outer, n, layer, rows_per, x, w, mean, rstd, dy, dx, part, sh, cs);             \
  }
NN_NORM_PF(float, f32)
NN_NORM_PF(h16, f16)
NN_NORM_PF(b16, bf16)
NN_WIDE_KERNELS(float, f32)
NN_WIDE_KERNELS(double, f64)
extern "C" __global__ void from_float_f16(i64 n, const float* a, h16* x) { from_float<h16>(n, a, x); }
extern "C" __global__ void from_float_bf16(i64 n, const float* a, b16* x) { from_float<b16>(n, a, x); }
