/* parenchyma extension "nn": neural-network ops, every op's arguments as data (the op schemas
 * every NN bundle and the front-end parenchyma/nn.hpp are built from). X(name, kind, intent,
 * dtype, rank): see PCY_DECLARE_OP_SCHEMA in pcy_bundle.h. The reference semantics below are
 * what every bundle implements and what the conformance suite checks (docs/nn.md).
 *
 * Common rules.
 * - Tensors are dense and row-major. Image tensors are NCHW (rank 4); filters are K x C/groups
 *   x R x S (rank 4). Tensors of one op are distinct (no aliasing) unless the op is in place.
 * - Geometry arrays (stride, padding, dilation, window) are INT_ARRAYs of two values: (height,
 *   width). Strides, dilations and windows are >= 1, paddings >= 0.
 * - The op's dtype is that of its data tensors (f32, f64; f16 and bf16 where a bundle says so);
 *   indices, cross_entropy's labels and embedding's indices are i32, dropout masks u8,
 *   convolution_algorithm's result i64.
 * - Empty tensors are allowed where the shapes allow them: the op then does nothing.
 * - NaN propagates through every elementwise op; max pooling treats NaN as larger than any
 *   number (a window holding a NaN yields NaN).
 */
#ifndef PCY_NN_H
#define PCY_NN_H

#include "../pcy_bundle.h"

#define PCY_NN_EXTENSION "nn"

/* ---- activations -----------------------------------------------------------------------------
 * f(x): sigmoid 1 / (1 + e^-x); relu max(x, 0) (-0 stays -0, NaN stays NaN); tanh; elu
 * x > 0 ? x : alpha (e^x - 1).
 * <act>(x, y): y = f(x); x and y hold the same number of elements (any shapes).
 * <act>_pointwise(x): x = f(x) in place.
 * <act>_grad(y, dy, dx): dx = dy * f'(x), computed from the forward's OUTPUT y:
 *   sigmoid dy y (1 - y); relu y > 0 ? dy : 0 (a select: a NaN y gives 0); tanh dy (1 - y^2);
 *   elu y > 0 ? dy : dy (y + alpha).
 * Infinite inputs give the limits: sigmoid(+-inf) = 1 / 0, tanh(+-inf) = +-1, elu(-inf) =
 * -alpha, relu(+inf) = +inf.
 * <act>_pointwise_grad(y, d): d = d * f'(x) in place (d holds dy, becomes dx). */
#define PCY_NN_ACT_ARGS(X) X(x, TENSOR, IN, OP, ANY) X(y, TENSOR, OUT, OP, ANY)
#define PCY_NN_ACT_POINTWISE_ARGS(X) X(x, TENSOR, INOUT, OP, ANY)
#define PCY_NN_ACT_GRAD_ARGS(X)                                                                    \
  X(y, TENSOR, IN, OP, ANY) X(dy, TENSOR, IN, OP, ANY) X(dx, TENSOR, OUT, OP, ANY)
#define PCY_NN_ACT_POINTWISE_GRAD_ARGS(X) X(y, TENSOR, IN, OP, ANY) X(d, TENSOR, INOUT, OP, ANY)
#define PCY_NN_ELU_ARGS(X) PCY_NN_ACT_ARGS(X) X(alpha, FLOAT, 0, OP, ANY)
#define PCY_NN_ELU_POINTWISE_ARGS(X) PCY_NN_ACT_POINTWISE_ARGS(X) X(alpha, FLOAT, 0, OP, ANY)
#define PCY_NN_ELU_GRAD_ARGS(X) PCY_NN_ACT_GRAD_ARGS(X) X(alpha, FLOAT, 0, OP, ANY)
#define PCY_NN_ELU_POINTWISE_GRAD_ARGS(X)                                                          \
  PCY_NN_ACT_POINTWISE_GRAD_ARGS(X) X(alpha, FLOAT, 0, OP, ANY)

/* ---- softmax ---------------------------------------------------------------------------------
 * Along `axis` (0 <= axis < rank of x): x is viewed as outer x len x inner, with len the extent
 * of axis. softmax y = e^(x - max) / sum e^(x - max); log_softmax y = x - max - log sum
 * e^(x - max). x and y have the same shape.
 * softmax_grad(y, dy, dx): dx = y (dy - sum(dy y)); log_softmax_grad: dx = dy - e^y sum(dy),
 * sums along the axis; y is the forward's output. */
#define PCY_NN_SOFTMAX_ARGS(X)                                                                     \
  X(x, TENSOR, IN, OP, ANY) X(y, TENSOR, OUT, OP, ANY) X(axis, INT, 0, OP, ANY)
#define PCY_NN_SOFTMAX_GRAD_ARGS(X)                                                                \
  X(y, TENSOR, IN, OP, ANY)                                                                        \
  X(dy, TENSOR, IN, OP, ANY) X(dx, TENSOR, OUT, OP, ANY) X(axis, INT, 0, OP, ANY)

