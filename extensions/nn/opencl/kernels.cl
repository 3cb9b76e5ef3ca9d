
#ifdef PCY_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#ifndef cl_khr_fp64
#error "the device has no cl_khr_fp64: f64 NN ops are not available"
#endif
#endif
typedef REAL real;
#define VEC4_(t) t##4
#define VEC4(t) VEC4_(t)
typedef VEC4(REAL) real4;

#define GID ((long)get_global_id(0))
#define GSIZE ((long)get_global_size(0))

/* ---- activations: kind 0 sigmoid, 1 relu, 2 tanh, 3 elu ---------------------------------- */
real act_f(int kind, real v, real alpha) {
  switch (kind) {
  case 0: return (real)1 / ((real)1 + exp(-v));
  case 1: return v < (real)0 ? (real)0 : v; /* -0 and NaN pass through */
  case 2: return tanh(v);
  default: return v > (real)0 ? v : alpha * expm1(v);
  }
}
/* dy * f'(x) from the forward's output y. */
real act_g(int kind, real y, real dy, real alpha) {
  switch (kind) {
  case 0: return dy * (y * ((real)1 - y));
  case 1: return dy * (y > (real)0 ? (real)1 : (real)0);
  case 2: return dy * ((real)1 - y * y);
  default: return dy * (y > (real)0 ? (real)1 : y + alpha);
  }
}

/* y = f(x); x and y may be one buffer at one offset (the in-place forms). */
__kernel void act_fwd(long n, int kind, real alpha, __global const real* x, long xo,
                      __global real* y, long yo) {
  x += xo;
  y += yo;
  const long n4 = n / 4;
  for (long i = GID; i < n4; i += GSIZE) {
    real4 v = vload4(i, x);
    v.s0 = act_f(kind, v.s0, alpha);
    v.s1 = act_f(kind, v.s1, alpha);
    v.s2 = act_f(kind, v.s2, alpha);
    v.s3 = act_f(kind, v.s3, alpha);
    vstore4(v, i, y);
  }
  for (long i = n4 * 4 + GID; i < n; i += GSIZE) y[i] = act_f(kind, x[i], alpha);
}

/* dx = dy * f'(x); dy and dx may be one buffer (the in-place forms). */
__kernel void act_bwd(long n, int kind, real alpha, __global const real* y, long yo,
                      __global const real* dy, long dyo, __global real* dx, long dxo) {
  y += yo;
  dy += dyo;
  dx += dxo;
  const long n4 = n / 4;
  for (long i = GID; i < n4; i += GSIZE) {
    const real4 a = vload4(i, y), b = vload4(i, dy);
    real4 r;
    r.s0 = act_g(kind, a.s0, b.s0, alpha);
    r.s1 = act_g(kind, a.s1, b.s1, alpha);
    r.s2 = act_g(kind, a.s2, b.s2, alpha);
    r.s3 = act_g(kind, a.s3, b.s3, alpha);
    vstore4(r, i, dx);
  }
  for (long i = n4 * 4 + GID; i < n; i += GSIZE) dx[i] = act_g(kind, y[i], dy[i], alpha);
}

/* ---- work-group reductions (SWG work-items, every one calls) -------------------------------- */
real wg_sum(__local real* s, real v) {
  const int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = SWG / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] += s[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const real r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
real wg_max(__local real* s, real v) {
  const int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = SWG / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] = fmax(s[lid], s[lid + h]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const real r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* ---- softmax along an axis: rows outer x len x inner ---------------------------------------
 * A NaN in a row is skipped by fmax but reaches the sum, so the whole row becomes NaN. */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void softmax_row(long outer, long len, int logm, __global const real* x, long xo,
                 __global real* y, long yo) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  for (long r = get_group_id(0); r < outer; r += get_num_groups(0)) {
    __global const real* xr = x + xo + r * len;
    __global real* yr = y + yo + r * len;
    real m = -INFINITY;
    for (long j = lid; j < len; j += SWG) m = fmax(m, xr[j]);
    m = wg_max(s, m);
    real acc = 0;
    for (long j = lid; j < len; j += SWG) acc += exp(xr[j] - m);
    acc = wg_sum(s, acc);
    if (logm) {
      const real ls = log(acc);
      for (long j = lid; j < len; j += SWG) yr[j] = xr[j] - m - ls;
    } else {
      for (long j = lid; j < len; j += SWG) yr[j] = exp(xr[j] - m) / acc;
    }
  }
}
__kernel void softmax_strided(long outer, long len, long inner, int logm, __global const real* x,
                              long xo, __global real* y, long yo) {
  const long total = outer * inner;
  for (long t = GID; t < total; t += GSIZE) {
    const long base = (t / inner) * len * inner + t % inner;
    __global const real* xr = x + xo + base;
    __global real* yr = y + yo + base;
    real m = -INFINITY;
    for (long j = 0; j < len; ++j) m = fmax(m, xr[j * inner]);
    real acc = 0;
    for (long j = 0; j < len; ++j) acc += exp(xr[j * inner] - m);
    if (logm) {
      const real ls = log(acc);
      for (long j = 0; j < len; ++j) yr[j * inner] = xr[j * inner] - m - ls;
    } else {
      for (long j = 0; j < len; ++j) yr[j * inner] = exp(xr[j * inner] - m) / acc;
    }
  }
}
/* softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - e^y sum(dy). */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void softmax_grad_row(long outer, long len, int logm, __global const real* y, long yo,
                      __global const real* dy, long dyo, __global real* dx, long dxo) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  for (long r = get_group_id(0); r < outer; r += get_num_groups(0)) {
    __global const real* yr = y + yo + r * len;
    __global const real* dr = dy + dyo + r * len;
    __global real* xr = dx + dxo + r * len;
    /* One loop on each side of the barrier, the mode a select inside it: PoCL 5 with LLVM 16+
       aborts in its work-group compiler (issue 1435) on a barrier after an if/else of loops. */
    real acc = 0;
    for (long j = lid; j < len; j += SWG) acc += logm ? dr[j] : dr[j] * yr[j];
    acc = wg_sum(s, acc);
    for (long j = lid; j < len; j += SWG) {
      const real yv = yr[j], dv = dr[j];
      xr[j] = logm ? dv - exp(yv) * acc : yv * (dv - acc);
    }
  }
}
__kernel void softmax_grad_strided(long outer, long len, long inner, int logm,
                                   __global const real* y, long yo, __global const real* dy,
                                   long dyo, __global real* dx, long dxo) {
  const long total = outer * inner;
  for (long t = GID; t < total; t += GSIZE) {
    const long base = (t / inner) * len * inner + t % inner;
    __global const real* yr = y + yo + base;
    __global const real* dr = dy + dyo + base;
    __global real* xr = dx + dxo + base;
    real acc = 0;
    if (logm)
      for (long j = 0; j < len; ++j) acc += dr[j * inner];
    else
      for (long j = 0; j < len; ++j) acc += dr[j * inner] * yr[j * inner];
    if (logm)
      for (long j = 0; j < len; ++j) xr[j * inner] = dr[j * inner] - exp(yr[j * inner]) * acc;
    else
      for (long j = 0; j < len; ++j) xr[j * inner] = yr[j * inner] * (dr[j * inner] - acc);
  }
}

