/* parenchyma extension "array": elementwise expressions, reductions, scans, sorts and random
 * numbers over n-d arrays (views with strides and offsets, broadcasting), as data: the op schemas
 * every array bundle and the front-end parenchyma/array.hpp are built from, and the PROGRAM format
 * the front-end sends and every bundle runs (docs/array.md has the user's view).
 *
 * One op evaluates a whole expression: the front-end records a chain of elementwise operations
 * lazily and sends it as one program (a fused kernel on a GPU, a blocked vector loop on the CPU).
 *
 * ---- programs
 * ------------------------------------------------------------------------------------ A program is
 * an INT_ARRAY (int64 words): [0] PCY_ARRAY_PROGRAM_VERSION [1] R        the rank of the index
 * space (0 <= R <= PCY_ARRAY_MAX_RANK) [2] K        reduced dimensions: the LAST K of the R are
 * reduced (reduce: 0..R; scan: 1; eval: 0) [3] P        operands: 1 + the op's input tensors (the
 * output is operand 0, input j is operand j + 1); must equal the op's variant (eval_<P-1>, ...) [4]
 * M        instructions (1 <= M <= PCY_ARRAY_MAX_INSTRUCTIONS) then shape[R] extents >= 0 of the
 * index space then, for each operand p = 0..P-1:  offset, strides[R]   (in elements, any sign; the
 *                operand's element at index i = (i_0..i_R-1) is at offset + sum i_d strides[d]
 *                of its tensor; a broadcast dimension has stride 0). For the output of a reduce
 *                the K reduced strides must be 0; of a scan or sort they address its axis.
 *   then M instructions of 4 words each: {op | dtype << 8, a, b, c}.
 * A bundle refuses (PCY_ERR_INVALID_ARGUMENT, naming the word) a malformed program, and any
 * operand whose addressed elements (over the whole index space, extents > 0) fall outside its
 * tensor's elements. It never reads or writes outside a tensor.
 *
 * Instruction k defines register k (SSA); operands a, b, c name earlier registers (< k) unless the
 * op says otherwise; the words an instruction does not use are 0. Every register has the dtype
 * of its instruction. The program's value is
 * its LAST register: for eval, written to the output (its dtype must be the output's); for reduce
 * and scan, the value reduced (its dtype is the op's accumulation dtype: see below).
 * Arithmetic dtypes are BOOL, I8, I16, I32, I64, U8, F32, F64. F16 and BF16 registers come only
 * from LOAD and CAST and go only into CAST or the output: the front-end computes half types in
 * F32 with a CAST back after each operation (NumPy's per-operation rounding), so fused and
 * unfused results agree to the bit.
 *
 * Sources:
 *   LOAD a=p            operand p's element at the current index (dtype: the tensor's)
 *   CONST a=value       integers and BOOL: the value as int64; F32, F64: the IEEE binary64 bits
 *                       of the value (an F32 constant is rounded to nearest even)
 *   INDEX a=d           the current index along dimension d, as I64
 *   GATHER a=p b=reg c=d  operand p's element at the current index, with the index along
 *                       dimension d replaced by register b's value (I64) clipped to
 *                       [0, extent - 1]; extent = PCY_ARRAY_GATHER_EXTENT(word 0) >= 1, and
 *                       operand p's stride for d is the gathered axis' stride (take(), an
 *                       embedding lookup)
 * Unary (result dtype = operand dtype unless said):
 *   NEG ABS SIGN SQUARE (numbers: integers wrap: -INT_MIN = INT_MIN, abs(INT_MIN) = INT_MIN;
 *   sign: -1, 0, 1, NaN for NaN, +0 for -0), floating only: EXP EXPM1 LOG LOG1P LOG2 LOG10 SQRT
 *   RSQRT SIN COS TAN ASIN ACOS ATAN SINH COSH TANH ASINH ACOSH ATANH ERF FLOOR CEIL ROUND (half
 *   to even) TRUNC; NOT (integers: ~x; BOOL: logical not); ISNAN ISINF ISFINITE (floating ->
 *   BOOL).
 * Binary (both operands and the result of one dtype unless said):
 *   ADD SUB MUL (integers wrap), DIV (floating), FLOORDIV and REM (Python's: the remainder has
 *   the divisor's sign; floating as NumPy's npy_divmod; integers: x // 0 = 0, x % 0 = 0,
 *   INT_MIN // -1 = INT_MIN), POW (floating: C's pow; integers: exact with wrapping, a negative
 *   exponent gives 0 except for bases 1 and -1), MINIMUM MAXIMUM (NaN propagates; as NumPy's:
 *   maximum(a, b) = a >= b || isnan(a) ? a : b), ATAN2 (floating), AND OR XOR (integers and
 *   BOOL), SHL SHR (integers; SHR is arithmetic on signed types; a shift outside [0, bits) gives
 *   0, or -1 for SHR of a negative value), EQ NE LT LE GT GE (-> BOOL; IEEE: NaN compares
 *   unequal).
 *   COPYSIGN NEXTAFTER HYPOT LOGADDEXP (floating).
 * Other:
 *   WHERE a=cond (BOOL) b c   b where cond else c (b, c and the result of one dtype)
 *   STORE a=o b=reg           (evalm2_*, evalm3_*) writes register b into output operand o
 *                             (1 <= o < the op's outputs) at the current index; its dtype is
 *                             that output's; its value is register b's. Output 0 gets the
 *                             program's value as in eval.
 *   CAST a                    a converted to the instruction's dtype:
 *     floating -> floating: round to nearest even (overflow to +-inf), NaN stays NaN;
 *     floating -> integer: truncated toward zero, saturated to the type's range, NaN -> 0;
 *     integer -> floating: round to nearest even; integer -> integer: two's complement wrap;
 *     anything -> BOOL: x != 0 (NaN -> true); BOOL -> number: 0 or 1.
 *
 * ---- floating-point rules -----------------------------------------------------------------
 * ADD SUB MUL DIV SQRT, the casts, MINIMUM MAXIMUM, comparisons, FLOOR CEIL ROUND TRUNC, ABS NEG
 * SIGN SQUARE, FLOORDIV and REM are exact or correctly rounded on every bundle (no contraction
 * into fma, denormals kept where the device has them). The others are within the ulp bounds
 * docs/array.md lists per bundle. A bundle never reorders a program's operations.
 *
 * ---- reduce ---------------------------------------------------------------------------------
 * out[kept index] = REDUCE over the K reduced dimensions of the program's value. `kind`:
 *   SUM PROD        accumulate in the output dtype (value dtype == output dtype); floating sums
 *                   in a fixed blocked order (the same bits run to run on one device)
 *   MIN MAX         value dtype == output dtype; NaN propagates; an empty reduction is refused
 *   ARGMIN ARGMAX   output I64: the flat index (row-major over the K reduced dimensions) of the
 *                   first minimum / maximum; the first NaN wins; empty is refused
 *   ALL ANY         value and output BOOL (empty: true / false)
 *   MEAN            floating: SUM / N (empty: NaN)
 *   VAR STD         floating: sum (v - mean)^2 / (N - correction) (two passes or a stable
 *                   merge); N - correction <= 0 gives NaN; STD is its square root
 *   LOGSUMEXP       floating: m + log(sum exp(v - m)), m the maximum (all -inf: -inf; any
 *                   +inf: +inf; NaN propagates; empty: -inf)
 *   NORM2           floating: sqrt(sum v^2) (no scaling: huge values overflow as NumPy's)
 * Accumulation dtype: the value's (F32 accumulates in F32, as NumPy's pairwise sum does).
 *
 * ---- scan -----------------------------------------------------------------------------------
 * K = 1: out[i] = CUMSUM (kind PCY_ARRAY_SCAN_SUM) or CUMPROD (PROD) of the value along the last
 * dimension up to and including i; value dtype == output dtype.
 *
 * ---- sort -----------------------------------------------------------------------------------
 * K = 1: each row (the last dimension, at every kept index) of the value, ordered by the sort
 * kind (PCY_ARRAY_SORT_KINDS) and `descending` (0 or 1): SORT writes the ordered values (value
 * dtype == output dtype), ARGSORT their positions in the row (output I64). The value is BOOL or a
 * number (F16/BF16: sort a CAST to F32). The sort is stable, descending too: equal keys keep
 * their order in the row (the Array API's rule; array-api-strict's flip(sort(flip(x))), so a
 * descending sort is not an ascending one reversed). Keys: false < true; integers by value;
 * floating by value with -0.0 == +0.0 (equal: they keep their order) and every NaN equal to the
 * others and above +inf: NaNs come last ascending (NumPy's sort) and first descending. The
 * output never shares memory with an input.
 *
 * ---- random ---------------------------------------------------------------------------------
 * Counter-based: Philox-4x32-10 (Salmon et al., SC'11) with key (seed low 32 bits, seed high 32
 * bits) and counter (c0, c1, 0, 0) gives four 32-bit words w0..w3 per counter c (64 bits). The
 * offset counts counters. A draw of one word per element (UNIFORM of F32, F16 and BF16, NORMAL
 * of them, BERNOULLI) puts P = 4 elements on each counter, a draw of two words (UNIFORM and
 * NORMAL of F64, RANDINT, BITS) P = 2: element e (its row-major position in the view) takes
 * counter c = offset + floor(e / P) (64-bit wrap) and lane l = e mod P
 * (pcy_array_random_per_counter). A draw of n elements uses ceil(n / P) counters from its
 * offset; element e of a draw at offset o equals element e - P d of a draw at offset o + d, and
 * never depends on the view's size. The same (seed, offset) gives the same bits on every bundle
 * and device (pcy_array_random.h: pcy_rng_words and the transforms below, one source for every
 * bundle: C, C++, OpenCL C and CUDA):
 *   UNIFORM (floating)  a + (b - a) u, u = (w_l >> 8) 2^-24 (F32; F16 and BF16 from F32's u then
 *                       rounded) or ((w_2l >> 11) 2^32 + w_2l+1) 2^-53 (F64), in [0, 1)
 *   NORMAL (floating)   a + b z; lanes 2h and 2h + 1 are the Box-Muller pair of words
 *                       (w_2h, w_2h+1) (F32) or of all four words (F64, h = 0):
 *                       z = sqrt(-2 log u1) cos(2 pi u2) (even lane), sin(2 pi u2) (odd lane),
 *                       u1 = ((w_2h >> 8) + 1) 2^-24, u2 = (w_2h+1 >> 8) 2^-24 (F32), or
 *                       u1 = (((w0 >> 11) 2^32 + w1) + 1) 2^-53, u2 = ((w2 >> 11) 2^32 + w3)
 *                       2^-53 (F64); z is what pcy_rng_normal[_sin]_f32/_f64 compute (only
 *                       + - *, conversions and integer operations: the same bits everywhere;
 *                       within 4 ulp of the exact value; u1 = 1 gives a zero)
 *   BERNOULLI           1 when w_l < t, t = floor(a 2^32) (clipped to [0, 2^32]; a NaN gives 0),
 *                       else 0, in the output dtype (BOOL, integers, floating)
 *   RANDINT (integers)  a + floor(((w_2l+1 << 32 | w_2l) mod 2^64) / 2^64 (b - a)) via a 128-bit
 *                       product (Lemire's multiply, no rejection: the bias is below 2^-32 for
 *                       ranges below 2^32), a <= value < b; b - a taken mod 2^64 (unsigned)
 *   BITS (I64)          (w_2l+1 << 32 | w_2l) reinterpreted: 64 random bits
 *   PERMUTATION (I32, I64)  element e = pcy_rng_permute(seed, offset, N, e), N the view's
 *                       element count: a random permutation of [0, N) (a Feistel network with
 *                       Philox rounds and cycle walking; no sort), the same on every device
 * The affine steps a + (b - a) u and a + b z round each operation on its own (no fused
 * multiply-add; F16 and BF16 in F32, then rounded once), so they too give the same bits on every
 * bundle.
 */