/* ---- convolution -----------------------------------------------------------------------------
 * Cross-correlation, as cuDNN's CUDNN_CROSS_CORRELATION and PyTorch's conv2d: x N x C x H x W,
 * w K x C/groups x R x S, y N x K x P x Q with
 *   P = (H + 2 pad_h - dil_h (R - 1) - 1) / stride_h + 1 (>= 1), Q likewise;
 *   y[n,k,p,q] = sum_{c,r,s} x[n, g C/groups + c, p str_h - pad_h + r dil_h, ...] w[k,c,r,s]
 * with g = k / (K/groups) and x outside the image read as 0. groups divides C and K.
 * convolution_grad_data(w, dy, dx): dx = the gradient of sum(y dy) with respect to x;
 * convolution_grad_filter(x, dy, dw): the gradient with respect to w. Each overwrites its
 * output. `algorithm`: a value that convolution_algorithm returned for this direction (0: the
 * bundle's default); a number the bundle does not have is PCY_ERR_INVALID_ARGUMENT. `math`: 0 the
 * bundle's default (strict unless its setting says otherwise), 1 strict (the op's dtype
 * throughout), 2 reduced-precision inner products allowed (TF32 tensor cores for f32 on CUDA).
 * Workspace comes from the host (pcy_op_call::workspace). convolution_bias(y, bias): y[n,k,:,:] +=
 * bias[k]; convolution_grad_bias(dy, db): db[k] = sum over n, p, q of dy[n,k,p,q].
 * convolution_algorithm(direction, x_shape, w_shape, ...): direction 0 forward, 1 grad_data,
 * 2 grad_filter; requested -1 measures the bundle's algorithms once for these shapes on this
 * device (the result is cached), -2 chooses by heuristic, >= 0 asks for that one (refused with
 * PCY_ERR_UNSUPPORTED when it cannot run these shapes). result (i64, 2 or 3 values) =
 * {algorithm, workspace bytes, numerics}; numerics (written when the result has 3 values):
 * PCY_NN_NUMERICS_DIRECT when each output is a sum of its products (its rounding error bounded
 * by those terms' magnitudes), PCY_NN_NUMERICS_TRANSFORM when the algorithm computes through a
 * transform (FFT, Winograd) that spreads rounding error over a tile: each output's error is then
 * bounded by the largest magnitude in the output, not by its own terms (an output that is exactly
 * 0 may come back as a tiny nonzero). */
#define PCY_NN_NUMERICS_DIRECT 0
#define PCY_NN_NUMERICS_TRANSFORM 1
#define PCY_NN_CONV_GEOMETRY(X)                                                                    \
  X(stride, INT_ARRAY, 0, OP, ANY)                                                                 \
  X(padding, INT_ARRAY, 0, OP, ANY) X(dilation, INT_ARRAY, 0, OP, ANY) X(groups, INT, 0, OP, ANY)
#define PCY_NN_CONVOLUTION_ARGS(X)                                                                 \
  X(x, TENSOR, IN, OP, 4)                                                                          \
  X(w, TENSOR, IN, OP, 4) X(y, TENSOR, OUT, OP, 4) PCY_NN_CONV_GEOMETRY(X)                         \
      X(algorithm, INT, 0, OP, ANY) X(math, INT, 0, OP, ANY)
#define PCY_NN_CONVOLUTION_GRAD_DATA_ARGS(X)                                                       \
  X(w, TENSOR, IN, OP, 4)                                                                          \
  X(dy, TENSOR, IN, OP, 4) X(dx, TENSOR, OUT, OP, 4) PCY_NN_CONV_GEOMETRY(X)                       \
      X(algorithm, INT, 0, OP, ANY) X(math, INT, 0, OP, ANY)
#define PCY_NN_CONVOLUTION_GRAD_FILTER_ARGS(X)                                                     \
  X(x, TENSOR, IN, OP, 4)                                                                          \
  X(dy, TENSOR, IN, OP, 4) X(dw, TENSOR, OUT, OP, 4) PCY_NN_CONV_GEOMETRY(X)                       \
      X(algorithm, INT, 0, OP, ANY) X(math, INT, 0, OP, ANY)
#define PCY_NN_CONVOLUTION_BIAS_ARGS(X) X(y, TENSOR, INOUT, OP, 4) X(bias, TENSOR, IN, OP, 1)
#define PCY_NN_CONVOLUTION_GRAD_BIAS_ARGS(X) X(dy, TENSOR, IN, OP, 4) X(db, TENSOR, OUT, OP, 1)
#define PCY_NN_CONVOLUTION_ALGORITHM_ARGS(X)                                                       \
  X(direction, INT, 0, OP, ANY)                                                                    \
  X(x_shape, INT_ARRAY, 0, OP, ANY) X(w_shape, INT_ARRAY, 0, OP, ANY) PCY_NN_CONV_GEOMETRY(X)      \
      X(requested, INT, 0, OP, ANY) X(math, INT, 0, OP, ANY) X(result, TENSOR, OUT, I64, 1)

