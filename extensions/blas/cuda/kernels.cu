
template <class T> __device__ __forceinline__ T value_of(T v, const T* p) { return p ? *p : v; }
__device__ __forceinline__ float absolute(float v) { return fabsf(v); }
__device__ __forceinline__ double absolute(double v) { return fabs(v); }
__device__ __forceinline__ float root(float v) { return sqrtf(v); }
__device__ __forceinline__ double root(double v) { return sqrt(v); }

// alpha * v + beta * old where alpha == 0 drops v and beta == 0 drops old: neither is read
// then, so NaN or Inf in them cannot leak in (OLD is evaluated only when beta != 0).
#define COMBINE(al, v, be, OLD)                                                                \
  ((al) == T(0) ? ((be) == T(0) ? T(0) : (be) * (OLD))                                         \
                : ((be) == T(0) ? (al) * (v) : (al) * (v) + (be) * (OLD)))

constexpr int RWG = 256; // block size of every BLAS-1 kernel (the launch passes it)
constexpr int UNROLL = 4; // vectors in flight per thread and operand

// ---- 16-byte vectors: float4 / double2, components by constant index (registers) ----------
template <class T> struct v16;
template <> struct v16<float> {
  typedef float4 V;
  enum { N = 4 };
};
template <> struct v16<double> {
  typedef double2 V;
  enum { N = 2 };
};
__device__ __forceinline__ float get(const float4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}
__device__ __forceinline__ double get(const double2& v, int j) { return j == 0 ? v.x : v.y; }
__device__ __forceinline__ void put(float4& v, int j, float e) {
  if (j == 0) v.x = e;
  else if (j == 1) v.y = e;
  else if (j == 2) v.z = e;
  else v.w = e;
}
__device__ __forceinline__ void put(double2& v, int j, double e) {
  if (j == 0) v.x = e;
  else v.y = e;
}
// Elements before the first 16-byte aligned one (p is aligned to its element size; the host
// checks), at most n.
template <class T> __device__ __forceinline__ i64 head_of(const void* p, i64 n) {
  const i64 h = (i64)((16u - ((unsigned)(unsigned long long)p & 15u)) & 15u) / (i64)sizeof(T);
  return h < n ? h : n;
}

// ---- nrm2 without overflow or underflow ---------------------------------------------------
// Blue's scaled sum of squares (as LAPACK's dnrm2 since 3.10). |x| below TSML is scaled up by
// SSML, above TBIG down by SBIG, so no square overflows or underflows (denormals included); the
// three sums fold in parallel and are combined once. cuBLAS's nrm2 loses small f32 values and
// denormals. The constants are powers of two.
template <class T> struct blue;
template <> struct blue<float> {
  static constexpr float tsml = 0x1p-63f, tbig = 0x1p52f, ssml = 0x1p75f, sbig = 0x1p-76f;
};
template <> struct blue<double> {
  static constexpr double tsml = 0x1p-511, tbig = 0x1p486, ssml = 0x1p537, sbig = 0x1p-538;
};
template <class T> __device__ __forceinline__ void blue_add(T* v, T x) {
  const T ax = absolute(x);
  if (ax > blue<T>::tbig) {
    const T s = ax * blue<T>::sbig;
    v[2] += s * s;
  } else if (ax < blue<T>::tsml) {
    const T s = ax * blue<T>::ssml;
    v[0] += s * s;
  } else {
    v[1] += ax * ax; // NaN lands here and propagates
  }
}
// The norm from the small, medium and big sums.
template <class T> __device__ T blue_finish(T sml, T med, T big) {
  const bool med_counts = med > T(0) || med != med;
  T scl = 1, sumsq = med;
  if (big > T(0)) { // next to big values the medium ones count only scaled down, small never
    if (med_counts) big += (med * blue<T>::sbig) * blue<T>::sbig;
    scl = T(1) / blue<T>::sbig;
    sumsq = big;
  } else if (sml > T(0)) {
    if (med_counts) {
      const T ymed = root(med), ysml = root(sml) / blue<T>::ssml;
      const T ymin = ysml > ymed ? ymed : ysml, ymax = ysml > ymed ? ysml : ymed;
      sumsq = ymax * ymax * (T(1) + (ymin / ymax) * (ymin / ymax));
    } else {
      scl = T(1) / blue<T>::ssml;
      sumsq = sml;
    }
  }
  return scl * root(sumsq);
}

