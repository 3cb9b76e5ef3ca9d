// coll_cuda's own kernels (after the SDK's common CUDA source: i64, GRID_LOOP, h16/b16, io<S>).
// f16 / bf16 reductions go through f32 (pcy_coll.h): widen to an f32 workspace, let NCCL reduce
// there, then narrow once, dividing first for AVG. AVG of the other dtypes: NCCL's sum, then
// divided here (integers truncate toward zero, as C's division), so the result is the SUM divided
// by the ranks, never a pre-scaled sum. Grid-stride loops: any grid size is correct.

template <class S> __device__ void widen(i64 n, const S* x, float* y) {
  GRID_LOOP(i, n) y[i] = io<S>::ld(x[i]);
}
template <class S> __device__ void narrow(i64 n, const float* x, S* y, float divisor) {
  GRID_LOOP(i, n) y[i] = io<S>::st(divisor == 1.0f ? x[i] : x[i] / divisor);
}
template <class T> __device__ void divide(i64 n, T* y, T divisor) {
  GRID_LOOP(i, n) y[i] = y[i] / divisor;
}

extern "C" __global__ void widen_f16(i64 n, const h16* x, float* y) { widen(n, x, y); }
extern "C" __global__ void widen_bf16(i64 n, const b16* x, float* y) { widen(n, x, y); }
extern "C" __global__ void narrow_f16(i64 n, const float* x, h16* y, float d) {
  narrow(n, x, y, d);
}
extern "C" __global__ void narrow_bf16(i64 n, const float* x, b16* y, float d) {
  narrow(n, x, y, d);
}
extern "C" __global__ void divide_f32(i64 n, float* y, float d) { divide(n, y, d); }
extern "C" __global__ void divide_f64(i64 n, double* y, double d) { divide(n, y, d); }
extern "C" __global__ void divide_i32(i64 n, int* y, int d) { divide(n, y, d); }
extern "C" __global__ void divide_i64(i64 n, i64* y, i64 d) { divide(n, y, d); }