/* ---- pooling ---------------------------------------------------------------------------------
 * x N x C x H x W, y N x C x P x Q, P = (H + 2 pad_h - win_h) / stride_h + 1 (floor; the
 * window must fit: H + 2 pad_h >= win_h), 2 pad <= win in each axis (every window holds an
 * element of x).
 * pooling_max: y = the maximum over the window, padding excluded. pooling_max_indexed also
 * writes indices (i32, the shape of y): the position h W + w in x's plane of the first maximum
 * in row-major window order. pooling_max_grad(x, y, dy, dx): dx = 0, then dy added at the
 * first maximum of each window (recomputed from x); pooling_max_grad_indexed(dy, indices, dx)
 * the same from indices (an index outside the plane adds nothing).
 * pooling_avg: the mean over the window; include_padding 1: divided by win_h win_w, 0: by the
 * number of elements of x in the window. pooling_avg_grad: its gradient (dx overwritten). */
#define PCY_NN_POOL_GEOMETRY(X)                                                                    \
  X(window, INT_ARRAY, 0, OP, ANY)                                                                 \
  X(stride, INT_ARRAY, 0, OP, ANY) X(padding, INT_ARRAY, 0, OP, ANY)
#define PCY_NN_POOLING_MAX_ARGS(X)                                                                 \
  X(x, TENSOR, IN, OP, 4) X(y, TENSOR, OUT, OP, 4) PCY_NN_POOL_GEOMETRY(X)
#define PCY_NN_POOLING_MAX_INDEXED_ARGS(X)                                                         \
  X(x, TENSOR, IN, OP, 4)                                                                          \
  X(y, TENSOR, OUT, OP, 4) X(indices, TENSOR, OUT, I32, 4) PCY_NN_POOL_GEOMETRY(X)
#define PCY_NN_POOLING_MAX_GRAD_ARGS(X)                                                            \
  X(x, TENSOR, IN, OP, 4)                                                                          \
  X(y, TENSOR, IN, OP, 4) X(dy, TENSOR, IN, OP, 4) X(dx, TENSOR, OUT, OP, 4)                       \
      PCY_NN_POOL_GEOMETRY(X)
#define PCY_NN_POOLING_MAX_GRAD_INDEXED_ARGS(X)                                                    \
  X(dy, TENSOR, IN, OP, 4) X(indices, TENSOR, IN, I32, 4) X(dx, TENSOR, OUT, OP, 4)
#define PCY_NN_POOLING_AVG_ARGS(X)                                                                 \
  X(x, TENSOR, IN, OP, 4)                                                                          \
  X(y, TENSOR, OUT, OP, 4) PCY_NN_POOL_GEOMETRY(X) X(include_padding, INT, 0, OP, ANY)
#define PCY_NN_POOLING_AVG_GRAD_ARGS(X)                                                            \
  X(dy, TENSOR, IN, OP, 4)                                                                         \
  X(dx, TENSOR, OUT, OP, 4) PCY_NN_POOL_GEOMETRY(X) X(include_padding, INT, 0, OP, ANY)

/* ---- local response normalisation (across channels, as PyTorch's LocalResponseNorm) ----------
 * x, y N x C x H x W; s[c] = k + alpha / n * sum_{c' in W(c)} x[c']^2 with the window
 * W(c) = [c - n/2, c + (n-1)/2] clipped to [0, C) (integer division); y = x s^-beta.
 * lrn_grad(x, y, dy, dx): dx[c] = dy[c] s[c]^-beta
 *   - 2 alpha beta / n x[c] sum_{c': c in W(c')} dy[c'] y[c'] / s[c'].
 * n >= 1, k > 0, beta >= 0. */
#define PCY_NN_LRN_PARAMS(X)                                                                       \
  X(n, INT, 0, OP, ANY)                                                                            \
  X(alpha, FLOAT, 0, OP, ANY) X(beta, FLOAT, 0, OP, ANY) X(k, FLOAT, 0, OP, ANY)
#define PCY_NN_LRN_ARGS(X) X(x, TENSOR, IN, OP, 4) X(y, TENSOR, OUT, OP, 4) PCY_NN_LRN_PARAMS(X)
#define PCY_NN_LRN_GRAD_ARGS(X)                                                                    \
  X(x, TENSOR, IN, OP, 4)                                                                          \
  X(y, TENSOR, IN, OP, 4) X(dy, TENSOR, IN, OP, 4) X(dx, TENSOR, OUT, OP, 4) PCY_NN_LRN_PARAMS(X)