#ifndef PCY_ARRAY_H
#define PCY_ARRAY_H

#include "../pcy_bundle.h"

#define PCY_ARRAY_EXTENSION "array"

#define PCY_ARRAY_PROGRAM_VERSION 1
#define PCY_ARRAY_MAX_RANK 8
#define PCY_ARRAY_MAX_INPUTS 8
#define PCY_ARRAY_MAX_INSTRUCTIONS 256
#define PCY_ARRAY_HEADER_WORDS 5
#define PCY_ARRAY_INSTRUCTION_WORDS 4

/* The instruction set: X(name, code, operands). `operands`: registers the instruction reads
 * (0 for sources, whose words are immediates). Codes are frozen: new ones are appended. */
#define PCY_ARRAY_OPS(X)                                                                           \
  X(LOAD, 1, 0)       /* operand a's element at the current index (the tensor's dtype) */          \
  X(CONST, 2, 0)      /* the value a (integers and bool as int64; floating as binary64 bits) */    \
  X(INDEX, 3, 0)      /* the current index along dimension a (i64) */                              \
  X(GATHER, 4, 0)     /* operand a, dimension c's index replaced by register b (clipped) */        \
  X(CAST, 5, 1)       /* a converted to the dtype (rounds, saturates, wraps: see above) */         \
  X(NEG, 6, 1)        /* -a (integers wrap) */                                                     \
  X(ABS, 7, 1)        /* |a| (abs(INT_MIN) = INT_MIN) */                                           \
  X(SIGN, 8, 1)       /* -1, 0 or 1 (NaN for NaN) */                                               \
  X(SQUARE, 9, 1)     /* a * a */                                                                  \
  X(EXP, 10, 1)       /* e^a */                                                                    \
  X(EXPM1, 11, 1)     /* e^a - 1 */                                                                \
  X(LOG, 12, 1)       /* ln a */                                                                   \
  X(LOG1P, 13, 1)     /* ln(1 + a) */                                                              \
  X(LOG2, 14, 1)      /* log2 a */                                                                 \
  X(LOG10, 15, 1)     /* log10 a */                                                                \
  X(SQRT, 16, 1)      /* sqrt a (correctly rounded) */                                             \
  X(RSQRT, 17, 1)     /* 1 / sqrt a */                                                             \
  X(SIN, 18, 1)       /* sin a */                                                                  \
  X(COS, 19, 1)       /* cos a */                                                                  \
  X(TAN, 20, 1)       /* tan a */                                                                  \
  X(ASIN, 21, 1)      /* asin a */                                                                 \
  X(ACOS, 22, 1)      /* acos a */                                                                 \
  X(ATAN, 23, 1)      /* atan a */                                                                 \
  X(SINH, 24, 1)      /* sinh a */                                                                 \
  X(COSH, 25, 1)      /* cosh a */                                                                 \
  X(TANH, 26, 1)      /* tanh a */                                                                 \
  X(ASINH, 27, 1)     /* asinh a */                                                                \
  X(ACOSH, 28, 1)     /* acosh a */                                                                \
  X(ATANH, 29, 1)     /* atanh a */                                                                \
  X(ERF, 30, 1)       /* erf a */                                                                  \
  X(FLOOR, 31, 1)     /* floor a */                                                                \
  X(CEIL, 32, 1)      /* ceil a */                                                                 \
  X(ROUND, 33, 1)     /* a rounded half to even */                                                 \
  X(TRUNC, 34, 1)     /* a rounded toward zero */                                                  \
  X(NOT, 35, 1)       /* ~a (integers), !a (bool) */                                               \
  X(ISNAN, 36, 1)     /* a is NaN (bool) */                                                        \
  X(ISINF, 37, 1)     /* a is +-inf (bool) */                                                      \
  X(ISFINITE, 38, 1)  /* a is finite (bool) */                                                     \
  X(ADD, 39, 2)       /* a + b (integers wrap) */                                                  \
  X(SUB, 40, 2)       /* a - b (integers wrap) */                                                  \
  X(MUL, 41, 2)       /* a * b (integers wrap) */                                                  \
  X(DIV, 42, 2)       /* a / b (floating) */                                                       \
  X(FLOORDIV, 43, 2)  /* floor(a / b) (x // 0 = 0 for integers) */                                 \
  X(REM, 44, 2)       /* a - b floor(a / b), the divisor's sign (x % 0 = 0 for integers) */        \
  X(POW, 45, 2)       /* a ^ b */                                                                  \
  X(MINIMUM, 46, 2)   /* the smaller; NaN propagates */                                            \
  X(MAXIMUM, 47, 2)   /* the larger; NaN propagates */                                             \
  X(ATAN2, 48, 2)     /* atan2(a, b) */                                                            \
  X(AND, 49, 2)       /* a & b */                                                                  \
  X(OR, 50, 2)        /* a | b */                                                                  \
  X(XOR, 51, 2)       /* a ^ b */                                                                  \
  X(SHL, 52, 2)       /* a << b (0 outside [0, bits)) */                                           \
  X(SHR, 53, 2)       /* a >> b, arithmetic (sign fill outside [0, bits)) */                       \
  X(EQ, 54, 2)        /* a == b (bool) */                                                          \
  X(NE, 55, 2)        /* a != b (bool) */                                                          \
  X(LT, 56, 2)        /* a < b (bool) */                                                           \
  X(LE, 57, 2)        /* a <= b (bool) */                                                          \
  X(GT, 58, 2)        /* a > b (bool) */                                                           \
  X(GE, 59, 2)        /* a >= b (bool) */                                                          \
  X(COPYSIGN, 60, 2)  /* |a| with b's sign */                                                      \
  X(NEXTAFTER, 61, 2) /* the next value after a toward b */                                        \
  X(HYPOT, 62, 2)     /* sqrt(a^2 + b^2) without overflow */                                       \
  X(LOGADDEXP, 63, 2) /* ln(e^a + e^b) */                                                          \
  X(WHERE, 64, 3)     /* b where a (bool) else c */                                                \
  X(STORE, 65, 0)     /* writes register b into output operand a (multi-output evals); value: b */