/* ---- convolution ----------------------------------------------------------------------------
 * Geometry: x N C H W, w K Cg R S (Cg = C / G), y N K P Q; stride sh sw, padding ph pw,
 * dilation dh dw. The host checked that every coordinate below fits an int; offsets are long. */
#define CONV_ARGS                                                                              \
  int N, int C, int H, int W, int K, int R, int S, int P, int Q, int sh, int sw, int ph, int pw,  \
      int dh, int dw, int G

/* Direct forms: one work-item per output element. */
__kernel void conv_fwd_direct(CONV_ARGS, __global const real* x, long xo, __global const real* w,
                              long wo, __global real* y, long yo) {
  x += xo;
  w += wo;
  y += yo;
  const int Cg = C / G, Kg = K / G;
  const long total = (long)N * K * P * Q;
  for (long t = GID; t < total; t += GSIZE) {
    const int q = (int)(t % Q), p = (int)((t / Q) % P), k = (int)((t / ((long)P * Q)) % K);
    const long n = t / ((long)K * P * Q);
    const int g = k / Kg;
    real acc = 0;
    for (int c = 0; c < Cg; ++c) {
      __global const real* xc = x + (n * C + (long)g * Cg + c) * H * W;
      __global const real* wc = w + ((long)k * Cg + c) * R * S;
      for (int r = 0; r < R; ++r) {
        const int ih = p * sh - ph + r * dh;
        if (ih < 0 || ih >= H) continue;
        for (int s = 0; s < S; ++s) {
          const int iw = q * sw - pw + s * dw;
          if (iw < 0 || iw >= W) continue;
          acc += xc[(long)ih * W + iw] * wc[r * S + s];
        }
      }
    }
    y[t] = acc;
  }
}
/* dx[n,c,h,w] = sum over k of the group, r, s with h = p sh - ph + r dh (w likewise). */
__kernel void conv_data_direct(CONV_ARGS, __global const real* w, long wo, __global const real* dy,
                               long dyo, __global real* dx, long dxo) {
  w += wo;
  dy += dyo;
  dx += dxo;
  const int Cg = C / G, Kg = K / G;
  const long total = (long)N * C * H * W;
  for (long t = GID; t < total; t += GSIZE) {
    const int iw = (int)(t % W), ih = (int)((t / W) % H), c = (int)((t / ((long)H * W)) % C);
    const long n = t / ((long)C * H * W);
    const int g = c / Cg, cc = c % Cg;
    real acc = 0;
    for (int kk = 0; kk < Kg; ++kk) {
      const int k = g * Kg + kk;
      __global const real* wk = w + ((long)k * Cg + cc) * R * S;
      __global const real* dk = dy + (n * K + k) * P * Q;
      for (int r = 0; r < R; ++r) {
        const int th = ih + ph - r * dh;
        if (th < 0 || th % sh != 0) continue;
        const int p = th / sh;
        if (p >= P) continue;
        for (int s = 0; s < S; ++s) {
          const int tw = iw + pw - s * dw;
          if (tw < 0 || tw % sw != 0) continue;
          const int q = tw / sw;
          if (q >= Q) continue;
          acc += wk[r * S + s] * dk[(long)p * Q + q];
        }
      }
    }
    dx[t] = acc;
  }
}
/* dw[k,c,r,s] = sum over n, p, q: one work-item per weight element (no race). */
__kernel void conv_filter_direct(CONV_ARGS, __global const real* x, long xo,
                                 __global const real* dy, long dyo, __global real* dwt, long dwo) {
  x += xo;
  dy += dyo;
  dwt += dwo;
  const int Cg = C / G, Kg = K / G;
  const long total = (long)K * Cg * R * S;
  for (long t = GID; t < total; t += GSIZE) {
    const int s = (int)(t % S), r = (int)((t / S) % R), c = (int)((t / ((long)R * S)) % Cg);
    const int k = (int)(t / ((long)Cg * R * S));
    const int g = k / Kg;
    real acc = 0;
    for (long n = 0; n < N; ++n) {
      __global const real* xc = x + (n * C + (long)g * Cg + c) * H * W;
      __global const real* dk = dy + (n * K + k) * P * Q;
      for (int p = 0; p < P; ++p) {
        const int ih = p * sh - ph + r * dh;
        if (ih < 0 || ih >= H) continue;
        for (int q = 0; q < Q; ++q) {
          const int iw = q * sw - pw + s * dw;
          if (iw < 0 || iw >= W) continue;
          acc += dk[(long)p * Q + q] * xc[(long)ih * W + iw];
        }
      }
    }
    dwt[t] = acc;
  }
}

