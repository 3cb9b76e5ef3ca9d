// BLAS bundle for CUDA: our own CUDA C kernels for what cuBLAS does not do the reference-BLAS
// way (docs/blas.md, "Reference semantics"). Built once per context through the CUDA framework's
// program_build (NVRTC for the device's own architecture, cubin cache) and launched with
// kernel_launch on the backend's stream. NVRTC sees no headers: the source is self-contained.
//
// Pointers travel as 8-byte scalars (device addresses with the tensor's byte offset applied);
// a scalar is a host value `a` plus a device pointer `pa` that, when not null, replaces it, so a
// device-resident alpha or beta is read on the device, never on the host. Every kernel loops
// over its range with a grid stride, so any grid size is correct.
#pragma once

namespace parenchyma::blas_cuda {

inline constexpr const char* kernel_source = R"CUDA(
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

#define GRID_LOOP(i, count)                                                                    \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (count);            \
       i += (long long)gridDim.x * blockDim.x)

// y = alpha x + beta y (cuBLAS has no axpby; one pass instead of scal + axpy).
template <class T>
__device__ void axpby(int n, T a, const T* pa, T b, const T* pb, const T* x, long long incx,
                      T* y, long long incy) {
  const T al = value_of(a, pa), be = value_of(b, pb);
  GRID_LOOP(i, n) { y[i * incy] = COMBINE(al, x[i * incx], be, y[i * incy]); }
}

// y += alpha x with a device-resident alpha: alpha == 0 returns at once (reference axpy), so
// y keeps its bits even where x holds NaN.
template <class T>
__device__ void axpy(int n, const T* pa, const T* x, long long incx, T* y, long long incy) {
  const T al = *pa;
  if (al == T(0)) return;
  GRID_LOOP(i, n) { y[i * incy] += al * x[i * incx]; }
}

// x = beta x over a rows x cols window (ld apart; a vector is cols 1, ld inc); beta == 0
// stores zeros without reading x.
template <class T>
__device__ void scale(long long total, int cols, T b, const T* pb, T* x, long long ld) {
  const T be = value_of(b, pb);
  GRID_LOOP(i, total) {
    const long long ix = (i / cols) * ld + i % cols;
    x[ix] = be == T(0) ? T(0) : be * x[ix];
  }
}

// With a device-resident alpha cuBLAS may multiply A by alpha == 0 (NaN in A then leaks into
// C). Around the cuBLAS call: save_if_alpha0 keeps beta * C (or 0) of the window when alpha is
// 0, restore_if_alpha0 puts it back; both return at once when alpha != 0.
template <class T>
__device__ void save_if_alpha0(const T* pa, T b, const T* pb, long long total, int cols,
                               const T* c, long long ld, T* saved) {
  if (*pa != T(0)) return;
  const T be = value_of(b, pb);
  GRID_LOOP(i, total) { saved[i] = be == T(0) ? T(0) : be * c[(i / cols) * ld + i % cols]; }
}
template <class T>
__device__ void restore_if_alpha0(const T* pa, long long total, int cols, const T* saved, T* c,
                                  long long ld) {
  if (*pa != T(0)) return;
  GRID_LOOP(i, total) { c[(i / cols) * ld + i % cols] = saved[i]; }
}

// nrm2 without overflow or underflow: Blue's scaled sum of squares (as LAPACK's dnrm2 since
// 3.10). |x| below TSML is scaled up by SSML, above TBIG down by SBIG, so no square overflows
// or underflows (denormals included); the three sums fold in parallel and nrm2_2 combines them
// once. cuBLAS's nrm2 loses small f32 values and denormals. The constants are powers of two.
template <class T> struct blue;
template <> struct blue<float> {
  static constexpr float tsml = 0x1p-63f, tbig = 0x1p52f, ssml = 0x1p75f, sbig = 0x1p-76f;
};
template <> struct blue<double> {
  static constexpr double tsml = 0x1p-511, tbig = 0x1p486, ssml = 0x1p537, sbig = 0x1p-538;
};

constexpr int RWG = 256; // block size of the reductions (the launch passes it)