#define PCY_ARRAY_OP_ENUM(name, code, operands) PCY_ARRAY_OP_##name = code,
typedef enum pcy_array_op { PCY_ARRAY_OPS(PCY_ARRAY_OP_ENUM) PCY_ARRAY_OP_END } pcy_array_op;
#undef PCY_ARRAY_OP_ENUM

/* An instruction's first word: op | dtype << 8; GATHER also carries the gathered axis' extent
 * from bit 16 (extent < 2^47). */
#define PCY_ARRAY_WORD(op, dtype) ((int64_t)(op) | ((int64_t)(dtype) << 8))
#define PCY_ARRAY_WORD_OP(w) ((int)((w)&0xFF))
#define PCY_ARRAY_WORD_DTYPE(w) ((int)(((w) >> 8) & 0xFF))
#define PCY_ARRAY_GATHER_EXTENT(w) ((int64_t)((uint64_t)(w) >> 16))

/* reduce kinds */
#define PCY_ARRAY_REDUCE_KINDS(X)                                                                  \
  X(SUM, 1)        /* the sum (fixed blocked order) */                                             \
  X(PROD, 2)       /* the product */                                                               \
  X(MIN, 3)        /* the minimum (NaN propagates) */                                              \
  X(MAX, 4)        /* the maximum (NaN propagates) */                                              \
  X(ARGMIN, 5)     /* the flat index of the first minimum (i64) */                                 \
  X(ARGMAX, 6)     /* the flat index of the first maximum (i64) */                                 \
  X(ALL, 7)        /* every value true (bool) */                                                   \
  X(ANY, 8)        /* some value true (bool) */                                                    \
  X(MEAN, 9)       /* sum / N */                                                                   \
  X(VAR, 10)       /* sum (v - mean)^2 / (N - correction) */                                       \
  X(STD, 11)       /* sqrt of VAR */                                                               \
  X(LOGSUMEXP, 12) /* m + ln sum e^(v - m), m the maximum */                                       \
  X(NORM2, 13)     /* sqrt(sum v^2) */