/* Implicit GEMM, one group g per get_group_id(2): out[m, j] = sum_kk A[m, kk] B[kk, j], with TS x
 * TS tiles of A and B staged in local memory and one output per work-item. The loaders read the
 * tensors in place (no im2col buffer) and give 0 outside the image or the matrices.
 *   forward:     m = k (Kg rows), j = (n, p, q), kk = (c, r, s)
 *   grad_data:   m = c (Cg rows), j = (n, h, w), kk = (k, r, s)
 *   grad_filter: m = k (Kg rows), j = (c, r, s), kk = (n, p, q) */
#define GEMM_BODY(M, NCOL, KD)                                                                 \
  __local real As[TS][TS];                                                                     \
  __local real Bs[TS][TS + 1];                                                                 \
  const int tx = get_local_id(0), ty = get_local_id(1);                                        \
  const long j = (long)get_group_id(0) * TS + tx;                                              \
  const int m = get_group_id(1) * TS + ty;                                                     \
  const int am = get_group_id(1) * TS + ty;                                                    \
  const long bj = j;                                                                           \
  real acc = 0;                                                                                \
  for (long k0 = 0; k0 < (KD); k0 += TS) {                                                     \
    {                                                                                          \
      const long kk = k0 + tx;                                                                 \
      real v = 0;                                                                              \
      if (am < (M) && kk < (KD)) { LOAD_A }                                                    \
      As[ty][tx] = v;                                                                          \
    }                                                                                          \
    {                                                                                          \
      const long kk = k0 + ty;                                                                 \
      real v = 0;                                                                              \
      if (bj < (NCOL) && kk < (KD)) { LOAD_B }                                                 \
      Bs[ty][tx] = v;                                                                          \
    }                                                                                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    for (int e = 0; e < TS; ++e) acc += As[ty][e] * Bs[e][tx];                                 \
    barrier(CLK_LOCAL_MEM_FENCE);                                                              \
  }                                                                                            \
  if (m < (M) && j < (NCOL)) { STORE }

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void conv_fwd_gemm(CONV_ARGS, __global const real* x, long xo, __global const real* w, long wo,
                   __global real* y, long yo) {
  x += xo;
  w += wo;
  y += yo;
  const int Cg = C / G, Kg = K / G, g = get_group_id(2);
  const long PQ = (long)P * Q, RS = (long)R * S;
#define LOAD_A v = w[((long)g * Kg + am) * Cg * RS + kk];
#define LOAD_B                                                                                 \
  const int c = (int)(kk / RS), r = (int)((kk % RS) / S), s = (int)(kk % S);                   \
  const long n = bj / PQ;                                                                      \
  const int p = (int)((bj % PQ) / Q), q = (int)(bj % Q);                                       \
  const int ih = p * sh - ph + r * dh, iw = q * sw - pw + s * dw;                              \
  if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[((n * C + (long)g * Cg + c) * H + ih) * W + iw];
#define STORE y[((j / PQ) * K + (long)g * Kg + m) * PQ + j % PQ] = acc;
  GEMM_BODY(Kg, N * PQ, Cg * RS)
#undef LOAD_A
#undef LOAD_B
#undef STORE
}
__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void conv_data_gemm(CONV_ARGS, __global const real* w, long wo, __global const real* dy, long dyo,
                    __global real* dx, long dxo) {
  w += wo;
  dy += dyo;
  dx += dxo;
  const int Cg = C / G, Kg = K / G, g = get_group_id(2);
  const long HW = (long)H * W, RS = (long)R * S;
#define LOAD_A v = w[(((long)g * Kg + kk / RS) * Cg + am) * RS + kk % RS];
#define LOAD_B                                                                                 \
  const int k = (int)(kk / RS), r = (int)((kk % RS) / S), s = (int)(kk % S);                   \
  const long n = bj / HW;                                                                      \
  const int ih = (int)((bj % HW) / W), iw = (int)(bj % W);                                     \
  const int th = ih + ph - r * dh, tw = iw + pw - s * dw;                                      \
  if (th >= 0 && tw >= 0 && th % sh == 0 && tw % sw == 0 && th / sh < P && tw / sw < Q)        \
    v = dy[((n * K + (long)g * Kg + k) * P + th / sh) * Q + tw / sw];
#define STORE dx[((j / HW) * C + (long)g * Cg + m) * HW + j % HW] = acc;
  GEMM_BODY(Cg, N * HW, Kg * RS)
#undef LOAD_A
#undef LOAD_B
#undef STORE
}
__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void conv_filter_gemm(CONV_ARGS, __global const real* x, long xo, __global const real* dy,
                      long dyo, __global real* dwt, long dwo) {
  x += xo;
  dy += dyo;
  dwt += dwo;
  const int Cg = C / G, Kg = K / G, g = get_group_id(2);
  const long PQ = (long)P * Q, RS = (long)R * S;
#define LOAD_A v = dy[((kk / PQ) * K + (long)g * Kg + am) * PQ + kk % PQ];
#define LOAD_B                                                                                 \
  const int c = (int)(bj / RS), r = (int)((bj % RS) / S), s = (int)(bj % S);                   \
  const long n = kk / PQ;                                                                      \
  const int p = (int)((kk % PQ) / Q), q = (int)(kk % Q);                                       \
  const int ih = p * sh - ph + r * dh, iw = q * sw - pw + s * dw;                              \
  if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[((n * C + (long)g * Cg + c) * H + ih) * W + iw];
#define STORE dwt[((long)g * Kg + m) * Cg * RS + j] = acc;
  GEMM_BODY(Kg, Cg * RS, N * PQ)
#undef LOAD_A
#undef LOAD_B
#undef STORE
}