// ---- reductions ---------------------------------------------------------------------------
// An accumulator: K sums per thread, add(x, y) per element (y only when TWO), fin at the end.
struct asum_f {
  enum { K = 1, TWO = 0 };
  template <class T> static __device__ __forceinline__ void add(T* v, T x, T) {
    v[0] += absolute(x);
  }
  template <class T> static __device__ __forceinline__ T fin(const T* v) { return v[0]; }
};
struct dot_f {
  enum { K = 1, TWO = 1 };
  template <class T> static __device__ __forceinline__ void add(T* v, T x, T y) {
    v[0] += x * y;
  }
  template <class T> static __device__ __forceinline__ T fin(const T* v) { return v[0]; }
};
struct nrm2_f {
  enum { K = 3, TWO = 0 };
  template <class T> static __device__ __forceinline__ void add(T* v, T x, T) { blue_add(v, x); }
  template <class T> static __device__ __forceinline__ T fin(const T* v) {
    return blue_finish(v[0], v[1], v[2]);
  }
};

// The block's sums into thread 0's v (every thread of the block calls it).
template <class T, int K> __device__ __forceinline__ void block_sum(T* v, T (*sh)[32]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int k = 0; k < K; ++k)
    for (int o = 16; o > 0; o >>= 1)
      v[k] += __shfl_down_sync(0xffffffffu, v[k], o);
  if (lane == 0)
#pragma unroll
    for (int k = 0; k < K; ++k)
      sh[k][warp] = v[k];
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      v[k] = lane < (int)(blockDim.x >> 5) ? sh[k][lane] : T(0);
      for (int o = 16; o > 0; o >>= 1)
        v[k] += __shfl_down_sync(0xffffffffu, v[k], o);
    }
  }
}

// result[0] = fin(sum over x (and y)). part: K * gridDim.x partial sums (component k of block
// b at part[k * gridDim.x + b]); counter: 0 on entry, and 0 again when the kernel is done.
template <class T, class F>
__device__ void reduce(i64 n, const T* __restrict__ x, i64 incx, const T* __restrict__ y,
                       i64 incy, int vec, T* part, unsigned* counter, T* result) {
  typedef typename v16<T>::V V;
  const int N = v16<T>::N;
  __shared__ T sh[F::K][32];
  __shared__ int last;
  T v[F::K];
#pragma unroll
  for (int k = 0; k < F::K; ++k)
    v[k] = T(0);
  const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x, stride = (i64)gridDim.x * blockDim.x;
  i64 done = 0;
  if (vec) { // incx == incy == 1, x and y equally misaligned
    const i64 head = head_of<T>(x, n);
    for (i64 i = tid; i < head; i += stride)
      F::add(v, x[i], F::TWO ? y[i] : T(0));
    const i64 nv = (n - head) / N;
    const V* xv = reinterpret_cast<const V*>(x + head);
    const V* yv = reinterpret_cast<const V*>((F::TWO ? y : x) + head);
    i64 i = tid;
    for (; i + (UNROLL - 1) * stride < nv; i += UNROLL * stride) {
      V a[UNROLL], b[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        a[u] = xv[i + u * stride];
        b[u] = F::TWO ? yv[i + u * stride] : a[u];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int j = 0; j < N; ++j)
          F::add(v, get(a[u], j), get(b[u], j));
    }
    for (; i < nv; i += stride) {
      const V a = xv[i], b = F::TWO ? yv[i] : a;
#pragma unroll
      for (int j = 0; j < N; ++j)
        F::add(v, get(a, j), get(b, j));
    }
    done = head + nv * N;
  }
  for (i64 i = done + tid; i < n; i += stride)
    F::add(v, x[i * incx], F::TWO ? y[i * incy] : T(0));

  block_sum<T, F::K>(v, sh);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < F::K; ++k)
      part[k * gridDim.x + blockIdx.x] = v[k];
    __threadfence(); // the partials are visible before the count says so
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  // The last block: every other block's partials are written. Sum them in a fixed order.
  __threadfence();
