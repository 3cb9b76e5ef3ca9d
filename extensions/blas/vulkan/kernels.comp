#version 450
// BLAS kernels of blas_vulkan: GLSL compute shaders, compiled at run time by the Vulkan plugin
// (one `#kernel NAME` section per kernel; the lines before the first are shared), once per
// dtype with -DREAL=float or -DREAL=double (the latter only on a device with shaderFloat64).
// Conventions of every kernel:
//  - buffers are declared by BUF(binding, access, Block, array) and listed by PTR(Block, array) at
//    the head of the push-constant block, in binding order. By default (descriptors) BUF is a
//    storage buffer of set 0 at that binding and PTR nothing; with -DPCY_ADDRESSES BUF is a
//    GL_EXT_buffer_reference type and PTR a member of that type, filled with the buffer's device
//    address by the plugin: no binding, so no maxStorageBufferRange limit (docs/vulkan.md). The
//    kernel bodies are the same: `array` names the elements either way. Scalars follow in the
//    push-constant block in member order (REAL members first, so that a double sits at an 8-byte
//    offset after the 8-byte addresses);
//  - a scalar comes as a host value plus a one-element buffer: bit 0 of `flags` takes alpha from
//    pa[0], bit 1 beta from pb[0] (device-resident scalars never round-trip to the host);
//  - indices are 32-bit: the bundle refuses a tensor of 2^31 - 2^21 elements or more (a bound
//    buffer is below 4 GiB anyway), so no index, nor one a grid stride past it, reaches 2^31;
//  - element-wise kernels walk their range grid-strided, so the bundle can cap the grid below
//    maxComputeWorkGroupCount whatever n is.
// Reference-BLAS semantics are decided here, where a device-resident scalar can be seen:
// beta == 0 never reads y or C, alpha == 0 never reads x, A or B, axpy with alpha == 0 leaves y
// alone, and nrm2 scales its sums of squares so that they neither overflow nor underflow.
#ifndef REAL
#define REAL float
#endif
#define real REAL
#ifdef PCY_ADDRESSES
#extension GL_EXT_buffer_reference : require
#ifdef PCY_FP64
#define RALIGN 8
#else
#define RALIGN 4
#endif
#define BUF(binding_, access, Block, array)                                                        \
  layout(buffer_reference, std430, buffer_reference_align = RALIGN) access buffer Block {          \
    real v[];                                                                                      \
  };
#define PTR(Block, array) Block array##_ref;
// Every array name of the kernels, as the elements behind its address.
#define pa pa_ref.v
#define pb pb_ref.v
#define xs xs_ref.v
#define ys ys_ref.v
#define A A_ref.v
#define B B_ref.v
#define C C_ref.v
#define part part_ref.v
#define result result_ref.v
#else
#define BUF(binding_, access, Block, array)                                                        \
  layout(std430, set = 0, binding = binding_) access buffer Block { real array[]; };
#define PTR(Block, array)
#endif
#define RW // BUF's access for a buffer read and written
#ifndef RWG
#define RWG 256
#endif
#ifndef EWG
#define EWG 256
#endif
#ifndef GWG
#define GWG 64
#endif
#ifndef TS
#define TS 32
#endif
#ifndef TSK
#define TSK 16
#endif
#define WPT 2
#define RTS (TS / WPT)

#define ALPHA (((flags & 1) != 0) ? pa[0] : a)
#define BETA (((flags & 2) != 0) ? pb[0] : b)
// al * v + be * old, where al == 0 drops v and be == 0 drops old (never multiplied: a NaN or
// Inf there stays out of the result).
#define COMBINE(al, v, be, OLD)                                                                    \
  ((al) == real(0) ? ((be) == real(0) ? real(0) : (be) * (OLD))                                    \
                   : ((be) == real(0) ? (al) * (v) : (al) * (v) + (be) * (OLD)))