/* y[n,k,:,:] += bias[k] */
__kernel void conv_bias(long total, int K, long PQ, __global real* y, long yo,
                        __global const real* b, long bo) {
  y += yo;
  b += bo;
  for (long t = GID; t < total; t += GSIZE) y[t] += b[(t / PQ) % K];
}
/* db[k] = sum over n, p, q of dy[n,k,p,q]: one work-group per k. */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void conv_grad_bias(long N, int K, long PQ, __global const real* dy, long dyo, __global real* db,
                    long dbo) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  for (long k = get_group_id(0); k < K; k += get_num_groups(0)) {
    real acc = 0;
    for (long n = 0; n < N; ++n) {
      __global const real* d = dy + dyo + (n * K + k) * PQ;
      for (long i = lid; i < PQ; i += SWG) acc += d[i];
    }
    acc = wg_sum(s, acc);
    if (lid == 0) db[dbo + k] = acc;
  }
}

/* ---- pooling --------------------------------------------------------------------------------
 * Planes of H x W pooled to P x Q; window wh ww, stride sh sw, padding ph pw. */
#define POOL_ARGS                                                                              \
  long planes, int H, int W, int P, int Q, int wh, int ww, int sh, int sw, int ph, int pw

/* The first maximum of window (p, q) in row-major order as h W + w; NaN counts as the largest
 * value (the first NaN wins). -1 for a window without elements (the geometry rules it out). */
int window_argmax(__global const real* xp, int H, int W, int h0, int w0, int wh, int ww) {
  int bi = -1;
  real best = 0;
  for (int r = max(h0, 0); r < min(h0 + wh, H); ++r)
    for (int s = max(w0, 0); s < min(w0 + ww, W); ++s) {
      const real v = xp[r * W + s];
      if (bi < 0 || v > best || (isnan(v) && !isnan(best))) {
        best = v;
        bi = r * W + s;
      }
    }
  return bi;
}

__kernel void pool_max(POOL_ARGS, __global const real* x, long xo, __global real* y, long yo,
                       int with_indices, __global int* idx, long io) {
  x += xo;
  y += yo;
  const long PQ = (long)P * Q, HW = (long)H * W, total = planes * PQ;
  for (long t = GID; t < total; t += GSIZE) {
    const int q = (int)(t % Q), p = (int)((t / Q) % P);
    __global const real* xp = x + (t / PQ) * HW;
    const int bi = window_argmax(xp, H, W, p * sh - ph, q * sw - pw, wh, ww);
    y[t] = bi < 0 ? (real)NAN : xp[bi];
    if (with_indices) idx[io + t] = bi;
  }
}

/* The pooled rows p whose window covers input row h: [lo, hi]. */
#define COVER(h, pad, win, st, PP, lo, hi)                                                     \
  const int lo = max(0, (h + pad - win + st) >= 0 ? (h + pad - win + st) / st : 0);             \
  const int hi = min(PP - 1, (h + pad) / st);

/* dx[h,w] = the sum of dy over the windows whose first maximum (recomputed from x) is (h,w). */
__kernel void pool_max_grad(POOL_ARGS, __global const real* x, long xo, __global const real* dy,
                            long dyo, __global real* dx, long dxo) {
  x += xo;
  dy += dyo;
  dx += dxo;
  const long PQ = (long)P * Q, HW = (long)H * W, total = planes * HW;
  for (long t = GID; t < total; t += GSIZE) {
    const int iw = (int)(t % W), ih = (int)((t / W) % H);
    const long plane = t / HW;
    __global const real* xp = x + plane * HW;
    __global const real* dp = dy + plane * PQ;
    const int me = ih * W + iw;
    COVER(ih, ph, wh, sh, P, p0, p1)
    COVER(iw, pw, ww, sw, Q, q0, q1)
    real acc = 0;
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q)
        if (window_argmax(xp, H, W, p * sh - ph, q * sw - pw, wh, ww) == me)
          acc += dp[(long)p * Q + q];
    dx[t] = acc;
  }
}
/* From indices (no window geometry in this op): dx = 0, then dy[p,q] added at indices[p,q] in
 * row-major (p, q) order, the reference's order. One work-group per plane; work-item l owns the
 * elements i with i % lanes == l, zeroes them and adds what lands on them, so no two work-items
 * write one element (no atomics, no barrier). Indices outside the plane add nothing. */
__kernel void pool_max_grad_idx(long planes, long HW, long PQ, __global const real* dy, long dyo,
                                __global const int* idx, long io, __global real* dx, long dxo) {
  const int lid = get_local_id(0), lanes = get_local_size(0);
  for (long plane = get_group_id(0); plane < planes; plane += get_num_groups(0)) {
    __global const real* dp = dy + dyo + plane * PQ;
    __global const int* ip = idx + io + plane * PQ;
    __global real* xp = dx + dxo + plane * HW;
    for (long i = lid; i < HW; i += lanes) xp[i] = 0;
    for (long j = 0; j < PQ; ++j) {
      const int i = ip[j];
      if (i >= 0 && i < HW && i % lanes == lid) xp[i] += dp[j];
    }
  }
}