#pragma unroll
  for (int k = 0; k < F::K; ++k)
    v[k] = T(0);
  for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x)
#pragma unroll
    for (int k = 0; k < F::K; ++k)
      v[k] += __ldcg(part + k * gridDim.x + b); // from L2, not a stale L1 line
  block_sum<T, F::K>(v, sh);
  if (threadIdx.x == 0) {
    result[0] = F::template fin<T>(v);
    *counter = 0; // ready for the next reduction on the stream
  }
}

// ---- elementwise BLAS-1 -------------------------------------------------------------------
// An element function f(a, b) on x[i] (a) and y[i] (b), with what it reads and writes: rx, ry,
// wx, wy (constants the compiler folds, or axpby's runtime alpha/beta tests).
template <class T> struct scal_f {
  T al;
  bool rx, ry, wx, wy;
  __device__ scal_f(T a) : al(a), rx(true), ry(false), wx(true), wy(false) {}
  __device__ __forceinline__ void operator()(T& a, T&) const { a = al * a; } // IEEE: NaN * 0 is NaN
};
template <class T> struct copy_f {
  bool rx, ry, wx, wy;
  __device__ copy_f() : rx(true), ry(false), wx(false), wy(true) {}
  __device__ __forceinline__ void operator()(T& a, T& b) const { b = a; }
};
template <class T> struct swap_f {
  bool rx, ry, wx, wy;
  __device__ swap_f() : rx(true), ry(true), wx(true), wy(true) {}
  __device__ __forceinline__ void operator()(T& a, T& b) const {
    const T t = a;
    a = b;
    b = t;
  }
};
template <class T> struct axpy_f {
  T al;
  bool rx, ry, wx, wy;
  __device__ axpy_f(T a) : al(a), rx(true), ry(true), wx(false), wy(true) {}
  __device__ __forceinline__ void operator()(T& a, T& b) const { b = b + al * a; }
};
// alpha == 0: x not read; beta == 0: y not read (garbage or NaN in it never survive).
template <class T> struct axpby_f {
  T al, be;
  bool rx, ry, wx, wy;
  __device__ axpby_f(T a, T b) : al(a), be(b), rx(a != T(0)), ry(b != T(0)), wx(false), wy(true) {}
  __device__ __forceinline__ void operator()(T& a, T& b) const { b = COMBINE(al, a, be, b); }
};

template <class T, class F>
__device__ __forceinline__ void element(const F& f, T* x, i64 ix, T* y, i64 iy) {
  T a = f.rx ? x[ix] : T(0), b = f.ry ? y[iy] : T(0);
  f(a, b);
  if (f.wx) x[ix] = a;
  if (f.wy) y[iy] = b;
}

// f over n elements of x and y (a one-vector op passes x as y, with ry and wy false).
template <class T, class F>
__device__ __forceinline__ void map2(i64 n, T* __restrict__ x, i64 incx, T* __restrict__ y,
                                     i64 incy, int vec, const F& f) {
  typedef typename v16<T>::V V;
  const int N = v16<T>::N;
  const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x, stride = (i64)gridDim.x * blockDim.x;
  i64 done = 0;
  if (vec) { // incx == incy == 1, x and y equally misaligned
    const i64 head = head_of<T>(x, n);
    for (i64 i = tid; i < head; i += stride)
      element(f, x, i, y, i);
    const i64 nv = (n - head) / N;
    V* xv = reinterpret_cast<V*>(x + head);
    V* yv = reinterpret_cast<V*>(y + head);
    i64 i = tid;
    for (; i + (UNROLL - 1) * stride < nv; i += UNROLL * stride) {
      V a[UNROLL], b[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (f.rx) a[u] = xv[i + u * stride];
        if (f.ry) b[u] = yv[i + u * stride];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int j = 0; j < N; ++j) {
          T ea = f.rx ? get(a[u], j) : T(0), eb = f.ry ? get(b[u], j) : T(0);
          f(ea, eb);
          put(a[u], j, ea);
          put(b[u], j, eb);
        }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (f.wx) xv[i + u * stride] = a[u];
        if (f.wy) yv[i + u * stride] = b[u];
      }
    }
    for (; i < nv; i += stride) {
      V a, b;
      if (f.rx) a = xv[i];
      if (f.ry) b = yv[i];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        T ea = f.rx ? get(a, j) : T(0), eb = f.ry ? get(b, j) : T(0);
        f(ea, eb);
        put(a, j, ea);
        put(b, j, eb);
      }
      if (f.wx) xv[i] = a;
      if (f.wy) yv[i] = b;
    }
    done = head + nv * N;
  }
  for (i64 i = done + tid; i < n; i += stride)
    element(f, x, i * incx, y, i * incy);
}