template <class T> __device__ void fold3(T (*s)[RWG]) {
  const int lid = threadIdx.x;
  __syncthreads();
  for (int h = RWG / 2; h > 0; h >>= 1) {
    if (lid < h) {
      s[0][lid] += s[0][lid + h];
      s[1][lid] += s[1][lid + h];
      s[2][lid] += s[2][lid + h];
    }
    __syncthreads();
  }
}

// Stage 1: block g writes its small, medium and big sums to part[g], part[groups + g],
// part[2 groups + g].
template <class T>
__device__ void nrm2_1(int n, const T* x, long long incx, int groups, T* part, T (*s)[RWG]) {
  T sml = 0, med = 0, big = 0;
  GRID_LOOP(i, n) {
    const T ax = absolute(x[i * incx]);
    if (ax > blue<T>::tbig) {
      const T v = ax * blue<T>::sbig;
      big += v * v;
    } else if (ax < blue<T>::tsml) {
      const T v = ax * blue<T>::ssml;
      sml += v * v;
    } else {
      med += ax * ax; // NaN lands here and propagates
    }
  }
  s[0][threadIdx.x] = sml;
  s[1][threadIdx.x] = med;
  s[2][threadIdx.x] = big;
  fold3<T>(s);
  if (threadIdx.x == 0) {
    part[blockIdx.x] = s[0][0];
    part[groups + blockIdx.x] = s[1][0];
    part[2 * groups + blockIdx.x] = s[2][0];
  }
}

// Stage 2 (one block): fold every block's sums, then combine the three into the norm.
template <class T> __device__ void nrm2_2(int groups, const T* part, T* result, T (*s)[RWG]) {
  T sml = 0, med = 0, big = 0;
  for (int i = threadIdx.x; i < groups; i += RWG) {
    sml += part[i];
    med += part[groups + i];
    big += part[2 * groups + i];
  }
  s[0][threadIdx.x] = sml;
  s[1][threadIdx.x] = med;
  s[2][threadIdx.x] = big;
  fold3<T>(s);
  if (threadIdx.x != 0) return;
  sml = s[0][0];
  med = s[1][0];
  big = s[2][0];
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
  result[0] = scl * root(sumsq);
}

// The entry points, one per dtype (extern "C": unmangled names for kernel_create).
#define PCY_BLAS_CUDA_KERNELS(T, S)                                                            \
  extern "C" __global__ void axpby_##S(int n, T a, const T* pa, T b, const T* pb, const T* x,  \
                                       long long incx, T* y, long long incy) {                 \
    axpby<T>(n, a, pa, b, pb, x, incx, y, incy);                                               \
  }                                                                                            \
  extern "C" __global__ void axpy_##S(int n, const T* pa, const T* x, long long incx, T* y,    \
                                      long long incy) {                                        \
    axpy<T>(n, pa, x, incx, y, incy);                                                          \
  }                                                                                            \
  extern "C" __global__ void scale_##S(long long total, int cols, T b, const T* pb, T* x,      \
                                       long long ld) {                                         \
    scale<T>(total, cols, b, pb, x, ld);                                                       \
  }                                                                                            \
  extern "C" __global__ void save_if_alpha0_##S(const T* pa, T b, const T* pb,                 \
                                                long long total, int cols, const T* c,         \
                                                long long ld, T* saved) {                      \
    save_if_alpha0<T>(pa, b, pb, total, cols, c, ld, saved);                                   \
  }                                                                                            \
  extern "C" __global__ void restore_if_alpha0_##S(const T* pa, long long total, int cols,     \
                                                   const T* saved, T* c, long long ld) {       \
    restore_if_alpha0<T>(pa, total, cols, saved, c, ld);                                       \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG)                                            \
      nrm2_1_##S(int n, const T* x, long long incx, int groups, T* part) {                     \
    __shared__ T s[3][RWG];                                                                    \
    nrm2_1<T>(n, x, incx, groups, part, s);                                                    \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(RWG)                                            \
      nrm2_2_##S(int groups, const T* part, T* result) {                                       \
    __shared__ T s[3][RWG];                                                                    \
    nrm2_2<T>(groups, part, result, s);                                                        \
  }

PCY_BLAS_CUDA_KERNELS(float, f32)
PCY_BLAS_CUDA_KERNELS(double, f64)
)CUDA";

} // namespace parenchyma::blas_cuda