/* ---- dropout ---------------------------------------------------------------------------------
 * x, y: the same element count (any shapes); mask: u8, one per element. 0 <= probability <= 1.
 * The same seed gives the same mask on every framework: for element i (0-based, row-major),
 *   z = seed + (i + 1) * 0x9E3779B97F4A7C15 (mod 2^64);
 *   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *   z = z ^ (z >> 31);  keep = (z >> 40) >= t,  t = floor(probability * 2^24 + 0.5)
 * (splitmix64; PCY_NN_DROPOUT_KEEP below). mask[i] = keep; y[i] = keep ? x[i] * scale : 0 with
 * scale = 1 / (1 - probability) rounded to the op's dtype (0 when probability is 1).
 * dropout_grad(dy, mask, dx): dx = mask ? dy * scale : 0 (a mask byte other than 0 counts as
 * kept). */
#define PCY_NN_DROPOUT_ARGS(X)                                                                     \
  X(x, TENSOR, IN, OP, ANY)                                                                        \
  X(y, TENSOR, OUT, OP, ANY) X(mask, TENSOR, OUT, U8, ANY) X(probability, FLOAT, 0, OP, ANY)       \
      X(seed, INT, 0, OP, ANY)
#define PCY_NN_DROPOUT_GRAD_ARGS(X)                                                                \
  X(dy, TENSOR, IN, OP, ANY)                                                                       \
  X(mask, TENSOR, IN, U8, ANY) X(dx, TENSOR, OUT, OP, ANY) X(probability, FLOAT, 0, OP, ANY)

/* The dropout decision for element i: 1 keeps it (threshold t as above). Plain C, so host code
 * and device kernels (OpenCL C, CUDA) spell the same arithmetic. */
#define PCY_NN_DROPOUT_MIX(seed, i, z)                                                             \
  do {                                                                                             \
    (z) = (uint64_t)(seed) + ((uint64_t)(i) + 1u) * 0x9E3779B97F4A7C15ull;                         \
    (z) = ((z) ^ ((z) >> 30)) * 0xBF58476D1CE4E5B9ull;                                             \
    (z) = ((z) ^ ((z) >> 27)) * 0x94D049BB133111EBull;                                             \
    (z) = (z) ^ ((z) >> 31);                                                                       \
  } while (0)
#define PCY_NN_DROPOUT_THRESHOLD(p) ((uint32_t)((p)*16777216.0 + 0.5))

/* ---- normalisation ---------------------------------------------------------------------------
 * Over the trailing dimensions of x from `axis` on (0 <= axis < rank): x is outer rows of n
 * elements, outer = x.shape[0] ... x.shape[axis-1], n = x.shape[axis] ... x.shape[rank-1].
 * weight and bias hold n elements each (any shapes) in the op's dtype; y has x's shape. The
 * statistics (mean, rstd) hold one value per row (outer elements, any shapes) in the statistics
 * dtype: f64 for f64 ops, f32 for f32, f16 and bf16 ops; a statistics tensor of 0 elements is
 * not written (inference: nothing saved). Sums are taken in the statistics dtype or wider, the
 * variance from the mean (two passes or an equivalent update, or the sums of d = x - s about an
 * element s of the row in a type wide enough that the cancellation keeps the statistics' digits;
 * never E[x^2] - E[x]^2 of x itself, so rows far from zero keep their digits). epsilon >= 0 and
 * finite.
 * layer_norm(x, weight, bias, y, mean, rstd, axis, epsilon):
 *   mean = sum(x) / n; var = sum((x - mean)^2) / n (biased); rstd = 1 / sqrt(var + epsilon);
 *   y = (x - mean) rstd weight + bias.
 * layer_norm_grad(x, weight, mean, rstd, dy, dx, dweight, dbias, axis): with
 *   xhat = (x - mean) rstd and g = dy weight (per row, means over the row's n elements),
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)); dweight[j] = sum over rows of dy xhat;
 *   dbias[j] = sum over rows of dy. mean and rstd are the forward's (outer elements each).
 * rms_norm(x, weight, y, rstd, axis, epsilon): rstd = 1 / sqrt(sum(x^2) / n + epsilon);
 *   y = x rstd weight.
 * rms_norm_grad(x, weight, rstd, dy, dx, dweight, axis): xhat = x rstd, g = dy weight,
 *   dx = rstd (g - xhat mean(g xhat)); dweight[j] = sum over rows of dy xhat.
 * A row holding NaN or an infinity gives NaN throughout that row (and its statistics); n = 0
 * writes nothing but the statistics, which are NaN (0 / 0). The weight gradients are summed in
 * a fixed order (the same bits on every run of a framework). */
#define PCY_NN_LAYER_NORM_ARGS(X)                                                                  \
  X(x, TENSOR, IN, OP, ANY)                                                                        \
  X(weight, TENSOR, IN, OP, ANY)                                                                   \
  X(bias, TENSOR, IN, OP, ANY) X(y, TENSOR, OUT, OP, ANY) X(mean, TENSOR, OUT, ANY, ANY)           \
      X(rstd, TENSOR, OUT, ANY, ANY) X(axis, INT, 0, OP, ANY) X(epsilon, FLOAT, 0, OP, ANY)
