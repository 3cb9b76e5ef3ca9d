/* parenchyma extension "blas": every op's arguments, as data (the op schemas every BLAS bundle
 * and the front-end parenchyma/blas.hpp are built from).
 *
 * Vectors are tensors (any shape: their elements in row-major order) with an element stride
 * inc (> 0); matrices are row-major 2-d tensors with a leading dimension (elements between
 * rows). `trans` is 0 (no) or 1 (transpose). A scalar is a host value (FLOAT) or a one-element
 * tensor of the op's dtype (a value that stays on the device). Results (asum, dot, nrm2) are
 * written to a one-element tensor of the op's dtype. X(name, kind, intent, dtype, rank): see
 * PCY_DECLARE_OP_SCHEMA in pcy_bundle.h.
 */
#ifndef PCY_BLAS_H
#define PCY_BLAS_H

#include "../pcy_bundle.h"

#define PCY_BLAS_EXTENSION "blas"

/* The 1.0 signatures: what a 1.0 host compares a descriptor's `signature` with (1.1 hosts check
 * the schema). Kept unchanged: a minor never removes. A bundle's descriptors carry the signature
 * derived from the schema, except copy, whose 1.0 signature passes y as out ("t>") where the
 * schema's OVERWRITE derives "t=": op_table::add takes PCY_BLAS_COPY_SIG for it. */
#define PCY_BLAS_ASUM_SIG "i t< i t>"
#define PCY_BLAS_AXPY_SIG "i s t< i t= i"
#define PCY_BLAS_AXPBY_SIG "i s t< i s t= i"
#define PCY_BLAS_COPY_SIG "i t< i t> i"
#define PCY_BLAS_DOT_SIG "i t< i t< i t>"
#define PCY_BLAS_NRM2_SIG "i t< i t>"
#define PCY_BLAS_SCAL_SIG "i s t= i"
#define PCY_BLAS_SWAP_SIG "i t= i t= i"
#define PCY_BLAS_GEMV_SIG "i i i s t< i t< i s t= i"
#define PCY_BLAS_GEMM_SIG "i i i i i s t< i t< i s t= i"