// nrm2's thresholds and scales (see nrm2_1), powers of two: exact.
#ifdef PCY_FP64
#define NRM2_TSML ldexp(real(1), -511)
#define NRM2_TBIG ldexp(real(1), 486)
#define NRM2_SSML ldexp(real(1), 537)
#define NRM2_SBIG ldexp(real(1), -538)
#else
#define NRM2_TSML ldexp(real(1), -63)
#define NRM2_TBIG ldexp(real(1), 52)
#define NRM2_SSML ldexp(real(1), 75)
#define NRM2_SBIG ldexp(real(1), -76)
#endif
// NaN by its bits, not isnan(v) (v != v), which a compiler may fold where it assumes finite
// values. nrm2 must let a NaN through next to an Inf: its sums are also `precise`, since Mesa's
// NIR (lavapipe) otherwise rewrites the inexact float arithmetic and comparisons of nrm2_2 so
// that a NaN next to an Inf came out as Inf (the conformance suite's non-finite class).
#ifdef PCY_FP64
bool nan_bits(double v) {
  const uvec2 u = unpackDouble2x32(v); // (low word, high word)
  return (u.y & 0x7ff00000u) == 0x7ff00000u && ((u.y & 0xfffffu) | u.x) != 0u;
}
#else
bool nan_bits(float v) {
  const uint u = floatBitsToUint(v);
  return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu) != 0u;
}
#endif
#define GID int(gl_GlobalInvocationID.x)
#define GSTRIDE int(gl_NumWorkGroups.x * gl_WorkGroupSize.x)
// The level-1 kernels walk their grid-strided range four strides an iteration, the four loads
// issued before any use (a loop of one element leaves a single load in flight per invocation,
// too few to fill the memory pipe of a large GPU), then the rest one stride at a time; each
// element is still taken in the order of i, so the results are the bits of the plain loop.

#kernel axpby_k
layout(local_size_x = EWG) in;
BUF(0, readonly, PA, pa)
BUF(1, readonly, PB, pb)
BUF(2, readonly, X, xs)
BUF(3, RW, Y, ys)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(PB, pb) PTR(X, xs) PTR(Y, ys)
 real a; real b; int n; int flags; int incx; int incy; };
void main() {
  const real al = ALPHA, be = BETA;
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
               x3 = xs[(i + 3 * st) * incx];
    const real y0 = ys[i * incy], y1 = ys[(i + st) * incy], y2 = ys[(i + 2 * st) * incy],
               y3 = ys[(i + 3 * st) * incy];
    ys[i * incy] = COMBINE(al, x0, be, y0);
    ys[(i + st) * incy] = COMBINE(al, x1, be, y1);
    ys[(i + 2 * st) * incy] = COMBINE(al, x2, be, y2);
    ys[(i + 3 * st) * incy] = COMBINE(al, x3, be, y3);
  }
  for (; i < n; i += st) {
    const int iy = i * incy;
    ys[iy] = COMBINE(al, xs[i * incx], be, ys[iy]);
  }
}

#kernel axpy_k
// alpha == 0 returns at once, as reference axpy: y keeps its bits even where x is NaN.
layout(local_size_x = EWG) in;
BUF(0, readonly, PA, pa)
BUF(1, readonly, X, xs)
BUF(2, RW, Y, ys)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(X, xs) PTR(Y, ys)
 real a; int n; int flags; int incx; int incy; };
void main() {
  const real al = ALPHA;
  if (al == real(0)) return;
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
               x3 = xs[(i + 3 * st) * incx];
    const real y0 = ys[i * incy], y1 = ys[(i + st) * incy], y2 = ys[(i + 2 * st) * incy],
               y3 = ys[(i + 3 * st) * incy];
    ys[i * incy] = y0 + al * x0;
    ys[(i + st) * incy] = y1 + al * x1;
    ys[(i + 2 * st) * incy] = y2 + al * x2;
    ys[(i + 3 * st) * incy] = y3 + al * x3;
  }
  for (; i < n; i += st) ys[i * incy] += al * xs[i * incx];
}

#kernel scal_k
layout(local_size_x = EWG) in;
BUF(0, readonly, PA, pa)
BUF(1, RW, X, xs)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(X, xs)
 real a; int n; int flags; int incx; };
void main() {
  const real al = ALPHA;
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
               x3 = xs[(i + 3 * st) * incx];
    xs[i * incx] = x0 * al;
    xs[(i + st) * incx] = x1 * al;
    xs[(i + 2 * st) * incx] = x2 * al;
    xs[(i + 3 * st) * incx] = x3 * al;
  }
  for (; i < n; i += st) xs[i * incx] *= al;
}

#kernel copy_k
layout(local_size_x = EWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys)
 int n; int incx; int incy; };
void main() {
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
               x3 = xs[(i + 3 * st) * incx];
    ys[i * incy] = x0;
    ys[(i + st) * incy] = x1;
    ys[(i + 2 * st) * incy] = x2;
    ys[(i + 3 * st) * incy] = x3;
  }
  for (; i < n; i += st) ys[i * incy] = xs[i * incx];
}

#kernel swap_k
layout(local_size_x = EWG) in;
BUF(0, RW, X, xs)
BUF(1, RW, Y, ys)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys)
 int n; int incx; int incy; };