#define PCY_NN_LAYER_NORM_GRAD_ARGS(X)                                                             \
  X(x, TENSOR, IN, OP, ANY)                                                                        \
  X(weight, TENSOR, IN, OP, ANY)                                                                   \
  X(mean, TENSOR, IN, ANY, ANY) X(rstd, TENSOR, IN, ANY, ANY) X(dy, TENSOR, IN, OP, ANY)           \
      X(dx, TENSOR, OUT, OP, ANY) X(dweight, TENSOR, OUT, OP, ANY) X(dbias, TENSOR, OUT, OP, ANY)  \
          X(axis, INT, 0, OP, ANY)
#define PCY_NN_RMS_NORM_ARGS(X)                                                                    \
  X(x, TENSOR, IN, OP, ANY)                                                                        \
  X(weight, TENSOR, IN, OP, ANY)                                                                   \
  X(y, TENSOR, OUT, OP, ANY) X(rstd, TENSOR, OUT, ANY, ANY) X(axis, INT, 0, OP, ANY)               \
      X(epsilon, FLOAT, 0, OP, ANY)
#define PCY_NN_RMS_NORM_GRAD_ARGS(X)                                                               \
  X(x, TENSOR, IN, OP, ANY)                                                                        \
  X(weight, TENSOR, IN, OP, ANY)                                                                   \
  X(rstd, TENSOR, IN, ANY, ANY) X(dy, TENSOR, IN, OP, ANY) X(dx, TENSOR, OUT, OP, ANY)             \
      X(dweight, TENSOR, OUT, OP, ANY) X(axis, INT, 0, OP, ANY)

/* ---- cross entropy ---------------------------------------------------------------------------
 * Softmax cross entropy with integer labels (one index of the classes per row), fused
 * (PyTorch's cross_entropy given indices as its target). logits (rank >= 1): rows x C, the
 * classes along the LAST axis, rows = the product of the other extents. labels: i32, one per
 * row (rows elements, any shape). lse: the statistics
 * dtype (f64 for f64 ops, f32 for f32, f16 and bf16 ops), rows elements, each row's
 * log(sum_j e^x_j) computed from the row's maximum (e^(x - max): no overflow far from zero).
 * eps = label_smoothing, finite, in [0, 1]; reduction 0 'none', 1 'mean', 2 'sum'.
 * cross_entropy(logits, labels, loss, lse, ignore_index, label_smoothing, reduction):
 *   a row whose label t equals ignore_index (any value) is ignored; otherwise its loss is
 *   (1 - eps) (lse - x_t) + eps (lse - sum_j x_j / C), the eps term only where eps > 0 (so a
 *   -inf logit, a masked class, leaves the loss finite without smoothing). loss (op dtype):
 *   'none' one per row (rows elements, any shape; ignored rows 0); 'sum' 1 element, the sum
 *   over the rows; 'mean' 1 element, the sum over the rows not ignored divided by their number
 *   (NaN where every row is ignored or there are none). lse: rows elements, or 0 elements (not
 *   saved).
 * cross_entropy_grad(logits, labels, lse, dloss, dlogits, ignore_index, label_smoothing,
 *   reduction): dloss has the loss's shape (rows elements for 'none', 1 element otherwise); lse
 *   is the forward's (rows elements, required); dlogits (logits' shape) =
 *   g (e^(x - lse) - (1 - eps) onehot(t) - eps / C), g = dloss[row] ('none'), dloss[0] ('sum'),
 *   dloss[0] / (the number of rows not ignored) ('mean'); ignored rows get 0.
 * A label outside [0, C) that is not ignore_index is never read through: the row's loss is NaN
 * (so is a 'mean' or 'sum'), and its gradient row is NaN. A row holding NaN gives a NaN loss
 * (and lse and gradient row). The reductions over the rows are taken in a fixed order (the same
 * bits on every run of a framework). */
#define PCY_NN_CROSS_ENTROPY_ARGS(X)                                                               \
  X(logits, TENSOR, IN, OP, ANY)                                                                   \
  X(labels, TENSOR, IN, I32, ANY)                                                                  \
  X(loss, TENSOR, OUT, OP, ANY)                                                                    \
  X(lse, TENSOR, OUT, ANY, ANY) X(ignore_index, INT, 0, OP, ANY)                                   \
      X(label_smoothing, FLOAT, 0, OP, ANY) X(reduction, INT, 0, OP, ANY)
#define PCY_NN_CROSS_ENTROPY_GRAD_ARGS(X)                                                          \
  X(logits, TENSOR, IN, OP, ANY)                                                                   \
  X(labels, TENSOR, IN, I32, ANY)                                                                  \
  X(lse, TENSOR, IN, ANY, ANY)                                                                     \
  X(dloss, TENSOR, IN, OP, ANY) X(dlogits, TENSOR, OUT, OP, ANY) X(ignore_index, INT, 0, OP, ANY)  \
      X(label_smoothing, FLOAT, 0, OP, ANY) X(reduction, INT, 0, OP, ANY)