/* result = sum |x_i| */
#define PCY_BLAS_ASUM_ARGS(X)                                                                      \
  X(n, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(incx, INT, 0, OP, ANY)                        \
  X(result, TENSOR, OUT, OP, ANY)
/* y = alpha * x + y */
#define PCY_BLAS_AXPY_ARGS(X)                                                                      \
  X(n, INT, 0, OP, ANY) X(alpha, SCALAR, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY)                    \
  X(incx, INT, 0, OP, ANY) X(y, TENSOR, INOUT, OP, ANY) X(incy, INT, 0, OP, ANY)
/* y = alpha * x + beta * y (y is OUT when beta is a host 0 and y is dense and whole) */
#define PCY_BLAS_AXPBY_ARGS(X)                                                                     \
  X(n, INT, 0, OP, ANY) X(alpha, SCALAR, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY)                    \
  X(incx, INT, 0, OP, ANY) X(beta, SCALAR, 0, OP, ANY) X(y, TENSOR, OVERWRITE, OP, ANY)           \
  X(incy, INT, 0, OP, ANY)
/* y = x (y is OUT when it is dense and whole) */
#define PCY_BLAS_COPY_ARGS(X)                                                                      \
  X(n, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(incx, INT, 0, OP, ANY)                        \
  X(y, TENSOR, OVERWRITE, OP, ANY) X(incy, INT, 0, OP, ANY)
/* result = x . y */
#define PCY_BLAS_DOT_ARGS(X)                                                                       \
  X(n, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(incx, INT, 0, OP, ANY)                        \
  X(y, TENSOR, IN, OP, ANY) X(incy, INT, 0, OP, ANY) X(result, TENSOR, OUT, OP, ANY)
/* result = sqrt(sum x_i^2), without overflow or underflow */
#define PCY_BLAS_NRM2_ARGS(X)                                                                      \
  X(n, INT, 0, OP, ANY) X(x, TENSOR, IN, OP, ANY) X(incx, INT, 0, OP, ANY)                        \
  X(result, TENSOR, OUT, OP, ANY)
/* x = alpha * x */
#define PCY_BLAS_SCAL_ARGS(X)                                                                      \
  X(n, INT, 0, OP, ANY) X(alpha, SCALAR, 0, OP, ANY) X(x, TENSOR, INOUT, OP, ANY)                 \
  X(incx, INT, 0, OP, ANY)
/* x <-> y */
#define PCY_BLAS_SWAP_ARGS(X)                                                                      \
  X(n, INT, 0, OP, ANY) X(x, TENSOR, INOUT, OP, ANY) X(incx, INT, 0, OP, ANY)                     \
  X(y, TENSOR, INOUT, OP, ANY) X(incy, INT, 0, OP, ANY)
/* y = alpha * op(A) x + beta * y; A is m x n as stored (row-major, lda >= n); op(A) is m x n
 * (trans 0) or n x m (trans 1). y is OUT when beta is a host 0 and y is dense and whole. */
#define PCY_BLAS_GEMV_ARGS(X)                                                                      \
  X(trans, INT, 0, OP, ANY) X(m, INT, 0, OP, ANY) X(n, INT, 0, OP, ANY)                           \
  X(alpha, SCALAR, 0, OP, ANY) X(A, TENSOR, IN, OP, 2) X(lda, INT, 0, OP, ANY)                    \
  X(x, TENSOR, IN, OP, ANY) X(incx, INT, 0, OP, ANY) X(beta, SCALAR, 0, OP, ANY)                  \
  X(y, TENSOR, OVERWRITE, OP, ANY) X(incy, INT, 0, OP, ANY)
/* C = alpha * op(A) op(B) + beta * C, row-major; C is m x n, op(A) m x k, op(B) k x n. C is OUT
 * when beta is a host 0 and C is whole. */
#define PCY_BLAS_GEMM_ARGS(X)                                                                      \
  X(transa, INT, 0, OP, ANY) X(transb, INT, 0, OP, ANY) X(m, INT, 0, OP, ANY)                     \
  X(n, INT, 0, OP, ANY) X(k, INT, 0, OP, ANY) X(alpha, SCALAR, 0, OP, ANY)                        \
  X(A, TENSOR, IN, OP, 2) X(lda, INT, 0, OP, ANY) X(B, TENSOR, IN, OP, 2)                         \
  X(ldb, INT, 0, OP, ANY) X(beta, SCALAR, 0, OP, ANY) X(C, TENSOR, OVERWRITE, OP, 2)                  \
  X(ldc, INT, 0, OP, ANY)
/* (1.5) C_i = alpha * op(A_i) op(B_i) + beta * C_i for i < batch, row-major, each product as
 * gemm's; X_i is the matrix that starts at element i * stride_x of X (A, B and C of any rank:
 * their elements in row-major order). stride_a or stride_b may be 0 (one matrix for every
 * product); stride_c of batch > 1 is at least (m - 1) * ldc + n, so that no two outputs
 * overlap (bundles refuse less). batch == 0 does nothing. C is OUT when beta is a host 0 and
 * the batches cover C whole. No 1.0 signature: the op is new in 1.5. */
#define PCY_BLAS_GEMM_BATCHED_ARGS(X)                                                              \
  X(transa, INT, 0, OP, ANY) X(transb, INT, 0, OP, ANY) X(m, INT, 0, OP, ANY)                     \
  X(n, INT, 0, OP, ANY) X(k, INT, 0, OP, ANY) X(alpha, SCALAR, 0, OP, ANY)                        \
  X(A, TENSOR, IN, OP, ANY) X(lda, INT, 0, OP, ANY) X(stride_a, INT, 0, OP, ANY)                  \
  X(B, TENSOR, IN, OP, ANY) X(ldb, INT, 0, OP, ANY) X(stride_b, INT, 0, OP, ANY)                  \
  X(beta, SCALAR, 0, OP, ANY) X(C, TENSOR, OVERWRITE, OP, ANY) X(ldc, INT, 0, OP, ANY)            \
  X(stride_c, INT, 0, OP, ANY) X(batch, INT, 0, OP, ANY)

/* pcy_blas_<op>_schema and pcy_blas_<op>_args for every op. */
PCY_DECLARE_OP_SCHEMA(pcy_blas, asum, PCY_BLAS_EXTENSION, PCY_BLAS_ASUM_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, axpy, PCY_BLAS_EXTENSION, PCY_BLAS_AXPY_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, axpby, PCY_BLAS_EXTENSION, PCY_BLAS_AXPBY_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, copy, PCY_BLAS_EXTENSION, PCY_BLAS_COPY_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, dot, PCY_BLAS_EXTENSION, PCY_BLAS_DOT_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, nrm2, PCY_BLAS_EXTENSION, PCY_BLAS_NRM2_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, scal, PCY_BLAS_EXTENSION, PCY_BLAS_SCAL_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, swap, PCY_BLAS_EXTENSION, PCY_BLAS_SWAP_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, gemv, PCY_BLAS_EXTENSION, PCY_BLAS_GEMV_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, gemm, PCY_BLAS_EXTENSION, PCY_BLAS_GEMM_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_blas, gemm_batched, PCY_BLAS_EXTENSION, PCY_BLAS_GEMM_BATCHED_ARGS)

/* Every op of the extension, for tools that list them (parenchyma-info, the docs table). */
#ifdef __cplusplus
inline constexpr const pcy_op_schema* pcy_blas_schemas[] = {
    &pcy_blas_asum_schema, &pcy_blas_axpy_schema, &pcy_blas_axpby_schema, &pcy_blas_copy_schema,
    &pcy_blas_dot_schema,  &pcy_blas_nrm2_schema, &pcy_blas_scal_schema,  &pcy_blas_swap_schema,
    &pcy_blas_gemv_schema, &pcy_blas_gemm_schema, &pcy_blas_gemm_batched_schema};
#else
static const pcy_op_schema* const pcy_blas_schemas[] PCY_MAYBE_UNUSED = {
    &pcy_blas_asum_schema, &pcy_blas_axpy_schema, &pcy_blas_axpby_schema, &pcy_blas_copy_schema,
    &pcy_blas_dot_schema,  &pcy_blas_nrm2_schema, &pcy_blas_scal_schema,  &pcy_blas_swap_schema,
    &pcy_blas_gemv_schema, &pcy_blas_gemm_schema, &pcy_blas_gemm_batched_schema};
#endif
#define PCY_BLAS_OP_COUNT 11

#endif /* PCY_BLAS_H */