void main() {
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
               x3 = xs[(i + 3 * st) * incx];
    const real y0 = ys[i * incy], y1 = ys[(i + st) * incy], y2 = ys[(i + 2 * st) * incy],
               y3 = ys[(i + 3 * st) * incy];
    xs[i * incx] = y0;
    xs[(i + st) * incx] = y1;
    xs[(i + 2 * st) * incx] = y2;
    xs[(i + 3 * st) * incx] = y3;
    ys[i * incy] = x0;
    ys[(i + st) * incy] = x1;
    ys[(i + 2 * st) * incy] = x2;
    ys[(i + 3 * st) * incy] = x3;
  }
  for (; i < n; i += st) {
    const real t = xs[i * incx];
    xs[i * incx] = ys[i * incy];
    ys[i * incy] = t;
  }
}

#kernel scale_k
// x = beta * x over a rows x cols window (rows ld apart; a vector is cols 1, ld inc), beta == 0
// storing zeros without reading: the quick paths (alpha == 0, k == 0). Dimension 1 walks a batch
// of such windows `stride` elements apart (gemm_batched).
layout(local_size_x = EWG) in;
BUF(0, readonly, PB, pb)
BUF(1, RW, X, xs)
layout(push_constant) uniform args {
  PTR(PB, pb) PTR(X, xs)

  real b;
  int total;
  int cols;
  int flags;
  int ld;
  int stride;
  int batch;
};
void main() {
  const real be = BETA;
  for (int z = int(gl_GlobalInvocationID.y); z < batch; z += int(gl_NumWorkGroups.y))
    for (int i = GID; i < total; i += GSTRIDE) {
      const int ix = z * stride + (i / cols) * ld + i % cols;
      xs[ix] = be == real(0) ? real(0) : be * xs[ix];
    }
}

#kernel reduce_1
// Reductions, stage 1: each work-group folds a grid-strided share of the vector into one
// partial sum. mode 0: sum |x| (asum), 1: sum x*y (dot).
layout(local_size_x = RWG) in;
BUF(0, readonly, X, xs)
BUF(1, readonly, Y, ys)
BUF(2, writeonly, P, part)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(Y, ys) PTR(P, part)
 int n; int mode; int incx; int incy; };
shared real s[RWG];
void main() {
  const int lid = int(gl_LocalInvocationID.x);
  real acc = real(0);
  const int st = GSTRIDE;
  int i = GID;
  if (mode == 0) {
    for (; i < n - 3 * st; i += 4 * st) {
      const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
                 x3 = xs[(i + 3 * st) * incx];
      acc += abs(x0);
      acc += abs(x1);
      acc += abs(x2);
      acc += abs(x3);
    }
    for (; i < n; i += st) acc += abs(xs[i * incx]);
  } else {
    for (; i < n - 3 * st; i += 4 * st) {
      const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
                 x3 = xs[(i + 3 * st) * incx];
      const real y0 = ys[i * incy], y1 = ys[(i + st) * incy], y2 = ys[(i + 2 * st) * incy],
                 y3 = ys[(i + 3 * st) * incy];
      acc = fma(x0, y0, acc);
      acc = fma(x1, y1, acc);
      acc = fma(x2, y2, acc);
      acc = fma(x3, y3, acc);
    }
    for (; i < n; i += st) acc = fma(xs[i * incx], ys[i * incy], acc);
  }
  s[lid] = acc;
  memoryBarrierShared();
  barrier();
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] += s[lid + h];
    memoryBarrierShared();
    barrier();
  }
  if (lid == 0) part[gl_WorkGroupID.x] = s[0];
}

#kernel reduce_2
// Stage 2: one work-group folds the partial sums into result[0].
layout(local_size_x = RWG) in;
BUF(0, readonly, P, part)
BUF(1, writeonly, R, result)
layout(push_constant) uniform args {
  PTR(P, part) PTR(R, result)
 int groups; };
shared real s[RWG];
void main() {
  const int lid = int(gl_LocalInvocationID.x);
  real acc = real(0);
  for (int i = lid; i < groups; i += RWG) acc += part[i];
  s[lid] = acc;
  memoryBarrierShared();
  barrier();
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) s[lid] += s[lid + h];
    memoryBarrierShared();
    barrier();
  }
  if (lid == 0) result[0] = s[0];
}

