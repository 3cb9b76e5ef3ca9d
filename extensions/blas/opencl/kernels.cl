
#ifdef PCY_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#ifndef cl_khr_fp64
#error "the device has no cl_khr_fp64: f64 BLAS ops are not available"
#endif
#endif
typedef REAL real;

#define ALPHA (((flags) & 1) ? pa[0] : a)
#define BETA (((flags) & 2) ? pb[0] : b)
/* alpha * v + beta * old, where alpha == 0 drops v (not read: NaN there stays out) and
 * beta == 0 drops old (not read). OLD is only evaluated when beta != 0. */
#define COMBINE(al, v, be, OLD)                                                                 \
  ((al) == (real)0 ? ((be) == (real)0 ? (real)0 : (be) * (OLD))                                 \
                   : ((be) == (real)0 ? (al) * (v) : (al) * (v) + (be) * (OLD)))

__kernel void axpby_k(int n, real a, __global const real* pa, real b, __global const real* pb,
                      int flags, __global const real* x, int incx, __global real* y, int incy) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const real al = ALPHA, be = BETA;
  const long iy = (long)i * incy;
  y[iy] = COMBINE(al, x[(long)i * incx], be, y[iy]);
}

/* alpha == 0 returns at once, as reference axpy: y keeps its bits even where x is NaN. */
__kernel void axpy_k(int n, real a, __global const real* pa, int flags, __global const real* x,
                     int incx, __global real* y, int incy) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const real al = ALPHA;
  if (al == (real)0) return;
  y[(long)i * incy] += al * x[(long)i * incx];
}

/* x = beta * x over a rows x cols window (ld apart; a vector is cols 1, ld inc), beta == 0
 * storing zeros without reading: the quick paths (alpha == 0, k == 0) and the clearing of an
 * output a vendor routine would read even with beta == 0. Dimension 1 walks a batch of such
 * windows, `stride` elements apart (gemm_batched). */
__kernel void scale_k(long total, int cols, real b, __global const real* pb, int flags,
                      __global real* x, int ld, long stride) {
  const long i = get_global_id(0);
  if (i >= total) return;
  const real be = BETA;
  const long ix = get_global_id(1) * stride + (i / cols) * ld + i % cols;
  x[ix] = be == (real)0 ? (real)0 : be * x[ix];
}

__kernel void scal_k(int n, real a, __global const real* pa, int flags, __global real* x,
                     int incx) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const real al = ALPHA;
  x[(long)i * incx] *= al;
}

__kernel void copy_k(int n, __global const real* x, int incx, __global real* y, int incy) {
  const int i = get_global_id(0);
  if (i >= n) return;
  y[(long)i * incy] = x[(long)i * incx];
}

__kernel void swap_k(int n, __global real* x, int incx, __global real* y, int incy) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const real t = x[(long)i * incx];
  x[(long)i * incx] = y[(long)i * incy];
  y[(long)i * incy] = t;
}

/* Reductions, stage 1: each work-group folds a grid-strided share of the vector into one
 * partial sum. mode 0: sum |x|, 1: sum x*y. */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void reduce_1(int n, int mode, __global const real* x, int incx, __global const real* y,
              int incy, __global real* part) {
  __local real s[RWG];
  const int lid = get_local_id(0);
  const int stride = get_global_size(0);
  real acc = 0;
  if (mode == 0) {
    for (int i = get_global_id(0); i < n; i += stride) acc += fabs(x[(long)i * incx]);
  } else {
    for (int i = get_global_id(0); i < n; i += stride)
      acc = fma(x[(long)i * incx], y[(long)i * incy], acc);
  }
  s[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] += s[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) part[get_group_id(0)] = s[0];
}

/* Stage 2: one work-group folds the partial sums. */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void reduce_2(int groups, __global const real* part, __global real* result) {
  __local real s[RWG];
  const int lid = get_local_id(0);
  real acc = 0;
  for (int i = lid; i < groups; i += RWG) acc += part[i];
  s[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] += s[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) result[0] = s[0];
}