/* ---- embedding -------------------------------------------------------------------------------
 * A lookup table (PyTorch's embedding). weight: V x D (rank 2; V rows of D values, the op's
 * dtype). indices: i32, any shape S (rank >= 0, may be empty), N = its element count.
 * padding_idx: -1 (none) or a row in [0, V).
 * embedding(weight, indices, y, padding_idx): y has the shape S + [D] (N x D elements, row
 *   major), the op's dtype; y[i, :] = weight[indices[i], :] for each position i (row-major
 *   order of indices). An index outside [0, V) is never read through: its y row is NaN.
 *   padding_idx does not change the forward (its row is copied like any other).
 * embedding_grad(indices, dy, dweight, padding_idx): dy has the shape S + [D] (N x D
 *   elements); dweight (V x D) is overwritten, not accumulated:
 *     dweight[v, :] = sum of dy[i, :] over the positions i with indices[i] == v,
 *   the terms added one by one in INCREASING POSITION ORDER i, starting from +0, in the
 *   compute dtype (PCY_NN_STATISTICS_DTYPE: f32 for f16, bf16 and f32 ops, f64 for f64), and
 *   rounded once to the op's dtype. A row never indexed is 0; padding_idx's row is 0; an index
 *   outside [0, V) contributes nothing. Since the order of the additions is fixed, every run
 *   of every framework gives the same bits (no floating-point atomics anywhere).
 * Empty cases: N = 0 (y empty; dweight all 0), D = 0 (nothing to write), V = 0 (every index is
 * outside: y rows NaN where D > 0). */
#define PCY_NN_EMBEDDING_ARGS(X)                                                                   \
  X(weight, TENSOR, IN, OP, 2)                                                                     \
  X(indices, TENSOR, IN, I32, ANY) X(y, TENSOR, OUT, OP, ANY) X(padding_idx, INT, 0, OP, ANY)
#define PCY_NN_EMBEDDING_GRAD_ARGS(X)                                                              \
  X(indices, TENSOR, IN, I32, ANY)                                                                 \
  X(dy, TENSOR, IN, OP, ANY) X(dweight, TENSOR, OUT, OP, 2) X(padding_idx, INT, 0, OP, ANY)

/* ---- batch normalisation (PyTorch's BatchNorm1d/2d/3d) ------------------------------------
 * x (rank >= 2) is N x C x spatial: the channels on axis 1, N = x.shape[0], C = x.shape[1],
 * spatial the product of the extents after axis 1; per channel c the statistics run over the
 * M = N spatial elements x[n, c, ...]. weight and bias hold C elements each (any shapes) in the
 * op's dtype. The statistics tensors (running_mean, running_var, save_mean, save_rstd; mean and
 * rstd of the gradient) hold C elements each (any shapes) in the statistics dtype
 * (PCY_NN_STATISTICS_DTYPE); a statistics tensor of 0 elements is absent (not read, not written).
 * training is 0 or 1, momentum in [0, 1], epsilon > 0 and finite (each checked in both modes).
 * batch_norm(x, weight, bias, running_mean, running_var, y, save_mean, save_rstd, training,
 *   momentum, epsilon):
 *   training: mean = sum(x) / M and var = sum((x - mean)^2) / M (biased; two passes, never
 *   E[x^2] - E[x]^2) per channel; rstd = 1 / sqrt(var + epsilon); where given, running_mean =
 *   (1 - momentum) running_mean + momentum mean and running_var = (1 - momentum) running_var +
 *   momentum var M / (M - 1) (the unbiased variance), in the statistics dtype. M < 2 is refused
 *   (PCY_ERR_INVALID_ARGUMENT: no variance from one value per channel, none from an empty
 *   batch). Not training: mean = running_mean, rstd = 1 / sqrt(running_var + epsilon), both
 *   running statistics required and only read; M may be 0 (y empty).
 *   y = (x - mean) rstd weight + bias; save_mean and save_rstd receive the mean and rstd used
 *   (in both modes, for batch_norm_grad). The running statistics are OVERWRITE arguments: the
 *   caller passes INOUT where present, OUT where absent (0 elements: nothing to read).
 * batch_norm_grad(x, weight, mean, rstd, dy, dx, dweight, dbias, training): mean and rstd the
 *   forward's save_mean and save_rstd (required); with xhat = (x - mean) rstd and g = dy weight,
 *   means over the channel's M elements: training: dx = rstd (g - mean(g) - xhat mean(g xhat))
 *   (the statistics depend on x); not training: dx = g rstd (constant statistics). dweight[c] =
 *   sum of dy xhat, dbias[c] = sum of dy over the channel's M elements; either may have 0
 *   elements (not computed); M = 0 gives dweight = dbias = 0.
 * Every sum is taken in the statistics dtype or wider in a fixed order (the same bits on every
 * run of a framework) and rounded once. A channel holding NaN or an infinity gives NaN
 * throughout that channel in training (its statistics and y; dweight, dbias and dx likewise). */
