/* parenchyma extension "blas": the op names and argument signatures every BLAS bundle serves.
 *
 * Signature letters (see pcy_op_desc): "i" int (i64), "f" float (f64), "t<" tensor in,
 * "t>" tensor out, "t=" tensor inout, "s" scalar: either a FLOAT argument (a host value) or a
 * one-element TENSOR argument with intent IN (a value that stays on the device).
 * Vectors are 1-d tensors with an element stride inc (> 0); matrices are row-major with a
 * leading dimension (elements between rows). `trans` is 0 (no) or 1 (transpose).
 * Results (asum, dot, nrm2) are written to a one-element tensor of the op's dtype.
 */
#ifndef PCY_BLAS_H
#define PCY_BLAS_H

#define PCY_BLAS_EXTENSION "blas"

/*                      name       signature (argument names in comments)              */
#define PCY_BLAS_ASUM_SIG "i t< i t>"        /* n, x, incx, result             */
#define PCY_BLAS_AXPY_SIG "i s t< i t= i"    /* n, alpha, x, incx, y, incy     */
#define PCY_BLAS_AXPBY_SIG "i s t< i s t= i" /* n, alpha, x, incx, beta, y, incy */
#define PCY_BLAS_COPY_SIG "i t< i t> i"      /* n, x, incx, y, incy            */
#define PCY_BLAS_DOT_SIG "i t< i t< i t>"    /* n, x, incx, y, incy, result    */
#define PCY_BLAS_NRM2_SIG "i t< i t>"        /* n, x, incx, result             */
#define PCY_BLAS_SCAL_SIG "i s t= i"         /* n, alpha, x, incx              */
#define PCY_BLAS_SWAP_SIG "i t= i t= i"      /* n, x, incx, y, incy            */
/* y = alpha * op(A) x + beta * y; A is m x n as stored (row-major, lda >= n);
 * op(A) is m x n (trans 0) or n x m (trans 1). */
#define PCY_BLAS_GEMV_SIG                                                                          \
  "i i i s t< i t< i s t= i" /* trans, m, n, alpha, A, lda, x, incx, beta, y, incy */
/* C = alpha * op(A) op(B) + beta * C, row-major; C is m x n, op(A) m x k, op(B) k x n. */
#define PCY_BLAS_GEMM_SIG                                                                          \
  "i i i i i s t< i t< i s t= i" /* transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc   \
                                  */

#endif /* PCY_BLAS_H */