#define PCY_ARRAY_REDUCE_ENUM(name, code) PCY_ARRAY_REDUCE_##name = code,
typedef enum pcy_array_reduce_kind {
  PCY_ARRAY_REDUCE_KINDS(PCY_ARRAY_REDUCE_ENUM) PCY_ARRAY_REDUCE_END
} pcy_array_reduce_kind;
#undef PCY_ARRAY_REDUCE_ENUM

#define PCY_ARRAY_SCAN_SUM 1
#define PCY_ARRAY_SCAN_PROD 2

/* sort kinds */
#define PCY_ARRAY_SORT_KINDS(X)                                                                    \
  X(SORT, 0)    /* the row's values in order (the value's dtype) */                                \
  X(ARGSORT, 1) /* the positions in the row of the values in order (i64) */
#define PCY_ARRAY_SORT_ENUM(name, code) PCY_ARRAY_SORT_##name = code,
typedef enum pcy_array_sort_kind {
  PCY_ARRAY_SORT_KINDS(PCY_ARRAY_SORT_ENUM) PCY_ARRAY_SORT_END
} pcy_array_sort_kind;
#undef PCY_ARRAY_SORT_ENUM

/* random distributions */
#define PCY_ARRAY_RANDOM_UNIFORM 1
#define PCY_ARRAY_RANDOM_NORMAL 2
#define PCY_ARRAY_RANDOM_BERNOULLI 3
#define PCY_ARRAY_RANDOM_RANDINT 4
#define PCY_ARRAY_RANDOM_BITS 5
#define PCY_ARRAY_RANDOM_PERMUTATION 6