/* The divisor of window (p, q): wh ww with include_padding, else its elements inside x. */
int window_count(int H, int W, int h0, int w0, int wh, int ww, int incl) {
  if (incl) return wh * ww;
  return (min(h0 + wh, H) - max(h0, 0)) * (min(w0 + ww, W) - max(w0, 0));
}
__kernel void pool_avg(POOL_ARGS, int incl, __global const real* x, long xo, __global real* y,
                       long yo) {
  x += xo;
  y += yo;
  const long PQ = (long)P * Q, HW = (long)H * W, total = planes * PQ;
  for (long t = GID; t < total; t += GSIZE) {
    const int q = (int)(t % Q), p = (int)((t / Q) % P);
    __global const real* xp = x + (t / PQ) * HW;
    const int h0 = p * sh - ph, w0 = q * sw - pw;
    real acc = 0;
    for (int r = max(h0, 0); r < min(h0 + wh, H); ++r)
      for (int s = max(w0, 0); s < min(w0 + ww, W); ++s) acc += xp[r * W + s];
    y[t] = acc / (real)window_count(H, W, h0, w0, wh, ww, incl);
  }
}
__kernel void pool_avg_grad(POOL_ARGS, int incl, __global const real* dy, long dyo,
                            __global real* dx, long dxo) {
  dy += dyo;
  dx += dxo;
  const long PQ = (long)P * Q, HW = (long)H * W, total = planes * HW;
  for (long t = GID; t < total; t += GSIZE) {
    const int iw = (int)(t % W), ih = (int)((t / W) % H);
    __global const real* dp = dy + (t / HW) * PQ;
    COVER(ih, ph, wh, sh, P, p0, p1)
    COVER(iw, pw, ww, sw, Q, q0, q1)
    real acc = 0;
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q)
        acc += dp[(long)p * Q + q] /
               (real)window_count(H, W, p * sh - ph, q * sw - pw, wh, ww, incl);
    dx[t] = acc;
  }
}

/* ---- LRN across channels: s[c] = k + alpha / n sum_{c' in [c - n/2, c + (n-1)/2]} x[c']^2 ---- */
real lrn_s(__global const real* col, long HW, int c, int C, int n, real alpha, real k) {
  real acc = 0;
  for (int j = max(0, c - n / 2); j <= min(C - 1, c + (n - 1) / 2); ++j) {
    const real v = col[j * HW];
    acc += v * v;
  }
  return k + alpha / (real)n * acc;
}
__kernel void lrn_fwd(long total, int C, long HW, int n, real alpha, real beta, real k,
                      __global const real* x, long xo, __global real* y, long yo) {
  x += xo;
  y += yo;
  for (long t = GID; t < total; t += GSIZE) {
    const int c = (int)((t / HW) % C);
    __global const real* col = x + (t / (HW * C)) * C * HW + t % HW;
    y[t] = x[t] * pow(lrn_s(col, HW, c, C, n, alpha, k), -beta);
  }
}
/* s of every element into scratch (the workspace), for lrn_grad. */
__kernel void lrn_scale(long total, int C, long HW, int n, real alpha, real k,
                        __global const real* x, long xo, __global real* sc) {
  x += xo;
  for (long t = GID; t < total; t += GSIZE) {
    const int c = (int)((t / HW) % C);
    sc[t] = lrn_s(x + (t / (HW * C)) * C * HW + t % HW, HW, c, C, n, alpha, k);
  }
}
/* dx[c] = dy[c] s[c]^-beta - 2 alpha beta / n x[c] sum_{c': c in W(c')} dy[c'] y[c'] / s[c'],
 * c' in [c - (n-1)/2, c + n/2]. */
__kernel void lrn_grad(long total, int C, long HW, int n, real alpha, real beta,
                       __global const real* x, long xo, __global const real* y, long yo,
                       __global const real* dy, long dyo, __global real* dx, long dxo,
                       __global const real* sc) {
  x += xo;
  y += yo;
  dy += dyo;
  dx += dxo;
  for (long t = GID; t < total; t += GSIZE) {
    const int c = (int)((t / HW) % C);
    const long col = (t / (HW * C)) * C * HW + t % HW;
    real acc = 0;
    for (int j = max(0, c - (n - 1) / 2); j <= min(C - 1, c + n / 2); ++j) {
      const long e = col + j * HW;
      acc += dy[e] * y[e] / sc[e];
    }
    dx[t] = dy[t] * pow(sc[t], -beta) - (real)2 * alpha * beta / (real)n * x[t] * acc;
  }
}

/* ---- dropout: splitmix64 of pcy_nn.h (PCY_NN_DROPOUT_MIX) ------------------------------------ */
__kernel void dropout_fwd(long n, ulong seed, uint thr, real scale, __global const real* x, long xo,
                          __global real* y, long yo, __global uchar* mask, long mo) {
  x += xo;
  y += yo;
  mask += mo;
  for (long i = GID; i < n; i += GSIZE) {
    ulong z = seed + ((ulong)i + 1UL) * 0x9E3779B97F4A7C15UL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    z = z ^ (z >> 31);
    const int keep = (uint)(z >> 40) >= thr;
    mask[i] = (uchar)keep;
    y[i] = keep ? x[i] * scale : (real)0;
  }
}
__kernel void dropout_bwd(long n, real scale, __global const real* dy, long dyo,
                          __global const uchar* mask, long mo, __global real* dx, long dxo) {
  dy += dyo;
  mask += mo;
  dx += dxo;
  for (long i = GID; i < n; i += GSIZE) dx[i] = mask[i] != 0 ? dy[i] * scale : (real)0;
}