#kernel nrm2_1
// nrm2 without overflow or underflow: Blue's three accumulators (as LAPACK's nrm2 since 3.10).
// |x| below TSML is scaled up by SSML, above TBIG down by SBIG, the rest summed as is, so no
// square overflows or underflows; the three sums are plain sums that fold in parallel, and
// stage 2 combines them once. The constants are powers of two (exact scaling) chosen from the
// type's digits and exponent range. Stage 1: part[g], part[groups + g], part[2 groups + g] are
// the small, medium and big sums of work-group g.
layout(local_size_x = RWG) in;
BUF(0, readonly, X, xs)
BUF(1, writeonly, P, part)
layout(push_constant) uniform args {
  PTR(X, xs) PTR(P, part)
 int n; int incx; int groups; };
shared real s0[RWG];
shared real s1[RWG];
shared real s2[RWG];
// One element into the three sums (a NaN first, by its bits: the comparisons below are no
// place to classify it).
#define NRM2_ADD(x)                                                                                \
  {                                                                                                \
    const real ax = abs(x);                                                                        \
    if (nan_bits(ax)) {                                                                            \
      med += ax;                                                                                   \
    } else if (ax > tbig) {                                                                        \
      const real v = ax * sbig;                                                                    \
      big = fma(v, v, big);                                                                        \
    } else if (ax < tsml) {                                                                        \
      const real v = ax * ssml;                                                                    \
      sml = fma(v, v, sml);                                                                        \
    } else {                                                                                       \
      med = fma(ax, ax, med);                                                                      \
    }                                                                                              \
  }
void main() {
  const real tsml = NRM2_TSML, tbig = NRM2_TBIG, ssml = NRM2_SSML, sbig = NRM2_SBIG;
  const int lid = int(gl_LocalInvocationID.x);
  precise real sml = real(0), med = real(0), big = real(0);
  const int st = GSTRIDE;
  int i = GID;
  for (; i < n - 3 * st; i += 4 * st) {
    const real x0 = xs[i * incx], x1 = xs[(i + st) * incx], x2 = xs[(i + 2 * st) * incx],
               x3 = xs[(i + 3 * st) * incx];
    NRM2_ADD(x0);
    NRM2_ADD(x1);
    NRM2_ADD(x2);
    NRM2_ADD(x3);
  }
  for (; i < n; i += st) NRM2_ADD(xs[i * incx]);
  s0[lid] = sml;
  s1[lid] = med;
  s2[lid] = big;
  memoryBarrierShared();
  barrier();
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) {
      s0[lid] += s0[lid + h];
      s1[lid] += s1[lid + h];
      s2[lid] += s2[lid + h];
    }
    memoryBarrierShared();
    barrier();
  }
  if (lid == 0) {
    const int g = int(gl_WorkGroupID.x);
    part[g] = s0[0];
    part[groups + g] = s1[0];
    part[2 * groups + g] = s2[0];
  }
}

#kernel nrm2_2
// Stage 2: fold the three sums of every group, then combine them into the norm.
layout(local_size_x = RWG) in;
BUF(0, readonly, P, part)
BUF(1, writeonly, R, result)
layout(push_constant) uniform args {
  PTR(P, part) PTR(R, result)
 int groups; };
shared real s0[RWG];
shared real s1[RWG];
shared real s2[RWG];
void main() {
  const real ssml = NRM2_SSML, sbig = NRM2_SBIG;
  const int lid = int(gl_LocalInvocationID.x);
  precise real sml = real(0), med = real(0), big = real(0);
  for (int i = lid; i < groups; i += RWG) {
    sml += part[i];
    med += part[groups + i];
    big += part[2 * groups + i];
  }
  s0[lid] = sml;
  s1[lid] = med;
  s2[lid] = big;
  memoryBarrierShared();
  barrier();
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) {
      s0[lid] += s0[lid + h];
      s1[lid] += s1[lid + h];
      s2[lid] += s2[lid + h];
    }
    memoryBarrierShared();
    barrier();
  }
  if (lid != 0) return;
  sml = s0[0];
  med = s1[0];
  big = s2[0];
  precise real scl = real(1), sumsq = med;
  if (big > real(0)) {
    // next to the big values the medium ones matter only scaled down; the small never
    if (med > real(0) || nan_bits(med)) big += (med * sbig) * sbig;
    scl = real(1) / sbig;
    sumsq = big;
  } else if (sml > real(0)) {
    if (med > real(0) || nan_bits(med)) {
      const real ymed = sqrt(med), ysml = sqrt(sml) / ssml;
      const real ymin = ysml > ymed ? ymed : ysml, ymax = ysml > ymed ? ysml : ymed; // NaN: ymax
      scl = real(1);
      sumsq = ymax * ymax * (real(1) + (ymin / ymax) * (ymin / ymax));
    } else {
      scl = real(1) / ssml;
      sumsq = sml;
    }
  }
  result[0] = scl * sqrt(sumsq);
}