/* Elements per counter of a draw (the stream layout above); 0 for PERMUTATION, which keys its
 * own network with the offset. */
static inline int pcy_array_random_per_counter(int distribution, int dtype) {
  switch (distribution) {
  case PCY_ARRAY_RANDOM_UNIFORM:
  case PCY_ARRAY_RANDOM_NORMAL: return dtype == PCY_DTYPE_F64 ? 2 : 4;
  case PCY_ARRAY_RANDOM_BERNOULLI: return 4;
  case PCY_ARRAY_RANDOM_RANDINT:
  case PCY_ARRAY_RANDOM_BITS: return 2;
  default: return 0;
  }
}

/* ---- the ops ----------------------------------------------------------------------------------
 * eval_<n> (n = 0..8 input tensors): out = the program's value at every index. The op's dtype is
 * the output's. The output may be an input only with the same offset and strides (an in-place
 * update reads each element before writing it); any other overlap is refused.
 * reduce_<n> (n = 1..4): out = the reduction (kind above, correction for VAR/STD); the output
 * never overlaps an input.
 * evalm2_<n>, evalm3_<n> (n = 0..6 input tensors): eval with 2 or 3 outputs (out, out1, out2:
 * operands 0..k-1; the inputs follow): the program's value goes to out, STORE instructions write
 * the others — several results of one pass, such as an optimiser's state and parameter. Each
 * output may be an input through the same view only; outputs never overlap each other.
 * scan_<n> (n = 1..2): out = the scan (kind: PCY_ARRAY_SCAN_*).
 * sort_1: out = the sort of each row (kind: PCY_ARRAY_SORT_*; descending: 0 or 1); stable.
 * random: out (through the view: INT_ARRAY {R, shape[R], offset, strides[R]}) = the
 * distribution's draw; a, b its parameters. */