/* ---- layer_norm / rms_norm (pcy_nn.h): one work-group per row of n ---------------------------
 * Two passes over the row (the mean, then the squares about it); save: 1 mean, 2 rstd. */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void norm_fwd(long outer, long n, int layer, real eps, __global const real* x, long xo,
              __global const real* w, long wo, __global const real* b, long bo, __global real* y,
              long yo, __global real* mean, long mo, __global real* rstd, long ro, int save) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  w += wo;
  b += bo;
  for (long r = get_group_id(0); r < outer; r += get_num_groups(0)) {
    __global const real* xr = x + xo + r * n;
    __global real* yr = y + yo + r * n;
    real mu = 0;
    if (layer) {
      real acc = 0;
      for (long j = lid; j < n; j += SWG) acc += xr[j];
      mu = wg_sum(s, acc) / (real)n;
    }
    real acc = 0;
    for (long j = lid; j < n; j += SWG) {
      const real d = xr[j] - mu;
      acc += d * d;
    }
    const real rs = (real)1 / sqrt(wg_sum(s, acc) / (real)n + eps);
    for (long j = lid; j < n; j += SWG) {
      real h = (xr[j] - mu) * rs * w[j];
      if (layer) h += b[j];
      yr[j] = h;
    }
    if (lid == 0) {
      if (save & 1) mean[mo + r] = mu;
      if (save & 2) rstd[ro + r] = rs;
    }
  }
}
/* dx per row: rstd (g - mean(g) - xhat mean(g xhat)), g = dy w (rms_norm: no mean(g) term). */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void norm_bwd_row(long outer, long n, int layer, __global const real* x, long xo,
                  __global const real* w, long wo, __global const real* mean, long mo,
                  __global const real* rstd, long ro, __global const real* dy, long dyo,
                  __global real* dx, long dxo) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  w += wo;
  for (long r = get_group_id(0); r < outer; r += get_num_groups(0)) {
    __global const real* xr = x + xo + r * n;
    __global const real* dyr = dy + dyo + r * n;
    __global real* dxr = dx + dxo + r * n;
    const real mu = layer ? mean[mo + r] : (real)0, rs = rstd[ro + r];
    real sg = 0, sgx = 0;
    for (long j = lid; j < n; j += SWG) {
      const real g = dyr[j] * w[j];
      sg += g;
      sgx += g * ((xr[j] - mu) * rs);
    }
    sg = layer ? wg_sum(s, sg) / (real)n : (real)0;
    sgx = wg_sum(s, sgx) / (real)n;
    for (long j = lid; j < n; j += SWG)
      dxr[j] = rs * (dyr[j] * w[j] - sg - ((xr[j] - mu) * rs) * sgx);
  }
}
/* dweight[j] = sum over rows of dy xhat, dbias[j] = sum of dy: one work-item per column, the
 * rows in order (the same bits on every run). */
__kernel void norm_bwd_cols(long outer, long n, int layer, __global const real* x, long xo,
                            __global const real* mean, long mo, __global const real* rstd, long ro,
                            __global const real* dy, long dyo, __global real* dw, long dwo,
                            __global real* db, long dbo) {
  for (long j = GID; j < n; j += GSIZE) {
    real aw = 0, ab = 0;
    for (long r = 0; r < outer; ++r) {
      const real d = dy[dyo + r * n + j];
      const real mu = layer ? mean[mo + r] : (real)0;
      aw += d * ((x[xo + r * n + j] - mu) * rstd[ro + r]);
      ab += d;
    }
    dw[dwo + j] = aw;
    if (layer) db[dbo + j] = ab;
  }
}

/* ---- batch_norm (pcy_nn.h): one work-group per channel over its M = N sp elements ------------
 * Channel c's element i (0 <= i < M, n = i / sp, s = i % sp) is x[(n C + c) sp + s]; each
 * work-item takes every SWG-th, the work-group sums in a fixed tree (the same bits every run).
 * Training: two passes (the mean, then the squares about it). flags: 1 training, 2 running_mean,
 * 4 running_var, 8 save_mean, 16 save_rstd (those absent are the dummy buffer, not touched). */