#define PCY_NN_BATCH_NORM_ARGS(X)                                                                  \
  X(x, TENSOR, IN, OP, ANY)                                                                        \
  X(weight, TENSOR, IN, OP, ANY)                                                                   \
  X(bias, TENSOR, IN, OP, ANY)                                                                     \
  X(running_mean, TENSOR, OVERWRITE, ANY, ANY)                                                     \
  X(running_var, TENSOR, OVERWRITE, ANY, ANY)                                                      \
  X(y, TENSOR, OUT, OP, ANY)                                                                       \
  X(save_mean, TENSOR, OUT, ANY, ANY)                                                              \
  X(save_rstd, TENSOR, OUT, ANY, ANY)                                                              \
  X(training, INT, 0, OP, ANY) X(momentum, FLOAT, 0, OP, ANY) X(epsilon, FLOAT, 0, OP, ANY)
#define PCY_NN_BATCH_NORM_GRAD_ARGS(X)                                                             \
  X(x, TENSOR, IN, OP, ANY)                                                                        \
  X(weight, TENSOR, IN, OP, ANY)                                                                   \
  X(mean, TENSOR, IN, ANY, ANY) X(rstd, TENSOR, IN, ANY, ANY) X(dy, TENSOR, IN, OP, ANY)           \
      X(dx, TENSOR, OUT, OP, ANY) X(dweight, TENSOR, OUT, OP, ANY) X(dbias, TENSOR, OUT, OP, ANY)  \
          X(training, INT, 0, OP, ANY)

/* The statistics dtype (layer_norm's mean and rstd, rms_norm's rstd, cross_entropy's lse,
 * batch_norm's statistics; the compute dtype of embedding_grad's sums) of an op of dtype d: f64
 * for f64, f32 for f32, f16 and bf16. */
#define PCY_NN_STATISTICS_DTYPE(d) ((d) == PCY_DTYPE_F64 ? PCY_DTYPE_F64 : PCY_DTYPE_F32)