#define PCY_ARRAY_IN(X, k) X(in##k, TENSOR, IN, ANY, ANY)
#define PCY_ARRAY_INPUTS_0(X)
#define PCY_ARRAY_INPUTS_1(X) PCY_ARRAY_IN(X, 0)
#define PCY_ARRAY_INPUTS_2(X) PCY_ARRAY_INPUTS_1(X) PCY_ARRAY_IN(X, 1)
#define PCY_ARRAY_INPUTS_3(X) PCY_ARRAY_INPUTS_2(X) PCY_ARRAY_IN(X, 2)
#define PCY_ARRAY_INPUTS_4(X) PCY_ARRAY_INPUTS_3(X) PCY_ARRAY_IN(X, 3)
#define PCY_ARRAY_INPUTS_5(X) PCY_ARRAY_INPUTS_4(X) PCY_ARRAY_IN(X, 4)
#define PCY_ARRAY_INPUTS_6(X) PCY_ARRAY_INPUTS_5(X) PCY_ARRAY_IN(X, 5)
#define PCY_ARRAY_INPUTS_7(X) PCY_ARRAY_INPUTS_6(X) PCY_ARRAY_IN(X, 6)
#define PCY_ARRAY_INPUTS_8(X) PCY_ARRAY_INPUTS_7(X) PCY_ARRAY_IN(X, 7)

#define PCY_ARRAY_DEFINE_EVAL(X, n)                                                                \
  X(program, INT_ARRAY, 0, OP, ANY) X(out, TENSOR, OVERWRITE, OP, ANY) PCY_ARRAY_INPUTS_##n(X)
#define PCY_ARRAY_EVAL_0_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 0)
#define PCY_ARRAY_EVAL_1_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 1)
#define PCY_ARRAY_EVAL_2_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 2)
#define PCY_ARRAY_EVAL_3_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 3)
#define PCY_ARRAY_EVAL_4_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 4)
#define PCY_ARRAY_EVAL_5_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 5)
#define PCY_ARRAY_EVAL_6_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 6)
#define PCY_ARRAY_EVAL_7_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 7)
#define PCY_ARRAY_EVAL_8_ARGS(X) PCY_ARRAY_DEFINE_EVAL(X, 8)