/* nrm2 without overflow or underflow: Blue's scaled sum of squares (as LAPACK's dnrm2 since
 * 3.10). Each |x| goes to one of three accumulators: below TSML scaled up by SSML, above TBIG
 * scaled down by SBIG, the rest as is, so no square overflows or underflows; the three sums
 * are plain sums, so they fold in parallel, and stage 2 combines them once. The constants are
 * powers of two (exact scaling) from the type's digits and exponent range. */
#ifdef PCY_FP64
#define TSML 0x1p-511
#define TBIG 0x1p486
#define SSML 0x1p537
#define SBIG 0x1p-538
#else
#define TSML 0x1p-63f
#define TBIG 0x1p52f
#define SSML 0x1p75f
#define SBIG 0x1p-76f
#endif

#define NRM2_FOLD(s)                                                                            \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                 \
  for (int h = RWG / 2; h > 0; h >>= 1) {                                                       \
    if (lid < h) {                                                                              \
      s[0][lid] += s[0][lid + h];                                                               \
      s[1][lid] += s[1][lid + h];                                                               \
      s[2][lid] += s[2][lid + h];                                                               \
    }                                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                               \
  }

/* Stage 1: part[g], part[groups + g], part[2 groups + g] = the small, medium, big sums. */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void nrm2_1(int n, __global const real* x, int incx, int groups, __global real* part) {
  __local real s[3][RWG];
  const int lid = get_local_id(0);
  const int stride = get_global_size(0);
  real sml = 0, med = 0, big = 0;
  for (int i = get_global_id(0); i < n; i += stride) {
    const real ax = fabs(x[(long)i * incx]);
    if (ax > TBIG) {
      const real v = ax * SBIG;
      big = fma(v, v, big);
    } else if (ax < TSML) {
      const real v = ax * SSML;
      sml = fma(v, v, sml);
    } else {
      med = fma(ax, ax, med); /* NaN lands here and propagates */
    }
  }
  s[0][lid] = sml;
  s[1][lid] = med;
  s[2][lid] = big;
  NRM2_FOLD(s)
  if (lid == 0) {
    const int g = get_group_id(0);
    part[g] = s[0][0];
    part[groups + g] = s[1][0];
    part[2 * groups + g] = s[2][0];
  }
}

/* Stage 2: fold the three sums of every group, then combine them into the norm. */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void nrm2_2(int groups, __global const real* part, __global real* result) {
  __local real s[3][RWG];
  const int lid = get_local_id(0);
  real sml = 0, med = 0, big = 0;
  for (int i = lid; i < groups; i += RWG) {
    sml += part[i];
    med += part[groups + i];
    big += part[2 * groups + i];
  }
  s[0][lid] = sml;
  s[1][lid] = med;
  s[2][lid] = big;
  NRM2_FOLD(s)
  if (lid != 0) return;
  sml = s[0][0];
  med = s[1][0];
  big = s[2][0];
  real scl = 1, sumsq = med;
  if (big > 0) {
    /* the medium values matter next to the big ones only as scaled down; the small never */
    if (med > 0 || isnan(med)) big += (med * SBIG) * SBIG;
    scl = 1 / SBIG;
    sumsq = big;
  } else if (sml > 0) {
    if (med > 0 || isnan(med)) {
      const real ymed = sqrt(med), ysml = sqrt(sml) / SSML;
      const real ymin = ysml > ymed ? ymed : ysml, ymax = ysml > ymed ? ysml : ymed;
      scl = 1;
      sumsq = ymax * ymax * (1 + (ymin / ymax) * (ymin / ymax));
    } else {
      scl = 1 / SSML;
      sumsq = sml;
    }
  }
  result[0] = scl * sqrt(sumsq);
}

/* y = alpha A x + beta y, A m x n row-major: one work-group per row, reduced in local memory. */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))
void gemv_n(int m, int n, real a, __global const real* pa, real b, __global const real* pb,
            int flags, __global const real* A, int lda, __global const real* x, int incx,
            __global real* y, int incy) {
  __local real s[RWG];
  const int row = get_group_id(0);
  const int lid = get_local_id(0);
  real acc = 0;
  __global const real* Ar = A + (long)row * lda;
  for (int j = lid; j < n; j += RWG) acc = fma(Ar[j], x[(long)j * incx], acc);
  s[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] += s[lid + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    const real al = ALPHA, be = BETA;
    const long iy = (long)row * incy;
    y[iy] = COMBINE(al, s[0], be, y[iy]);
  }
}