#define BN_AT(p, i) (p)[((i) / sp) * cs + ((i) % sp)]
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void bn_fwd(long N, long C, long sp, int flags, real momentum, real eps, __global const real* x,
            long xo, __global const real* w, long wo, __global const real* b, long bo,
            __global real* rm, long rmo, __global real* rv, long rvo, __global real* y, long yo,
            __global real* sm, long smo, __global real* sr, long sro) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  const long M = N * sp, cs = C * sp;
  for (long c = get_group_id(0); c < C; c += get_num_groups(0)) {
    __global const real* xc = x + xo + c * sp;
    __global real* yc = y + yo + c * sp;
    real mu, rs;
    if (flags & 1) {
      /* The running statistics are read by every work-item before the sums' barriers and
       * written after them from those copies (an update that read them under `lid == 0` after
       * the barriers was applied once per work-item on PoCL 3.1). */
      const real rm0 = (flags & 2) ? rm[rmo + c] : (real)0;
      const real rv0 = (flags & 4) ? rv[rvo + c] : (real)0;
      real acc = 0;
      for (long i = lid; i < M; i += SWG) acc += BN_AT(xc, i);
      mu = wg_sum(s, acc) / (real)M;
      acc = 0;
      for (long i = lid; i < M; i += SWG) {
        const real d = BN_AT(xc, i) - mu;
        acc += d * d;
      }
      const real var = wg_sum(s, acc) / (real)M;
      rs = (real)1 / sqrt(var + eps);
      if (lid == 0) {
        if (flags & 2) rm[rmo + c] = ((real)1 - momentum) * rm0 + momentum * mu;
        if (flags & 4)
          rv[rvo + c] = ((real)1 - momentum) * rv0 + momentum * (var * (real)M / (real)(M - 1));
      }
    } else {
      mu = rm[rmo + c];
      rs = (real)1 / sqrt(rv[rvo + c] + eps);
    }
    const real wc = w[wo + c], bc = b[bo + c];
    for (long i = lid; i < M; i += SWG) BN_AT(yc, i) = (BN_AT(xc, i) - mu) * rs * wc + bc;
    if (lid == 0) {
      if (flags & 8) sm[smo + c] = mu;
      if (flags & 16) sr[sro + c] = rs;
    }
  }
}
/* The gradient per channel: sum dy and sum dy xhat (dbias and dweight), then dx = rstd (g -
 * mean(g) - xhat mean(g xhat)) in training, rstd g otherwise (g = dy w). flags: 1 training,
 * 2 dweight, 4 dbias. */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void bn_bwd(long N, long C, long sp, int flags, __global const real* x, long xo,
            __global const real* w, long wo, __global const real* mean, long mo,
            __global const real* rstd, long ro, __global const real* dy, long dyo,
            __global real* dx, long dxo, __global real* dw, long dwo, __global real* db, long dbo) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  const long M = N * sp, cs = C * sp;
  for (long c = get_group_id(0); c < C; c += get_num_groups(0)) {
    __global const real* xc = x + xo + c * sp;
    __global const real* dyc = dy + dyo + c * sp;
    __global real* dxc = dx + dxo + c * sp;
    const real mu = mean[mo + c], rs = rstd[ro + c], wc = w[wo + c];
    real sd = 0, sdx = 0;
    for (long i = lid; i < M; i += SWG) {
      const real d = BN_AT(dyc, i);
      sd += d;
      sdx += d * ((BN_AT(xc, i) - mu) * rs);
    }
    sd = wg_sum(s, sd);
    sdx = wg_sum(s, sdx);
    if (lid == 0) {
      if (flags & 2) dw[dwo + c] = sdx;
      if (flags & 4) db[dbo + c] = sd;
    }
    const real mg = (flags & 1) ? wc * sd / (real)M : (real)0;
    const real mgx = (flags & 1) ? wc * sdx / (real)M : (real)0;
    if (flags & 1)
      for (long i = lid; i < M; i += SWG)
        BN_AT(dxc, i) = rs * (BN_AT(dyc, i) * wc - mg - ((BN_AT(xc, i) - mu) * rs) * mgx);
    else /* x does not enter (a NaN x leaves dx finite) */
      for (long i = lid; i < M; i += SWG) BN_AT(dxc, i) = rs * (BN_AT(dyc, i) * wc);
  }
}
#undef BN_AT

/* ---- cross_entropy (pcy_nn.h): one work-group per row of C classes ---------------------------
 * The row's max (fmax skips a NaN, the sums take it), then sum e^(x - max) and sum x. red 0
 * writes each row's loss; red 1 (mean) and 2 (sum) run in ONE work-group, its first work-item
 * adding the rows' losses in row order (the same bits on every run). save: lse written. */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void xent_fwd(long rows, long C, long ignore, real eps, int red, __global const real* x, long xo,
              __global const int* labels, long lo, __global real* loss, long losso,
              __global real* lse, long lseo, int save) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  real total = 0;
  long count = 0;
  for (long r = get_group_id(0); r < rows; r += get_num_groups(0)) {
    __global const real* xr = x + xo + r * C;
    real m = -INFINITY;
    for (long j = lid; j < C; j += SWG) m = fmax(m, xr[j]);
    m = wg_max(s, m);
    real acc = 0, sx = 0;
    for (long j = lid; j < C; j += SWG) {
      const real v = xr[j];
      acc += exp(v - m);
      sx += v;
    }
    acc = wg_sum(s, acc);
    sx = wg_sum(s, sx);
    if (lid == 0) {
      const real l = m + log(acc);
      if (save) lse[lseo + r] = l;
      const int t = labels[lo + r];
      real v = 0;
      if ((long)t != ignore) {
        ++count;
        v = t >= 0 && (long)t < C
                ? ((real)1 - eps) * (l - xr[t]) + (eps > 0 ? eps * (l - sx / (real)C) : (real)0)
                : (real)NAN; /* the smoothing term only where eps > 0: a -inf logit */
        total += v;
      }
      if (red == 0) loss[losso + r] = v;
    }
  }
  if (lid == 0 && red != 0) loss[losso] = red == 1 ? total / (real)count : total; /* 0/0: NaN */
}
/* dlogits = g (e^(x - lse) - (1 - eps) onehot(t) - eps / C); red 1 (mean): every work-group
 * counts the rows not ignored itself (a pass over the labels). Ignored rows 0, labels outside
 * the classes NaN. */
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void xent_bwd(long rows, long C, long ignore, real eps, int red, __global const real* x, long xo,
              __global const int* labels, long lo, __global const real* lse, long lseo,
              __global const real* dloss, long dlo, __global real* dx, long dxo) {
  __local real s[SWG];
  const int lid = get_local_id(0);
  real g0 = red == 0 ? (real)0 : dloss[dlo];
  if (red == 1) {
    real cnt = 0;
    for (long r = lid; r < rows; r += SWG) cnt += (long)labels[lo + r] != ignore ? (real)1 : (real)0;
    g0 /= wg_sum(s, cnt);
  }
  const real off = eps / (real)C;
  for (long r = get_group_id(0); r < rows; r += get_num_groups(0)) {
    __global const real* xr = x + xo + r * C;
    __global real* dr = dx + dxo + r * C;
    const int t = labels[lo + r];
    if ((long)t == ignore) {
      for (long j = lid; j < C; j += SWG) dr[j] = 0;
      continue;
    }
    const int ok = t >= 0 && (long)t < C;
    const real g = red == 0 ? dloss[dlo + r] : g0, l = lse[lseo + r];
    for (long j = lid; j < C; j += SWG)
      dr[j] = ok ? g * (exp(xr[j] - l) - off - (j == (long)t ? (real)1 - eps : (real)0)) : (real)NAN;
  }
}