#define PCY_ARRAY_DEFINE_EVALM2(X, n)                                                              \
  X(program, INT_ARRAY, 0, OP, ANY)                                                                \
  X(out, TENSOR, OVERWRITE, OP, ANY) X(out1, TENSOR, OVERWRITE, ANY, ANY) PCY_ARRAY_INPUTS_##n(X)
#define PCY_ARRAY_DEFINE_EVALM3(X, n)                                                              \
  X(program, INT_ARRAY, 0, OP, ANY)                                                                \
  X(out, TENSOR, OVERWRITE, OP, ANY)                                                               \
  X(out1, TENSOR, OVERWRITE, ANY, ANY) X(out2, TENSOR, OVERWRITE, ANY, ANY) PCY_ARRAY_INPUTS_##n(X)
#define PCY_ARRAY_EVALM2_0_ARGS(X) PCY_ARRAY_DEFINE_EVALM2(X, 0)
#define PCY_ARRAY_EVALM2_1_ARGS(X) PCY_ARRAY_DEFINE_EVALM2(X, 1)
#define PCY_ARRAY_EVALM2_2_ARGS(X) PCY_ARRAY_DEFINE_EVALM2(X, 2)
#define PCY_ARRAY_EVALM2_3_ARGS(X) PCY_ARRAY_DEFINE_EVALM2(X, 3)
#define PCY_ARRAY_EVALM2_4_ARGS(X) PCY_ARRAY_DEFINE_EVALM2(X, 4)
#define PCY_ARRAY_EVALM2_5_ARGS(X) PCY_ARRAY_DEFINE_EVALM2(X, 5)
#define PCY_ARRAY_EVALM2_6_ARGS(X) PCY_ARRAY_DEFINE_EVALM2(X, 6)
#define PCY_ARRAY_EVALM3_0_ARGS(X) PCY_ARRAY_DEFINE_EVALM3(X, 0)
#define PCY_ARRAY_EVALM3_1_ARGS(X) PCY_ARRAY_DEFINE_EVALM3(X, 1)
#define PCY_ARRAY_EVALM3_2_ARGS(X) PCY_ARRAY_DEFINE_EVALM3(X, 2)
#define PCY_ARRAY_EVALM3_3_ARGS(X) PCY_ARRAY_DEFINE_EVALM3(X, 3)
#define PCY_ARRAY_EVALM3_4_ARGS(X) PCY_ARRAY_DEFINE_EVALM3(X, 4)
#define PCY_ARRAY_EVALM3_5_ARGS(X) PCY_ARRAY_DEFINE_EVALM3(X, 5)
#define PCY_ARRAY_EVALM3_6_ARGS(X) PCY_ARRAY_DEFINE_EVALM3(X, 6)

#define PCY_ARRAY_DEFINE_REDUCE(X, n)                                                              \
  X(program, INT_ARRAY, 0, OP, ANY)                                                                \
  X(out, TENSOR, OVERWRITE, OP, ANY)                                                               \
  X(kind, INT, 0, OP, ANY) X(correction, FLOAT, 0, OP, ANY) PCY_ARRAY_INPUTS_##n(X)
#define PCY_ARRAY_REDUCE_1_ARGS(X) PCY_ARRAY_DEFINE_REDUCE(X, 1)
#define PCY_ARRAY_REDUCE_2_ARGS(X) PCY_ARRAY_DEFINE_REDUCE(X, 2)
#define PCY_ARRAY_REDUCE_3_ARGS(X) PCY_ARRAY_DEFINE_REDUCE(X, 3)
#define PCY_ARRAY_REDUCE_4_ARGS(X) PCY_ARRAY_DEFINE_REDUCE(X, 4)

#define PCY_ARRAY_DEFINE_SCAN(X, n)                                                                \
  X(program, INT_ARRAY, 0, OP, ANY)                                                                \
  X(out, TENSOR, OVERWRITE, OP, ANY) X(kind, INT, 0, OP, ANY) PCY_ARRAY_INPUTS_##n(X)
#define PCY_ARRAY_SCAN_1_ARGS(X) PCY_ARRAY_DEFINE_SCAN(X, 1)
#define PCY_ARRAY_SCAN_2_ARGS(X) PCY_ARRAY_DEFINE_SCAN(X, 2)

#define PCY_ARRAY_SORT_1_ARGS(X)                                                                   \
  X(program, INT_ARRAY, 0, OP, ANY)                                                                \
  X(out, TENSOR, OVERWRITE, OP, ANY)                                                               \
  X(kind, INT, 0, OP, ANY) X(descending, INT, 0, OP, ANY) PCY_ARRAY_INPUTS_1(X)