/* pcy_nn_<op>_schema and pcy_nn_<op>_args for every op. */
#define PCY_NN_DECLARE_ACTIVATION(a, ARGS, PW, GRAD, PWGRAD)                                       \
  PCY_DECLARE_OP_SCHEMA(pcy_nn, a, PCY_NN_EXTENSION, ARGS)                                         \
  PCY_DECLARE_OP_SCHEMA(pcy_nn, a##_pointwise, PCY_NN_EXTENSION, PW)                               \
  PCY_DECLARE_OP_SCHEMA(pcy_nn, a##_grad, PCY_NN_EXTENSION, GRAD)                                  \
  PCY_DECLARE_OP_SCHEMA(pcy_nn, a##_pointwise_grad, PCY_NN_EXTENSION, PWGRAD)
PCY_NN_DECLARE_ACTIVATION(sigmoid, PCY_NN_ACT_ARGS, PCY_NN_ACT_POINTWISE_ARGS, PCY_NN_ACT_GRAD_ARGS,
                          PCY_NN_ACT_POINTWISE_GRAD_ARGS)
PCY_NN_DECLARE_ACTIVATION(relu, PCY_NN_ACT_ARGS, PCY_NN_ACT_POINTWISE_ARGS, PCY_NN_ACT_GRAD_ARGS,
                          PCY_NN_ACT_POINTWISE_GRAD_ARGS)
PCY_NN_DECLARE_ACTIVATION(tanh, PCY_NN_ACT_ARGS, PCY_NN_ACT_POINTWISE_ARGS, PCY_NN_ACT_GRAD_ARGS,
                          PCY_NN_ACT_POINTWISE_GRAD_ARGS)
PCY_NN_DECLARE_ACTIVATION(elu, PCY_NN_ELU_ARGS, PCY_NN_ELU_POINTWISE_ARGS, PCY_NN_ELU_GRAD_ARGS,
                          PCY_NN_ELU_POINTWISE_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, softmax, PCY_NN_EXTENSION, PCY_NN_SOFTMAX_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, log_softmax, PCY_NN_EXTENSION, PCY_NN_SOFTMAX_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, softmax_grad, PCY_NN_EXTENSION, PCY_NN_SOFTMAX_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, log_softmax_grad, PCY_NN_EXTENSION, PCY_NN_SOFTMAX_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, convolution, PCY_NN_EXTENSION, PCY_NN_CONVOLUTION_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, convolution_grad_data, PCY_NN_EXTENSION,
                      PCY_NN_CONVOLUTION_GRAD_DATA_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, convolution_grad_filter, PCY_NN_EXTENSION,
                      PCY_NN_CONVOLUTION_GRAD_FILTER_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, convolution_bias, PCY_NN_EXTENSION, PCY_NN_CONVOLUTION_BIAS_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, convolution_grad_bias, PCY_NN_EXTENSION,
                      PCY_NN_CONVOLUTION_GRAD_BIAS_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, convolution_algorithm, PCY_NN_EXTENSION,
                      PCY_NN_CONVOLUTION_ALGORITHM_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, pooling_max, PCY_NN_EXTENSION, PCY_NN_POOLING_MAX_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, pooling_max_indexed, PCY_NN_EXTENSION,
                      PCY_NN_POOLING_MAX_INDEXED_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, pooling_max_grad, PCY_NN_EXTENSION, PCY_NN_POOLING_MAX_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, pooling_max_grad_indexed, PCY_NN_EXTENSION,
                      PCY_NN_POOLING_MAX_GRAD_INDEXED_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, pooling_avg, PCY_NN_EXTENSION, PCY_NN_POOLING_AVG_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, pooling_avg_grad, PCY_NN_EXTENSION, PCY_NN_POOLING_AVG_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, lrn, PCY_NN_EXTENSION, PCY_NN_LRN_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, lrn_grad, PCY_NN_EXTENSION, PCY_NN_LRN_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, dropout, PCY_NN_EXTENSION, PCY_NN_DROPOUT_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, dropout_grad, PCY_NN_EXTENSION, PCY_NN_DROPOUT_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, layer_norm, PCY_NN_EXTENSION, PCY_NN_LAYER_NORM_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, layer_norm_grad, PCY_NN_EXTENSION, PCY_NN_LAYER_NORM_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, rms_norm, PCY_NN_EXTENSION, PCY_NN_RMS_NORM_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, rms_norm_grad, PCY_NN_EXTENSION, PCY_NN_RMS_NORM_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, cross_entropy, PCY_NN_EXTENSION, PCY_NN_CROSS_ENTROPY_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, cross_entropy_grad, PCY_NN_EXTENSION, PCY_NN_CROSS_ENTROPY_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, embedding, PCY_NN_EXTENSION, PCY_NN_EMBEDDING_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, embedding_grad, PCY_NN_EXTENSION, PCY_NN_EMBEDDING_GRAD_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, batch_norm, PCY_NN_EXTENSION, PCY_NN_BATCH_NORM_ARGS)
PCY_DECLARE_OP_SCHEMA(pcy_nn, batch_norm_grad, PCY_NN_EXTENSION, PCY_NN_BATCH_NORM_GRAD_ARGS)

/* Every op of the extension, for tools that list them (parenchyma-info, the docs table). */
#define PCY_NN_SCHEMA_LIST                                                                         \
  &pcy_nn_sigmoid_schema, &pcy_nn_sigmoid_pointwise_schema, &pcy_nn_sigmoid_grad_schema,           \
      &pcy_nn_sigmoid_pointwise_grad_schema, &pcy_nn_relu_schema, &pcy_nn_relu_pointwise_schema,   \
      &pcy_nn_relu_grad_schema, &pcy_nn_relu_pointwise_grad_schema, &pcy_nn_tanh_schema,           \
      &pcy_nn_tanh_pointwise_schema, &pcy_nn_tanh_grad_schema, &pcy_nn_tanh_pointwise_grad_schema, \
      &pcy_nn_elu_schema, &pcy_nn_elu_pointwise_schema, &pcy_nn_elu_grad_schema,                   \
      &pcy_nn_elu_pointwise_grad_schema, &pcy_nn_softmax_schema, &pcy_nn_log_softmax_schema,       \
      &pcy_nn_softmax_grad_schema, &pcy_nn_log_softmax_grad_schema, &pcy_nn_convolution_schema,    \
      &pcy_nn_convolution_grad_data_schema, &pcy_nn_convolution_grad_filter_schema,                \
      &pcy_nn_convolution_bias_schema, &pcy_nn_convolution_grad_bias_schema,                       \
      &pcy_nn_convolution_algorithm_schema, &pcy_nn_pooling_max_schema,                            \
      &pcy_nn_pooling_max_indexed_schema, &pcy_nn_pooling_max_grad_schema,                         \
      &pcy_nn_pooling_max_grad_indexed_schema, &pcy_nn_pooling_avg_schema,                         \
      &pcy_nn_pooling_avg_grad_schema, &pcy_nn_lrn_schema, &pcy_nn_lrn_grad_schema,                \
      &pcy_nn_dropout_schema, &pcy_nn_dropout_grad_schema, &pcy_nn_layer_norm_schema,              \
      &pcy_nn_layer_norm_grad_schema, &pcy_nn_rms_norm_schema, &pcy_nn_rms_norm_grad_schema,       \
      &pcy_nn_cross_entropy_schema, &pcy_nn_cross_entropy_grad_schema, &pcy_nn_embedding_schema,   \
      &pcy_nn_embedding_grad_schema, &pcy_nn_batch_norm_schema, &pcy_nn_batch_norm_grad_schema
#ifdef __cplusplus
inline constexpr const pcy_op_schema* pcy_nn_schemas[] = {PCY_NN_SCHEMA_LIST};
#else
static const pcy_op_schema* const pcy_nn_schemas[] PCY_MAYBE_UNUSED = {PCY_NN_SCHEMA_LIST};
#endif
#define PCY_NN_OP_COUNT 46

#endif /* PCY_NN_H */