/* y = alpha A^T x + beta y: one work-item per column, reading rows contiguously. */
__kernel void gemv_t(int m, int n, real a, __global const real* pa, real b,
                     __global const real* pb, int flags, __global const real* A, int lda,
                     __global const real* x, int incx, __global real* y, int incy) {
  const int col = get_global_id(0);
  if (col >= n) return;
  real acc = 0;
  for (int i = 0; i < m; ++i) acc = fma(A[(long)i * lda + col], x[(long)i * incx], acc);
  const real al = ALPHA, be = BETA;
  const long iy = (long)col * incy;
  y[iy] = COMBINE(al, acc, be, y[iy]);
}

/* C = alpha op(A) op(B) + beta C, row-major. Dimension 2 of the grid walks a strided batch
 * (gemm_batched: the product of index z reads A + z sa, B + z sb and writes C + z sc; gemm is
 * the batch of one). */
#define A_AT(r, c) (TA ? A[(long)(c) * lda + (r)] : A[(long)(r) * lda + (c)])
#define B_AT(r, c) (TB ? B[(long)(c) * ldb + (r)] : B[(long)(r) * ldb + (c)])

#define GEMM_STORE()                                                                        \
  const real al = ALPHA, be = BETA;                                                         \
  for (int wm = 0; wm < WPT_M; ++wm) {                                                      \
    const int row = ROW(wm);                                                                \
    if (row >= m) continue;                                                                 \
    for (int wn = 0; wn < WPT_N; ++wn) {                                                    \
      const int col = COL(wn);                                                              \
      if (col >= n) continue;                                                               \
      const long ic = (long)row * ldc + col;                                                \
      C[ic] = COMBINE(al, acc[wm][wn], be, C[ic]);                                          \
    }                                                                                       \
  }

#ifdef GEMM_TILED
/* GPU form: TS_M x TS_N tile per work-group, operands staged through local memory in TS_K
 * slices, each work-item accumulating WPT_M x WPT_N outputs in registers (strided so that
 * neighbouring work-items touch neighbouring columns). */
#define RTS_M (TS_M / WPT_M)
#define RTS_N (TS_N / WPT_N)
#define ROW(wm) (row0 + ty + (wm) * RTS_M)
#define COL(wn) (col0 + tx + (wn) * RTS_N)
#define GEMM_KERNEL(NAME, TA_, TB_)                                                             \
  __kernel __attribute__((reqd_work_group_size(RTS_N, RTS_M, 1)))                               \
  void NAME(int m, int n, int k, real a, __global const real* pa, real b,                       \
            __global const real* pb, int flags, __global const real* A, int lda,                \
            __global const real* B, int ldb, __global real* C, int ldc, long sa, long sb,       \
            long sc) {                                                                          \
    const int TA = TA_, TB = TB_;                                                               \
    A += get_global_id(2) * sa;                                                                 \
    B += get_global_id(2) * sb;                                                                 \
    C += get_global_id(2) * sc;                                                                 \
    __local real As[TS_K][TS_M + 1];                                                            \
    __local real Bs[TS_K][TS_N + 1];                                                            \
    const int tx = get_local_id(0), ty = get_local_id(1);                                       \
    const int tid = ty * RTS_N + tx;                                                            \
    const int row0 = get_group_id(1) * TS_M, col0 = get_group_id(0) * TS_N;                     \
    real acc[WPT_M][WPT_N];                                                                     \
    for (int wm = 0; wm < WPT_M; ++wm)                                                          \
      for (int wn = 0; wn < WPT_N; ++wn) acc[wm][wn] = 0;                                       \
    for (int t = 0; t < k; t += TS_K) {                                                         \
      for (int e = tid; e < TS_M * TS_K; e += RTS_M * RTS_N) {                                  \
        /* walk memory contiguously: along k for A, along m for A^T */                          \
        const int r = TA ? e % TS_M : e / TS_K, kk = TA ? e / TS_M : e % TS_K;                  \
        const int gr = row0 + r, gk = t + kk;                                                   \
        As[kk][r] = (gr < m && gk < k) ? A_AT(gr, gk) : (real)0;                                \
      }                                                                                         \
      for (int e = tid; e < TS_N * TS_K; e += RTS_M * RTS_N) {                                  \
        const int c = TB ? e / TS_K : e % TS_N, kk = TB ? e % TS_K : e / TS_N;                  \
        const int gc = col0 + c, gk = t + kk;                                                   \
        Bs[kk][c] = (gc < n && gk < k) ? B_AT(gk, gc) : (real)0;                                \
      }                                                                                         \
      barrier(CLK_LOCAL_MEM_FENCE);                                                             \
      for (int kk = 0; kk < TS_K; ++kk) {                                                       \
        real bv[WPT_N];                                                                         \
        for (int wn = 0; wn < WPT_N; ++wn) bv[wn] = Bs[kk][tx + wn * RTS_N];                    \
        for (int wm = 0; wm < WPT_M; ++wm) {                                                    \
          const real av = As[kk][ty + wm * RTS_M];                                              \
          for (int wn = 0; wn < WPT_N; ++wn) acc[wm][wn] = fma(av, bv[wn], acc[wm][wn]);        \
        }                                                                                       \
      }                                                                                         \
      barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    }                                                                                           \
    GEMM_STORE()                                                                                \
  }