#define PCY_ARRAY_RANDOM_ARGS(X)                                                                   \
  X(out, TENSOR, OVERWRITE, OP, ANY)                                                               \
  X(view, INT_ARRAY, 0, OP, ANY)                                                                   \
  X(distribution, INT, 0, OP, ANY)                                                                 \
  X(seed, INT, 0, OP, ANY) X(offset, INT, 0, OP, ANY) X(a, FLOAT, 0, OP, ANY)                      \
      X(b, FLOAT, 0, OP, ANY)

/* The variants, for code that lists them: X(op name, schema args macro, input count). */
#define PCY_ARRAY_VARIANTS(X)                                                                      \
  X(eval_0, PCY_ARRAY_EVAL_0_ARGS, 0)                                                              \
  X(eval_1, PCY_ARRAY_EVAL_1_ARGS, 1)                                                              \
  X(eval_2, PCY_ARRAY_EVAL_2_ARGS, 2)                                                              \
  X(eval_3, PCY_ARRAY_EVAL_3_ARGS, 3)                                                              \
  X(eval_4, PCY_ARRAY_EVAL_4_ARGS, 4)                                                              \
  X(eval_5, PCY_ARRAY_EVAL_5_ARGS, 5)                                                              \
  X(eval_6, PCY_ARRAY_EVAL_6_ARGS, 6)                                                              \
  X(eval_7, PCY_ARRAY_EVAL_7_ARGS, 7)                                                              \
  X(eval_8, PCY_ARRAY_EVAL_8_ARGS, 8)                                                              \
  X(reduce_1, PCY_ARRAY_REDUCE_1_ARGS, 1)                                                          \
  X(reduce_2, PCY_ARRAY_REDUCE_2_ARGS, 2)                                                          \
  X(reduce_3, PCY_ARRAY_REDUCE_3_ARGS, 3)                                                          \
  X(reduce_4, PCY_ARRAY_REDUCE_4_ARGS, 4)                                                          \
  X(scan_1, PCY_ARRAY_SCAN_1_ARGS, 1)                                                              \
  X(scan_2, PCY_ARRAY_SCAN_2_ARGS, 2)                                                              \
  X(random, PCY_ARRAY_RANDOM_ARGS, 0)                                                              \
  X(evalm2_0, PCY_ARRAY_EVALM2_0_ARGS, 0)                                                          \
  X(evalm2_1, PCY_ARRAY_EVALM2_1_ARGS, 1)                                                          \
  X(evalm2_2, PCY_ARRAY_EVALM2_2_ARGS, 2)                                                          \
  X(evalm2_3, PCY_ARRAY_EVALM2_3_ARGS, 3)                                                          \
  X(evalm2_4, PCY_ARRAY_EVALM2_4_ARGS, 4)                                                          \
  X(evalm2_5, PCY_ARRAY_EVALM2_5_ARGS, 5)                                                          \
  X(evalm2_6, PCY_ARRAY_EVALM2_6_ARGS, 6)                                                          \
  X(evalm3_0, PCY_ARRAY_EVALM3_0_ARGS, 0)                                                          \
  X(evalm3_1, PCY_ARRAY_EVALM3_1_ARGS, 1)                                                          \
  X(evalm3_2, PCY_ARRAY_EVALM3_2_ARGS, 2)                                                          \
  X(evalm3_3, PCY_ARRAY_EVALM3_3_ARGS, 3)                                                          \
  X(evalm3_4, PCY_ARRAY_EVALM3_4_ARGS, 4)                                                          \
  X(evalm3_5, PCY_ARRAY_EVALM3_5_ARGS, 5)                                                          \
  X(evalm3_6, PCY_ARRAY_EVALM3_6_ARGS, 6)                                                          \
  X(sort_1, PCY_ARRAY_SORT_1_ARGS, 1)

#define PCY_ARRAY_DECLARE(op, ARGS, n)                                                             \
  PCY_DECLARE_OP_SCHEMA(pcy_array, op, PCY_ARRAY_EXTENSION, ARGS)
PCY_ARRAY_VARIANTS(PCY_ARRAY_DECLARE)
#undef PCY_ARRAY_DECLARE

#endif /* PCY_ARRAY_H */