/* ---- embedding (pcy_nn.h) ---------------------------------------------------------------------
 * The forward: a gather, one work-item per element of y (n x D), coalesced along D; an index
 * outside [0, V) gives NaN. */
__kernel void emb_fwd(long n, long D, long V, __global const real* w, long wo,
                      __global const int* idx, long io, __global real* y, long yo) {
  const long total = n * D;
  for (long e = GID; e < total; e += GSIZE) {
    const long i = e / D, j = e - i * D;
    const int v = idx[io + i];
    y[yo + e] = v >= 0 && (long)v < V ? w[wo + (long)v * D + j] : (real)NAN;
  }
}
/* The gradient, deterministic: keys (index << 32 | position) of the positions that contribute
 * (index in [0, V), not padding_idx), the rest ULONG_MAX (after every real key); P keys, P a
 * power of two >= 2 SWG. Real keys are distinct, so the sorted order is unique. */
__kernel void emb_keys(long n, long P, long V, long pad, __global const int* idx, long io,
                       __global ulong* keys) {
  for (long i = GID; i < P; i += GSIZE) {
    ulong k = ULONG_MAX;
    if (i < n) {
      const int v = idx[io + i];
      if (v >= 0 && (long)v < V && (long)v != pad) k = ((ulong)(uint)v << 32) | (ulong)i;
    }
    keys[i] = k;
  }
}
/* Bitonic sort of the P keys, ascending. A compare-exchange of step (k, j): element i (bit j
 * clear) and i + j, ascending where bit k of i is clear. emb_sort_global does one step over the
 * whole array (P / 2 work-items); emb_sort_local the steps whose pairs stay inside a chunk of
 * 2 SWG keys, in local memory: for k from k0 to k1 (doubling), j from (k == k0 ? j0 : k / 2)
 * down to 1. */
void emb_cmpx(ulong* a, ulong* b, int up) {
  const ulong x = *a, y = *b;
  if ((x > y) == up) {
    *a = y;
    *b = x;
  }
}
__kernel void emb_sort_global(long P, long k, long j, __global ulong* keys) {
  for (long t = GID; t < P / 2; t += GSIZE) {
    const long i = 2 * j * (t / j) + t % j;
    ulong a = keys[i], b = keys[i + j];
    emb_cmpx(&a, &b, (i & k) == 0);
    keys[i] = a;
    keys[i + j] = b;
  }
}
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void emb_sort_local(long P, long k0, long k1, long j0, __global ulong* keys) {
  __local ulong s[2 * SWG];
  const int lid = get_local_id(0);
  for (long base = (long)get_group_id(0) * 2 * SWG; base < P; base += (long)get_num_groups(0) * 2 * SWG) {
    s[lid] = keys[base + lid];
    s[lid + SWG] = keys[base + lid + SWG];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long k = k0; k <= k1; k <<= 1)
      for (long j = k == k0 ? j0 : k >> 1; j > 0; j >>= 1) {
        const long i = 2 * j * (lid / j) + lid % j;
        ulong a = s[i], b = s[i + j];
        emb_cmpx(&a, &b, ((base + i) & k) == 0);
        s[i] = a;
        s[i + j] = b;
        barrier(CLK_LOCAL_MEM_FENCE);
      }
    keys[base + lid] = s[lid];
    keys[base + lid + SWG] = s[lid + SWG];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}
/* dweight: a work-group per vocabulary row v; its segment of the sorted keys (binary search for
 * v << 32 and (v + 1) << 32), then D columns across the work-items, each summing its column of
 * the segment's dy rows in position order (the keys' order) from +0. Rows without keys get 0.
 * Every key read is checked to be v's, so no order of the keys could read outside dy. */
long emb_lower(__global const ulong* keys, long P, ulong key) {
  long lo = 0, hi = P;
  while (lo < hi) {
    const long mid = lo + (hi - lo) / 2;
    if (keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1)))
void emb_rows(long V, long D, long P, __global const ulong* keys, __global const real* dy,
              long dyo, __global real* dw, long dwo) {
  const int lid = get_local_id(0);
  for (long v = get_group_id(0); v < V; v += get_num_groups(0)) {
    const long lo = emb_lower(keys, P, (ulong)v << 32),
               hi = emb_lower(keys, P, (ulong)(v + 1) << 32);
    for (long j = lid; j < D; j += SWG) {
      real acc = (real)0;
      for (long s = lo; s < hi; ++s) {
        const ulong k = keys[s];
        /* always true of sorted keys; keeps any other order from reading outside dy */
        if ((long)(k >> 32) == v) acc += dy[dyo + (long)(k & 0xffffffffUL) * D + j];
      }
      dw[dwo + v * D + j] = acc;
    }
  }
}