#kernel gemv_n
// y = alpha A x + beta y, A m x n row-major: a work-group per row (grid-strided over the rows),
// reduced in shared memory.
layout(local_size_x = GWG) in;
BUF(0, readonly, PA, pa)
BUF(1, readonly, PB, pb)
BUF(2, readonly, MA, A)
BUF(3, readonly, X, xs)
BUF(4, RW, Y, ys)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(PB, pb) PTR(MA, A) PTR(X, xs) PTR(Y, ys)

  real a;
  real b;
  int m;
  int n;
  int flags;
  int lda;
  int incx;
  int incy;
};
shared real s[GWG];
void main() {
  const int lid = int(gl_LocalInvocationID.x);
  const real al = ALPHA, be = BETA;
  for (int row = int(gl_WorkGroupID.x); row < m; row += int(gl_NumWorkGroups.x)) {
    real acc = real(0);
    const int base = row * lda;
    for (int j = lid; j < n; j += GWG) acc = fma(A[base + j], xs[j * incx], acc);
    s[lid] = acc;
    memoryBarrierShared();
    barrier();
    for (int h = GWG / 2; h > 0; h >>= 1) {
      if (lid < h) s[lid] += s[lid + h];
      memoryBarrierShared();
      barrier();
    }
    if (lid == 0) {
      const int iy = row * incy;
      ys[iy] = COMBINE(al, s[0], be, ys[iy]);
    }
    memoryBarrierShared();
    barrier(); // s is written again for the next row
  }
}

#kernel gemv_t
// y = alpha A^T x + beta y: an invocation per column, reading A's rows contiguously.
layout(local_size_x = GWG) in;
BUF(0, readonly, PA, pa)
BUF(1, readonly, PB, pb)
BUF(2, readonly, MA, A)
BUF(3, readonly, X, xs)
BUF(4, RW, Y, ys)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(PB, pb) PTR(MA, A) PTR(X, xs) PTR(Y, ys)

  real a;
  real b;
  int m;
  int n;
  int flags;
  int lda;
  int incx;
  int incy;
};
void main() {
  const real al = ALPHA, be = BETA;
  for (int col = GID; col < n; col += GSTRIDE) {
    real acc = real(0);
    for (int i = 0; i < m; ++i) acc = fma(A[i * lda + col], xs[i * incx], acc);
    const int iy = col * incy;
    ys[iy] = COMBINE(al, acc, be, ys[iy]);
  }
}

#kernel gemm
// C = alpha op(A) op(B) + beta C, row-major; bit 2 of flags transposes A, bit 3 B. A work-group
// of RTS x RTS invocations computes a TS x TS tile of C, each invocation WPT x WPT outputs
// strided by RTS (neighbouring invocations touch neighbouring columns); A and B pass through
// shared memory in TSK-deep slices, read along memory's contiguous direction. Dimension 2 walks
// a strided batch (gemm_batched: product z reads A + z sa, B + z sb, writes C + z sc; gemm is the
// batch of one). Tiles and batch are grid-strided, so that any size fits the grid the bundle
// caps below maxComputeWorkGroupCount (the loops are uniform in a work-group: barriers are safe).
layout(local_size_x = RTS, local_size_y = RTS) in;
BUF(0, readonly, PA, pa)
BUF(1, readonly, PB, pb)
BUF(2, readonly, MA, A)
BUF(3, readonly, MB, B)
BUF(4, RW, MC, C)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(PB, pb) PTR(MA, A) PTR(MB, B) PTR(MC, C)

  real a;
  real b;
  int m;
  int n;
  int k;
  int flags;
  int lda;
  int ldb;
  int ldc;
  int sa;
  int sb;
  int sc;
  int batch;
};
shared real As[TSK][TS + 1];
shared real Bs[TSK][TS + 1];
void main() {
  const bool ta = (flags & 4) != 0, tb = (flags & 8) != 0;
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int tid = ty * RTS + tx;
  const real al = ALPHA, be = BETA;
  const int tiles_m = (m + TS - 1) / TS, tiles_n = (n + TS - 1) / TS;
  for (int z = int(gl_WorkGroupID.z); z < batch; z += int(gl_NumWorkGroups.z))
    for (int tm = int(gl_WorkGroupID.y); tm < tiles_m; tm += int(gl_NumWorkGroups.y))
      for (int tn = int(gl_WorkGroupID.x); tn < tiles_n; tn += int(gl_NumWorkGroups.x)) {
        const int row0 = tm * TS, col0 = tn * TS;
        const int oa = z * sa, ob = z * sb, oc = z * sc;
        real acc[WPT][WPT];
        for (int wm = 0; wm < WPT; ++wm)
          for (int wn = 0; wn < WPT; ++wn) acc[wm][wn] = real(0);
        for (int t = 0; t < k; t += TSK) {
          for (int e = tid; e < TS * TSK; e += RTS * RTS) {
            // A[r][kk] of the tile; walk memory contiguously: along k for A, along m for A^T
            const int r = ta ? e % TS : e / TSK, kk = ta ? e / TS : e % TSK;
            const int gr = row0 + r, gk = t + kk;
            real v = real(0);
            if (gr < m && gk < k) v = ta ? A[oa + gk * lda + gr] : A[oa + gr * lda + gk];
            As[kk][r] = v;
          }
          for (int e = tid; e < TS * TSK; e += RTS * RTS) {
            // B[kk][c] of the tile: along n for B, along k for B^T
            const int c = tb ? e / TSK : e % TS, kk = tb ? e % TSK : e / TS;
            const int gc = col0 + c, gk = t + kk;
            real v = real(0);
            if (gc < n && gk < k) v = tb ? B[ob + gc * ldb + gk] : B[ob + gk * ldb + gc];
            Bs[kk][c] = v;
          }
          memoryBarrierShared();
          barrier();
          for (int kk = 0; kk < TSK; ++kk) {
            real bv[WPT];
            for (int wn = 0; wn < WPT; ++wn) bv[wn] = Bs[kk][tx + wn * RTS];
            for (int wm = 0; wm < WPT; ++wm) {
              const real av = As[kk][ty + wm * RTS];
              for (int wn = 0; wn < WPT; ++wn) acc[wm][wn] = fma(av, bv[wn], acc[wm][wn]);
            }
          }
          memoryBarrierShared();
          barrier();
        }
        for (int wm = 0; wm < WPT; ++wm) {
          const int row = row0 + ty + wm * RTS;
          if (row >= m) continue;
          for (int wn = 0; wn < WPT; ++wn) {
            const int col = col0 + tx + wn * RTS;
            if (col >= n) continue;
            const int ic = oc + row * ldc + col;
            C[ic] = COMBINE(al, acc[wm][wn], be, C[ic]);
          }
        }
      }
}