#endif

#ifndef GEMM_TILED
/* CPU form (PoCL compiles each work-group as a function; with one work-item per group the
 * explicit vectors are the SIMD). A work-item computes GEMM_MC rows x (2 GEMM_VW) columns of C:
 * per GEMM_KC slice of k it packs B's slice (2 GEMM_VW x GEMM_KC, 8 KiB in f32) contiguously into
 * local memory (B's rows are ldb apart: 4 KiB strides put every row in the same L1 set), then
 * for each tile of GEMM_MR (6) rows keeps 12 vector accumulators in registers (of AVX2's 16, the
 * ISA PoCL targets here): per k step two vector loads from the packed slice, six broadcasts of
 * A, twelve vector FMAs; partial sums wait in local memory between slices. B^T (nt, tt) is
 * packed by columns, so every transpose runs the same inner loop. Dimension 0 walks the column
 * panels: the groups a PoCL thread runs in turn share A's rows. Rows beyond m repeat row m - 1
 * (not stored); a panel reaching past n runs the scalar loop. */
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
typedef CAT(REAL, GEMM_VW) realv;
#define VLOAD CAT(vload, GEMM_VW)
#define VSTORE CAT(vstore, GEMM_VW)
#define GEMMV_STORE(acc, off)                                                                   \
  {                                                                                             \
    realv v = (realv)0;                                                                         \
    if (al != (real)0) v = al * (acc);                                                          \
    if (be != (real)0) v += be * VLOAD(off, Cr);                                                \
    VSTORE(v, off, Cr);                                                                         \
  }
#if GEMM_MR != 6
#error "the CPU vector gemm names six rows (GEMM_ROWS)"
#endif
#define GEMM_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
/* row w of the tile: its A pointer at column kb, stepping by as along k */
#define GEMMV_ROW_INIT(w)                                                                       \
  __global const real* ap##w = A + (long)min(row0 + t + w, m - 1) * ar + (long)kb * as;        \
  realv c0##w = kb == 0 ? (realv)0 : Cs[t + w][0];                                              \
  realv c1##w = kb == 0 ? (realv)0 : Cs[t + w][1];