// ---- the reference-semantics helpers around cuBLAS's gemm/gemv ----------------------------
// x = beta x over a rows x cols window (ld apart; a vector is cols 1, ld inc); beta == 0
// stores zeros without reading x.
template <class T>
__device__ void scale(i64 total, int cols, T b, const T* pb, T* x, i64 ld) {
  const T be = value_of(b, pb);
  GRID_LOOP(i, total) {
    const i64 ix = (i / cols) * ld + i % cols;
    x[ix] = be == T(0) ? T(0) : be * x[ix];
  }
}

// With a device-resident alpha cuBLAS may multiply A by alpha == 0 (NaN in A then leaks into
// C). Around the cuBLAS call: save_if_alpha0 keeps beta * C (or 0) of the window when alpha is
// 0, restore_if_alpha0 puts it back; both return at once when alpha != 0.
template <class T>
__device__ void save_if_alpha0(const T* pa, T b, const T* pb, i64 total, int cols, const T* c,
                               i64 ld, T* saved) {
  if (*pa != T(0)) return;
  const T be = value_of(b, pb);
  GRID_LOOP(i, total) { saved[i] = be == T(0) ? T(0) : be * c[(i / cols) * ld + i % cols]; }
}
template <class T>
__device__ void restore_if_alpha0(const T* pa, i64 total, int cols, const T* saved, T* c,
                                  i64 ld) {
  if (*pa != T(0)) return;
  GRID_LOOP(i, total) { c[(i / cols) * ld + i % cols] = saved[i]; }
}