#kernel gemm_reg
// gemm for GPUs, register-blocked (the SIMT design of the well-known fast sgemms): a work-group
// of 16 x 16 invocations computes a GBM x GBM tile of C, GBM = 64 GCM (GCM 2: 128 x 128 in f32;
// 1: 64 x 64 in f64), each invocation a 4 GCM x 4 GCM block held in registers as 4 x 4 chunks
// 64 rows and columns apart (rows 64 i + 4 ty .. + 3, columns 64 j + 4 tx .. + 3). So an
// invocation reads its operands from shared memory as whole vectors (RVEC4), neighbouring
// invocations read neighbouring vectors (no bank conflict; the A vectors are broadcasts), and a
// subgroup's stores of C cover rows contiguously. Per k step an invocation does (4 GCM)^2 fmas
// for 2 GCM vector reads of shared memory. A and B pass through shared memory in GBK-deep
// slices, both k-major (As[k][row], Bs[k][column]), double-buffered: the next slice's global
// loads are issued into registers before the outer products of the current slice and stored in
// the other buffer after them, one barrier a slice. 2 x 2 x GBK x GBM elements: 16 KiB at GBK 8
// in both dtypes, the least maxComputeSharedMemorySize Vulkan promises; GPAD 1 (where the device
// has room) pads each k row by a vector, so that the stores of A's slice, GBK apart along k, fall
// in different banks. Each global load walks
// its operand's contiguous direction (along k for A, along m for A^T, along n for B, along k for
// B^T), the transposes as strides; an element past m, n or k loads as zero, so edge tiles need
// no other case, and only the stores of C check the bounds. Arguments, flags, batch and the
// grid-strided tiles as gemm's (the loops are uniform in a work-group: barriers are safe).
// [[unroll]]: the block must live in registers, so every loop over it is unrolled (NVIDIA's
// compiler otherwise may keep acc in local memory).
#extension GL_EXT_control_flow_attributes : require
#ifndef GCM
#define GCM 2
#endif
#ifndef GBK
#define GBK 8
#endif
#ifndef GPAD
#define GPAD 0
#endif
#define GBM (64 * GCM)
#define GLD (GBM * GBK / 256) // elements of each operand an invocation loads per slice
#ifdef PCY_FP64
#define RVEC4 dvec4
#else
#define RVEC4 vec4
#endif
layout(local_size_x = 16, local_size_y = 16) in;
BUF(0, readonly, PA, pa)
BUF(1, readonly, PB, pb)
BUF(2, readonly, MA, A)
BUF(3, readonly, MB, B)
BUF(4, RW, MC, C)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(PB, pb) PTR(MA, A) PTR(MB, B) PTR(MC, C)

  real a;
  real b;
  int m;
  int n;
  int k;
  int flags;
  int lda;
  int ldb;
  int ldc;
  int sa;
  int sb;
  int sc;
  int batch;
};
shared RVEC4 As[2][GBK][GBM / 4 + GPAD];
shared RVEC4 Bs[2][GBK][GBM / 4 + GPAD];
void main() {
  const bool ta = (flags & 4) != 0, tb = (flags & 8) != 0;
  // op(A)(r, l) = A[r ars + l aks], op(B)(l, c) = B[l bks + c bcs]
  const int ars = ta ? 1 : lda, aks = ta ? lda : 1, bks = tb ? 1 : ldb, bcs = tb ? ldb : 1;
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int tid = ty * 16 + tx;
  const real al = ALPHA, be = BETA;
  // This invocation's share of a slice: element e = tid + 256 i of the GBM x GBK tile of op(A)
  // (and of the GBK x GBM tile of op(B)), numbered along memory's contiguous direction.
  int ar[GLD], ak[GLD], bc[GLD], bk[GLD];
  [[unroll]] for (int i = 0; i < GLD; ++i) {
    const int e = tid + 256 * i;
    ar[i] = ta ? e % GBM : e / GBK;
    ak[i] = ta ? e / GBM : e % GBK;
    bc[i] = tb ? e / GBK : e % GBM;
    bk[i] = tb ? e % GBK : e / GBM;
  }
  const int tiles_m = (m + GBM - 1) / GBM, tiles_n = (n + GBM - 1) / GBM;
  const int slices = (k + GBK - 1) / GBK;
  for (int z = int(gl_WorkGroupID.z); z < batch; z += int(gl_NumWorkGroups.z))
    for (int tm = int(gl_WorkGroupID.y); tm < tiles_m; tm += int(gl_NumWorkGroups.y))
      for (int tn = int(gl_WorkGroupID.x); tn < tiles_n; tn += int(gl_NumWorkGroups.x)) {
        const int row0 = tm * GBM, col0 = tn * GBM;
        const int oa = z * sa, ob = z * sb, oc = z * sc;
        RVEC4 acc[4 * GCM][GCM];
        [[unroll]] for (int i = 0; i < 4 * GCM; ++i)
          [[unroll]] for (int j = 0; j < GCM; ++j) acc[i][j] = RVEC4(0);
        real ra[GLD], rb[GLD];
        // slice 0 into buffer 0
        [[unroll]] for (int i = 0; i < GLD; ++i) {
          const int r = row0 + ar[i], c = col0 + bc[i];
          ra[i] = real(0);
          rb[i] = real(0);
          if (r < m && ak[i] < k) ra[i] = A[oa + r * ars + ak[i] * aks];
          if (c < n && bk[i] < k) rb[i] = B[ob + bk[i] * bks + c * bcs];
          As[0][ak[i]][ar[i] >> 2][ar[i] & 3] = ra[i];
          Bs[0][bk[i]][bc[i] >> 2][bc[i] & 3] = rb[i];
        }
        memoryBarrierShared();
        barrier();
        for (int s = 0; s < slices; ++s) {
          const int cur = s & 1;
          const bool next = s + 1 < slices;
          if (next) { // the next slice's loads, in flight during the outer products
            const int t = (s + 1) * GBK;
            [[unroll]] for (int i = 0; i < GLD; ++i) {
              const int r = row0 + ar[i], c = col0 + bc[i], la = t + ak[i], lb = t + bk[i];
              ra[i] = real(0);
              rb[i] = real(0);
              if (r < m && la < k) ra[i] = A[oa + r * ars + la * aks];
              if (c < n && lb < k) rb[i] = B[ob + lb * bks + c * bcs];
            }
          }
          [[unroll]] for (int kk = 0; kk < GBK; ++kk) {
            RVEC4 av[GCM], bv[GCM];
            [[unroll]] for (int i = 0; i < GCM; ++i) av[i] = As[cur][kk][ty + 16 * i];
            [[unroll]] for (int j = 0; j < GCM; ++j) bv[j] = Bs[cur][kk][tx + 16 * j];
            [[unroll]] for (int i = 0; i < GCM; ++i)
              [[unroll]] for (int q = 0; q < 4; ++q)
                [[unroll]] for (int j = 0; j < GCM; ++j)
                  acc[4 * i + q][j] = fma(RVEC4(av[i][q]), bv[j], acc[4 * i + q][j]);
          }
          if (next) {
            [[unroll]] for (int i = 0; i < GLD; ++i) {
              As[cur ^ 1][ak[i]][ar[i] >> 2][ar[i] & 3] = ra[i];
              Bs[cur ^ 1][bk[i]][bc[i] >> 2][bc[i] & 3] = rb[i];
            }
          }
          memoryBarrierShared();
          barrier(); // the next slice is in place; this one is free for the one after
        }
        [[unroll]] for (int i = 0; i < 4 * GCM; ++i) {
          const int row = row0 + 64 * (i >> 2) + 4 * ty + (i & 3);
          if (row >= m) continue;
          [[unroll]] for (int j = 0; j < GCM; ++j)
            [[unroll]] for (int q = 0; q < 4; ++q) {
              const int col = col0 + 64 * j + 4 * tx + q;
              if (col >= n) continue;
              const int ic = oc + row * ldc + col;
              C[ic] = COMBINE(al, acc[i][j][q], be, C[ic]);
            }
        }
      }
}