#define GEMMV_ROW_FMA(w)                                                                        \
  {                                                                                             \
    const realv av = (realv)(*ap##w);                                                           \
    ap##w += as;                                                                                \
    c0##w = fma(av, b0, c0##w);                                                                 \
    c1##w = fma(av, b1, c1##w);                                                                 \
  }
#define GEMMV_ROW_SAVE(w)                                                                       \
  Cs[t + w][0] = c0##w;                                                                         \
  Cs[t + w][1] = c1##w;
#define GEMMV_KERNEL(NAME, TA_, TB_)                                                            \
  __kernel __attribute__((reqd_work_group_size(1, 1, 1)))                                       \
  void NAME(int m, int n, int k, real a, __global const real* pa, real b,                       \
            __global const real* pb, int flags, __global const real* A, int lda,                \
            __global const real* B, int ldb, __global real* C, int ldc, long sa, long sb,       \
            long sc) {                                                                          \
    const int TA = TA_, TB = TB_;                                                               \
    A += get_global_id(2) * sa;                                                                 \
    B += get_global_id(2) * sb;                                                                 \
    C += get_global_id(2) * sc;                                                                 \
    const int col0 = get_global_id(0) * (2 * GEMM_VW), row0 = get_global_id(1) * GEMM_MC;       \
    const int rows = min(GEMM_MC, m - row0);                                                    \
    const real al = ALPHA, be = BETA;                                                           \
    if (col0 + 2 * GEMM_VW > n) {                                                               \
      for (int r = 0; r < rows; ++r) {                                                          \
        const int row = row0 + r;                                                               \
        for (int col = col0; col < n; ++col) {                                                  \
          real acc = 0;                                                                         \
          for (int l = 0; l < k; ++l) acc = fma(A_AT(row, l), B_AT(l, col), acc);              \
          const long ic = (long)row * ldc + col;                                                \
          C[ic] = COMBINE(al, acc, be, C[ic]);                                                  \
        }                                                                                       \
      }                                                                                         \
      return;                                                                                   \
    }                                                                                           \
    __local real Bs[GEMM_KC * 2 * GEMM_VW]; /* B's slice, packed (vload/vstore only) */          \
    __local realv Cs[GEMM_MC][2];      /* the partial sums between k slices */                 \
    for (int kb = 0; kb < k; kb += GEMM_KC) {                                                   \
      const int kc = min(GEMM_KC, k - kb);                                                      \
      if (TB) { /* B^T: each of the tile's columns is contiguous along k */                    \
        for (int c = 0; c < 2 * GEMM_VW; ++c) {                                                 \
          __global const real* Bc = B + (long)(col0 + c) * ldb + kb;                            \
          for (int l = 0; l < kc; ++l) Bs[l * 2 * GEMM_VW + c] = Bc[l];                         \
        }                                                                                       \
      } else {                                                                                  \
        __global const real* Bp = B + (long)kb * ldb + col0;                                    \
        for (int l = 0; l < kc; ++l, Bp += ldb) {                                               \
          VSTORE(VLOAD(0, Bp), 2 * l, Bs);                                                      \
          VSTORE(VLOAD(1, Bp), 2 * l + 1, Bs);                                                  \
        }                                                                                       \
      }                                                                                         \
      for (int t = 0; t < rows; t += GEMM_MR) {                                                 \
        /* six rows by name (GEMM_MR is 6): accumulators in registers, no private array */      \
        const long as = TA ? lda : 1, ar = TA ? 1 : lda;                                        \
        GEMM_ROWS(GEMMV_ROW_INIT)                                                               \
        for (int l = 0; l < kc; ++l) {                                                          \
          const realv b0 = VLOAD(2 * l, Bs), b1 = VLOAD(2 * l + 1, Bs);                         \
          GEMM_ROWS(GEMMV_ROW_FMA)                                                              \
        }                                                                                       \
        GEMM_ROWS(GEMMV_ROW_SAVE)                                                               \
      }                                                                                         \
    }                                                                                           \
    for (int r = 0; r < rows; ++r) {                                                            \
      __global real* Cr = C + (long)(row0 + r) * ldc + col0;                                    \
      GEMMV_STORE(Cs[r][0], 0)                                                                  \
      GEMMV_STORE(Cs[r][1], 1)                                                                  \
    }                                                                                           \
  }
GEMMV_KERNEL(gemmv_nn, 0, 0)
GEMMV_KERNEL(gemmv_nt, 0, 1)
GEMMV_KERNEL(gemmv_tn, 1, 0)
GEMMV_KERNEL(gemmv_tt, 1, 1)
#endif

#ifdef GEMM_TILED
GEMM_KERNEL(gemm_nn, 0, 0)
GEMM_KERNEL(gemm_nt, 0, 1)
GEMM_KERNEL(gemm_tn, 1, 0)
GEMM_KERNEL(gemm_tt, 1, 1)
#endif