// The entry points, one per dtype (extern "C": unmangled names for kernel_create). vec: the
// host saw increments 1, element-aligned pointers and x, y equally misaligned modulo 16 bytes.
#define PCY_BLAS_CUDA_KERNELS(T, S)                                                            \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      asum_##S(i64 n, const T* x, i64 incx, int vec, T* part, unsigned* counter, T* result) {  \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    reduce<T, asum_f>(n, x, incx, x, incx, vec, part, counter, result);                        \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      nrm2_##S(i64 n, const T* x, i64 incx, int vec, T* part, unsigned* counter, T* result) {  \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    reduce<T, nrm2_f>(n, x, incx, x, incx, vec, part, counter, result);                        \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      dot_##S(i64 n, const T* x, i64 incx, const T* y, i64 incy, int vec, T* part,             \
              unsigned* counter, T* result) {                                                  \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    reduce<T, dot_f>(n, x, incx, y, incy, vec, part, counter, result);                         \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      scal_##S(i64 n, T a, const T* pa, T* x, i64 incx, int vec) {                             \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    map2<T>(n, x, incx, x, incx, vec, scal_f<T>(value_of(a, pa)));                             \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      copy_##S(i64 n, const T* x, i64 incx, T* y, i64 incy, int vec) {                         \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    map2<T>(n, const_cast<T*>(x), incx, y, incy, vec, copy_f<T>());                            \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      swap_##S(i64 n, T* x, i64 incx, T* y, i64 incy, int vec) {                               \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    map2<T>(n, x, incx, y, incy, vec, swap_f<T>());                                            \
  }                                                                                            \
  /* y += alpha x; alpha == 0 (host or device) returns at once: y keeps its bits. */           \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      axpy_##S(i64 n, T a, const T* pa, const T* x, i64 incx, T* y, i64 incy, int vec) {       \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    const T al = value_of(a, pa);                                                              \
    if (al == T(0)) return;                                                                    \
    map2<T>(n, const_cast<T*>(x), incx, y, incy, vec, axpy_f<T>(al));                          \
  }                                                                                            \
  /* y = alpha x + beta y (cuBLAS has no axpby; one pass instead of scal + axpy). */           \
  extern "C" __global__ void __launch_bounds__(RWG, 4)                                          \
      axpby_##S(i64 n, T a, const T* pa, T b, const T* pb, const T* x, i64 incx, T* y,         \
                i64 incy, int vec) {                                                           \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    map2<T>(n, const_cast<T*>(x), incx, y, incy, vec,                                          \
            axpby_f<T>(value_of(a, pa), value_of(b, pb)));                                     \
  }                                                                                            \
  /* Small n: one element per thread, no vector head or unrolled loop (a short kernel costs   \
     less per node of a replayed graph; blas_cuda.cpp picks it below small_max elements). */   \
  extern "C" __global__ void __launch_bounds__(RWG)                                             \
      axpy_small_##S(i64 n, T a, const T* pa, const T* x, i64 incx, T* y, i64 incy) {          \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    const T al = value_of(a, pa);                                                              \
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;                                  \
    if (i < n && al != T(0)) y[i * incy] = y[i * incy] + al * x[i * incx];                     \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG)                                             \
      scal_small_##S(i64 n, T a, const T* pa, T* x, i64 incx) {                                \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    const T al = value_of(a, pa);                                                              \
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;                                  \
    if (i < n) x[i * incx] = al * x[i * incx];                                                 \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG)                                             \
      copy_small_##S(i64 n, const T* x, i64 incx, T* y, i64 incy) {                            \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;                                  \
    if (i < n) y[i * incy] = x[i * incx];                                                      \
  }                                                                                            \
  extern "C" __global__ void scale_##S(i64 total, int cols, T b, const T* pb, T* x, i64 ld) {  \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    scale<T>(total, cols, b, pb, x, ld);                                                       \
  }                                                                                            \
  extern "C" __global__ void save_if_alpha0_##S(const T* pa, T b, const T* pb, i64 total,      \
                                                int cols, const T* c, i64 ld, T* saved) {      \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    save_if_alpha0<T>(pa, b, pb, total, cols, c, ld, saved);                                   \
  }                                                                                            \
  extern "C" __global__ void restore_if_alpha0_##S(const T* pa, i64 total, int cols,           \
                                                   const T* saved, T* c, i64 ld) {             \
    PCY_WAIT_PRIOR();                                                                          \
    PCY_START_NEXT();                                                                          \
    restore_if_alpha0<T>(pa, total, cols, saved, c, ld);                                       \
  }

PCY_BLAS_CUDA_KERNELS(float, f32)
PCY_BLAS_CUDA_KERNELS(double, f64)

// gemm in f16 / bf16 (cuBLAS's cublasGemmEx does the product): x = beta x over a window for
// k == 0 or alpha == 0, in float, rounded once to the storage type; beta == 0 stores zeros
// without reading x.
template <class S> __device__ void scale_half(i64 total, int cols, float b, S* x, i64 ld) {
  GRID_LOOP(i, total) {
    const i64 ix = (i / cols) * ld + i % cols;
    x[ix] = io<S>::st(b == 0.f ? 0.f : b * io<S>::ld(x[ix]));
  }
}
extern "C" __global__ void scale_f16(i64 total, int cols, float b, h16* x, i64 ld) {
  PCY_WAIT_PRIOR();
  PCY_START_NEXT();
  scale_half<h16>(total, cols, b, x, ld);
}
extern "C" __global__ void scale_bf16(i64 total, int cols, float b, b16* x, i64 ld) {
  PCY_WAIT_PRIOR();
  PCY_START_NEXT();
  scale_half<b16>(total, cols, b, x, ld);
}