#kernel gemm_direct
// gemm without shared memory or barriers, for CPU devices (lavapipe runs a work-group's
// invocations as SIMD lanes, and every barrier splits the shader there): each invocation keeps a
// DW x DW block of C in registers, rows ty DW .. ty DW + DW - 1 of the work-group's tile and
// columns tx, tx + RTS, ... (neighbouring lanes read neighbouring columns of B), and reads A and
// B straight from memory. op(A)(r, l) = A[r ars + l als] and op(B)(l, c) = B[l brs + c bcs]: the
// transposes are strides, not branches. Rows and columns past m and n read row m - 1 and column
// n - 1 (valid memory, no branch in the k loop) and are not stored. Arguments as gemm's.
#define DW 4
#define DTS (RTS * DW)
layout(local_size_x = RTS, local_size_y = RTS) in;
BUF(0, readonly, PA, pa)
BUF(1, readonly, PB, pb)
BUF(2, readonly, MA, A)
BUF(3, readonly, MB, B)
BUF(4, RW, MC, C)
layout(push_constant) uniform args {
  PTR(PA, pa) PTR(PB, pb) PTR(MA, A) PTR(MB, B) PTR(MC, C)

  real a;
  real b;
  int m;
  int n;
  int k;
  int flags;
  int lda;
  int ldb;
  int ldc;
  int sa;
  int sb;
  int sc;
  int batch;
};
void main() {
  const bool ta = (flags & 4) != 0, tb = (flags & 8) != 0;
  const int ars = ta ? 1 : lda, als = ta ? lda : 1, brs = tb ? 1 : ldb, bcs = tb ? ldb : 1;
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const real al = ALPHA, be = BETA;
  const int tiles_m = (m + DTS - 1) / DTS, tiles_n = (n + DTS - 1) / DTS;
  for (int z = int(gl_WorkGroupID.z); z < batch; z += int(gl_NumWorkGroups.z))
    for (int tm = int(gl_WorkGroupID.y); tm < tiles_m; tm += int(gl_NumWorkGroups.y))
      for (int tn = int(gl_WorkGroupID.x); tn < tiles_n; tn += int(gl_NumWorkGroups.x)) {
        const int row0 = tm * DTS + ty * DW, col0 = tn * DTS + tx;
        int ar[DW], bc[DW];
        for (int i = 0; i < DW; ++i) {
          ar[i] = min(row0 + i, m - 1) * ars;
          bc[i] = min(col0 + i * RTS, n - 1) * bcs;
        }
        const int oa = z * sa, ob = z * sb, oc = z * sc;
        real acc[DW][DW];
        for (int i = 0; i < DW; ++i)
          for (int j = 0; j < DW; ++j) acc[i][j] = real(0);
        for (int l = 0; l < k; ++l) {
          const int ia = oa + l * als, ib = ob + l * brs;
          real av[DW], bv[DW];
          for (int i = 0; i < DW; ++i) av[i] = A[ia + ar[i]];
          for (int j = 0; j < DW; ++j) bv[j] = B[ib + bc[j]];
          for (int i = 0; i < DW; ++i)
            for (int j = 0; j < DW; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        for (int i = 0; i < DW; ++i) {
          const int row = row0 + i;
          if (row >= m) break;
          for (int j = 0; j < DW; ++j) {
            const int col = col0 + j * RTS;
            if (col >= n) break;
            const int ic = oc + row * ldc + col;
            C[ic] = COMBINE(al, acc[i][j], be, C[ic]);
          }
        }
      }
}
