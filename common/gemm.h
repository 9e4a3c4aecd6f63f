/*
 * common/gemm.h — the one matrix kernel of partrain's CPU trainers (header-only).
 *
 *   C[M x N] (=|+=) alpha * op(A) . B, then an epilogue applied while C is in registers.
 *
 * Every CPU trainer (serial, openmp, mpi, pipeline, hybrid, cnn) includes this header and
 * stays one translation unit, so the compiler specialises the kernel for each epilogue
 * at each call site exactly as if it were written there. There are three paths, chosen
 * at compile time: AVX-512 (6 x 64 register tile), AVX2 + FMA (6 x 16: x86-64-v3 CPUs
 * without AVX-512, and make PORTABLE=1) and plain loops the compiler vectorizes (any
 * other CPU, or -DGEMM_LOOPS). All three compute every element as the same chain of
 * fmaf() over K in order, followed by the same epilogue operations, so they give the
 * same bits (tests/test_gemm.c checks each against that chain). Design and
 * measurements: docs/kernel.md.
 *
 * op(A)[i][k] = A[i * a_row + k * a_col]: a row-major A is (a_row = lda, a_col = 1);
 * the transpose of a row-major K x M matrix is (a_row = 1, a_col = lda). B is row-major
 * K x N with leading dimension ldb. The epilogue:
 *   accumulate  C = C + alpha * acc (one fused multiply-add; the SGD update), else
 *               C = alpha * acc
 *   bias        + bias[j]                          (forward)
 *   act         relu / leaky-relu of the result    (forward)
 *   deriv       times act'(H[i][j]) where H has C's shape and ldc (backward)
 * Supported combinations: accumulate alone (update), bias and/or act (forward), deriv
 * alone (backward); matmul_continue() goes on with the sums already in C; matmul_from()
 * starts them from a scratch P and ends in the update or the plain sums (a K split between
 * calls: common/owner.h).
 *
 * It includes what it needs (<immintrin.h> for the vector paths, options.h for ACT_* and
 * LEAKY_RELU_SLOPE); the including file may define KC. Compile with -ffp-contract=off
 * or in ISO C mode (-std=c11), so that no product and sum are contracted behind the
 * kernel's back.
 */
#ifndef PARTRAIN_GEMM_H
#define PARTRAIN_GEMM_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#ifdef HAVE_CBLAS
#include <cblas.h>
#endif

enum { ACT_NONE = -1 };

typedef struct {
    float alpha;
    int accumulate;
    const float *bias;
    int act;                    /* ACT_NONE, ACT_RELU, ACT_LEAKY_RELU (sigmoid: separate pass) */
    const float *deriv;         /* activations whose derivative multiplies the result */
    int deriv_act;
    int shared_c;               /* C's lines may sit in other cores' caches (matmul_block) */
} epilogue;

static const epilogue EPI_PLAIN = { 1.0f, 0, NULL, ACT_NONE, NULL, ACT_NONE, 0 };
/* plain sums into a buffer that other cores read (a thread's gradient, summed by others) */
static const epilogue EPI_SHARED_SUMS = { 1.0f, 0, NULL, ACT_NONE, NULL, ACT_NONE, 1 };

/* The scalar definition of the epilogue; the vector paths compute the same values. */
static inline float epilogue_one(const epilogue *e, float acc, float c_old, int j, float h) {
    float v = e->accumulate ? fmaf(e->alpha, acc, c_old) : e->alpha * acc;
    if (e->bias) v += e->bias[j];
    if (e->act == ACT_RELU) v = v > 0.0f ? v : 0.0f;
    else if (e->act == ACT_LEAKY_RELU) v = v > 0.0f ? v : LEAKY_RELU_SLOPE * v;
    if (e->deriv) {
        if (e->deriv_act == ACT_RELU) v = h > 0.0f ? v : 0.0f;
        else if (e->deriv_act == ACT_LEAKY_RELU) v = h > 0.0f ? v : LEAKY_RELU_SLOPE * v;
        else if (e->deriv_act == ACT_SIGMOID) v = v * (h * (1.0f - h));
    }
    return v;
}

/* What the epilogue does, as a compile-time constant inside the kernel (a runtime test
 * per stored vector costs a third of the time of a K = 64 product). EPI_STORE is
 * C = alpha * acc alone (a thread's plain gradient); EPI_CONTINUE stores the raw sums
 * (a K block before the last, or matmul_continue). */
enum { EPI_FORWARD, EPI_BACKWARD, EPI_UPDATE, EPI_STORE, EPI_CONTINUE };

/* The vector paths' matmul_tile: one specialised micro_tile per row count (1..MR = 6), each
 * choosing its vector count in the path's TILE_CASE_NV */
#define TILE_SWITCH_MR switch (mr) { \
    case 6: TILE_CASE_NV(6) break; \
    case 5: TILE_CASE_NV(5) break; \
    case 4: TILE_CASE_NV(4) break; \
    case 3: TILE_CASE_NV(3) break; \
    case 2: TILE_CASE_NV(2) break; \
    default: TILE_CASE_NV(1) break; }

#if defined(__AVX512F__) && !defined(GEMM_LOOPS)
#define GEMM_PATH "avx512"
#define MR 6    /* rows of C per micro-tile */
#define NR 64   /* columns per micro-tile: four 16-float vectors; 6 x 4 = 24 zmm accumulators */
#define LARGE_C 262144  /* floats of C above which a small B's product runs by rows (matmul_block) */

static inline __attribute__((always_inline)) __m512
epilogue_vec(const int kind, const epilogue *e, __m512 acc, const float *c, const float *bias,
             const float *h, __mmask16 m) {
    if (kind == EPI_CONTINUE) return acc;   /* partial sums (a K block's): stored as they are */
    if (kind == EPI_UPDATE)                 /* C + alpha * acc, one rounding */
        return _mm512_fmadd_ps(_mm512_set1_ps(e->alpha), acc, _mm512_maskz_loadu_ps(m, c));
    __m512 v = _mm512_mul_ps(_mm512_set1_ps(e->alpha), acc);
    if (kind == EPI_STORE) return v;
    if (kind == EPI_FORWARD) {
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias));
        if (e->act == ACT_RELU) v = _mm512_max_ps(v, _mm512_setzero_ps());
        else if (e->act == ACT_LEAKY_RELU) {
            __mmask16 pos = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ);
            v = _mm512_mask_blend_ps(pos, _mm512_mul_ps(v, _mm512_set1_ps(LEAKY_RELU_SLOPE)), v);
        }
        return v;
    }
    __m512 hv = _mm512_maskz_loadu_ps(m, h);   /* EPI_BACKWARD: times act'(h) */
    if (e->deriv_act == ACT_SIGMOID)
        return _mm512_mul_ps(v, _mm512_mul_ps(hv, _mm512_sub_ps(_mm512_set1_ps(1.0f), hv)));
    __mmask16 pos = _mm512_cmp_ps_mask(hv, _mm512_setzero_ps(), _CMP_GT_OQ);
    __m512 neg = e->deriv_act == ACT_LEAKY_RELU ? _mm512_mul_ps(v, _mm512_set1_ps(LEAKY_RELU_SLOPE))
                                                : _mm512_setzero_ps();
    return _mm512_mask_blend_ps(pos, neg, v);
}

/* One mr x (16 nv) tile of C over the whole K: per k, nv vector loads of B, mr broadcasts
 * of A, mr * nv fused multiply-adds (24 FMAs for 10 loads in the full 6 x 64 tile, so
 * the FMA units, not the load ports, set the pace). mr and nv are compile-time
 * constants at every call site, so unused rows and vectors vanish. The accumulators
 * are named variables, not an array: GCC keeps an array of vectors in memory and
 * stores it on every k. Only the last vector of a row may be partial (mask mlast). */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static inline __attribute__((always_inline)) void
micro_tile(const int kind, const int mr, const int nv, int K, const float *restrict A, long a_row, long a_col,
           const float *restrict B, long ldb, float *restrict C, long ldc, __mmask16 mlast,
           const epilogue *e, int j, long h_off, const float *P, long ldp) {
#define DECLARE(r) __m512 c##r##_0 = _mm512_setzero_ps(), c##r##_1 = c##r##_0, c##r##_2 = c##r##_0, c##r##_3 = c##r##_0;
    TILE_ROWS(DECLARE)
#undef DECLARE
    if (P) {    /* the sums go on from the previous K block's partial sums P (one test per tile) */
#define INIT_VEC(r, v) if (nv > v) c##r##_##v = _mm512_maskz_loadu_ps(nv - 1 == v ? mlast : (__mmask16)0xFFFF, \
                                                                     P + r * ldp + 16 * v);
#define INIT_ROW(r) if (mr > r) { INIT_VEC(r, 0) INIT_VEC(r, 1) INIT_VEC(r, 2) INIT_VEC(r, 3) }
        TILE_ROWS(INIT_ROW)
#undef INIT_ROW
#undef INIT_VEC
    }
#define LOAD_B(v) (nv > v ? (nv - 1 == v ? _mm512_maskz_loadu_ps(mlast, bk + 16 * v) : _mm512_loadu_ps(bk + 16 * v)) \
                          : _mm512_setzero_ps())
    for (int k = 0; k < K; k++) {
        const float *bk = B + (long)k * ldb;
        __m512 b0 = LOAD_B(0), b1 = LOAD_B(1), b2 = LOAD_B(2), b3 = LOAD_B(3);
        const float *a = A + (long)k * a_col;
#define FMA_ROW(r) if (mr > r) { __m512 av = _mm512_set1_ps(a[r * a_row]); \
                                 c##r##_0 = _mm512_fmadd_ps(av, b0, c##r##_0); \
                                 if (nv > 1) c##r##_1 = _mm512_fmadd_ps(av, b1, c##r##_1); \
                                 if (nv > 2) c##r##_2 = _mm512_fmadd_ps(av, b2, c##r##_2); \
                                 if (nv > 3) c##r##_3 = _mm512_fmadd_ps(av, b3, c##r##_3); }
        TILE_ROWS(FMA_ROW)
#undef FMA_ROW
    }
#undef LOAD_B
#define STORE_VEC(r, v) if (nv > v) { \
        __mmask16 m = nv - 1 == v ? mlast : (__mmask16)0xFFFF; \
        float *c = C + r * ldc + 16 * v; \
        const float *bias = kind == EPI_FORWARD && e->bias ? e->bias + j + 16 * v : NULL; \
        const float *h = kind == EPI_BACKWARD ? e->deriv + h_off + r * ldc + 16 * v : NULL; \
        _mm512_mask_storeu_ps(c, m, epilogue_vec(kind, e, c##r##_##v, c, bias, h, m)); }
#define STORE_ROW(r) if (mr > r) { STORE_VEC(r, 0) STORE_VEC(r, 1) STORE_VEC(r, 2) STORE_VEC(r, 3) }
    TILE_ROWS(STORE_ROW)
#undef STORE_ROW
#undef STORE_VEC
}
#undef TILE_ROWS

#define TILE_CASE_NV(MRV) switch (nv) { \
    case 4: micro_tile(kind, MRV, 4, K, Ai, a_row, a_col, B + j, ldb, Cij, ldc, mlast, e, j, h_off, Pij, ldp); break; \
    case 3: micro_tile(kind, MRV, 3, K, Ai, a_row, a_col, B + j, ldb, Cij, ldc, mlast, e, j, h_off, Pij, ldp); break; \
    case 2: micro_tile(kind, MRV, 2, K, Ai, a_row, a_col, B + j, ldb, Cij, ldc, mlast, e, j, h_off, Pij, ldp); break; \
    default: micro_tile(kind, MRV, 1, K, Ai, a_row, a_col, B + j, ldb, Cij, ldc, mlast, e, j, h_off, Pij, ldp); break; }

/* The tile of C at row i, column j (at most MR x NR), its sums started from the same
 * tile of P (NULL: from zero). */
static inline __attribute__((always_inline)) void
matmul_tile(const int kind, int i, int j, int M, int N, int K, const float *A, long a_row, long a_col,
            const float *B, long ldb, float *C, long ldc, const epilogue *e, const float *P, long ldp) {
    int mr = M - i < MR ? M - i : MR;
    const float *Ai = A + (long)i * a_row;
    int nc = N - j < NR ? N - j : NR;
    int nv = (nc + 15) / 16;
    int tail = nc - 16 * (nv - 1);                       /* 1..16 columns */
    __mmask16 mlast = (__mmask16)(tail == 16 ? 0xFFFF : (1u << tail) - 1);
    float *Cij = C + (long)i * ldc + j;
    const float *Pij = P ? P + (long)i * ldp + j : NULL;
    long h_off = (long)i * ldc + j;
    TILE_SWITCH_MR
}
#undef TILE_CASE_NV
#elif defined(__AVX2__) && defined(__FMA__) && !defined(GEMM_LOOPS)
/* AVX2 + FMA path (x86-64-v3: Zen 2 and 3, Intel from Haswell): the AVX-512 path's design
 * on 8-float vectors, 16 registers. A 6 x 16 tile: 12 ymm accumulators, per k 2 loads
 * of B, 6 broadcasts of A and 12 FMAs (enough independent chains to keep two FMA pipes
 * busy). AVX2 has no mask registers: a partial last vector is loaded and stored through
 * an integer lane mask (vmaskmov), chosen per tile, so full tiles carry no masking. */
#define GEMM_PATH "avx2"
#define MR 6    /* rows of C per micro-tile */
#define NR 16   /* columns per micro-tile: two 8-float vectors; 6 x 2 = 12 ymm accumulators */
#define LARGE_C 131072  /* floats of C above which a small B's product runs by rows (matmul_block):
                         * half the AVX-512 path's, as these CPUs' L2 is (512 KB against 1 MB) */

/* A vector of 8 floats at p: the first lanes of m only when `masked` (a partial vector) */
#define LOAD8(masked, p, m) ((masked) ? _mm256_maskload_ps((p), (m)) : _mm256_loadu_ps(p))

static inline __attribute__((always_inline)) __m256
epilogue_vec(const int kind, const int masked, const epilogue *e, __m256 acc, const float *c, const float *bias,
             const float *h, __m256i m) {
    if (kind == EPI_CONTINUE) return acc;   /* partial sums (a K block's): stored as they are */
    if (kind == EPI_UPDATE)                 /* C + alpha * acc, one rounding */
        return _mm256_fmadd_ps(_mm256_set1_ps(e->alpha), acc, LOAD8(masked, c, m));
    __m256 v = _mm256_mul_ps(_mm256_set1_ps(e->alpha), acc);
    if (kind == EPI_STORE) return v;
    const __m256 zero = _mm256_setzero_ps();
    if (kind == EPI_FORWARD) {
        if (bias) v = _mm256_add_ps(v, LOAD8(masked, bias, m));
        if (e->act == ACT_RELU) v = _mm256_max_ps(v, zero);   /* v > 0 ? v : 0, as epilogue_one */
        else if (e->act == ACT_LEAKY_RELU)
            v = _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(LEAKY_RELU_SLOPE)), v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
        return v;
    }
    __m256 hv = LOAD8(masked, h, m);   /* EPI_BACKWARD: times act'(h) */
    if (e->deriv_act == ACT_SIGMOID)
        return _mm256_mul_ps(v, _mm256_mul_ps(hv, _mm256_sub_ps(_mm256_set1_ps(1.0f), hv)));
    __m256 neg = e->deriv_act == ACT_LEAKY_RELU ? _mm256_mul_ps(v, _mm256_set1_ps(LEAKY_RELU_SLOPE)) : zero;
    return _mm256_blendv_ps(neg, v, _mm256_cmp_ps(hv, zero, _CMP_GT_OQ));
}

/* One mr x (8 nv) tile of C over the whole K, as the AVX-512 path's micro_tile; with
 * `masked`, the last vector of each row covers only the lanes of mlast. */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static inline __attribute__((always_inline)) void
micro_tile(const int kind, const int mr, const int nv, const int masked, int K, const float *restrict A, long a_row,
           long a_col, const float *restrict B, long ldb, float *restrict C, long ldc, __m256i mlast,
           const epilogue *e, int j, long h_off, const float *P, long ldp) {
#define LAST_MASKED(v) (masked && nv - 1 == v)
#define DECLARE(r) __m256 c##r##_0 = _mm256_setzero_ps(), c##r##_1 = c##r##_0;
    TILE_ROWS(DECLARE)
#undef DECLARE
    if (P) {    /* the sums go on from the previous K block's partial sums P (one test per tile) */
#define INIT_VEC(r, v) if (nv > v) c##r##_##v = LOAD8(LAST_MASKED(v), P + r * ldp + 8 * v, mlast);
#define INIT_ROW(r) if (mr > r) { INIT_VEC(r, 0) INIT_VEC(r, 1) }
        TILE_ROWS(INIT_ROW)
#undef INIT_ROW
#undef INIT_VEC
    }
#define LOAD_B(v) (nv > v ? LOAD8(LAST_MASKED(v), bk + 8 * v, mlast) : _mm256_setzero_ps())
    /* unrolled: with 12 FMAs per k the loop's own address and counter updates take a
     * sizeable share of the 6-wide dispatch (docs/NOTES.md 45) */
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        const float *bk = B + (long)k * ldb;
        __m256 b0 = LOAD_B(0), b1 = LOAD_B(1);
        const float *a = A + (long)k * a_col;
#define FMA_ROW(r) if (mr > r) { __m256 av = _mm256_broadcast_ss(a + r * a_row); \
                                 c##r##_0 = _mm256_fmadd_ps(av, b0, c##r##_0); \
                                 if (nv > 1) c##r##_1 = _mm256_fmadd_ps(av, b1, c##r##_1); }
        TILE_ROWS(FMA_ROW)
#undef FMA_ROW
    }
#undef LOAD_B
#define STORE_VEC(r, v) if (nv > v) { \
        float *c = C + r * ldc + 8 * v; \
        const float *bias = kind == EPI_FORWARD && e->bias ? e->bias + j + 8 * v : NULL; \
        const float *h = kind == EPI_BACKWARD ? e->deriv + h_off + r * ldc + 8 * v : NULL; \
        __m256 out = epilogue_vec(kind, LAST_MASKED(v), e, c##r##_##v, c, bias, h, mlast); \
        if (LAST_MASKED(v)) _mm256_maskstore_ps(c, mlast, out); else _mm256_storeu_ps(c, out); }
#define STORE_ROW(r) if (mr > r) { STORE_VEC(r, 0) STORE_VEC(r, 1) }
    TILE_ROWS(STORE_ROW)
#undef STORE_ROW
#undef STORE_VEC
#undef LAST_MASKED
}
#undef TILE_ROWS

#define TILE_CALL(MRV, NV, MASKED) \
    micro_tile(kind, MRV, NV, MASKED, K, Ai, a_row, a_col, B + j, ldb, Cij, ldc, mlast, e, j, h_off, Pij, ldp)
#define TILE_CASE_NV(MRV) if (nv == 2) { if (masked) TILE_CALL(MRV, 2, 1); else TILE_CALL(MRV, 2, 0); } \
                          else { if (masked) TILE_CALL(MRV, 1, 1); else TILE_CALL(MRV, 1, 0); }

/* The tile of C at row i, column j (at most MR x NR), its sums started from the same
 * tile of P (NULL: from zero). */
static inline __attribute__((always_inline)) void
matmul_tile(const int kind, int i, int j, int M, int N, int K, const float *A, long a_row, long a_col,
            const float *B, long ldb, float *C, long ldc, const epilogue *e, const float *P, long ldp) {
    int mr = M - i < MR ? M - i : MR;
    const float *Ai = A + (long)i * a_row;
    int nc = N - j < NR ? N - j : NR;
    int nv = (nc + 7) / 8;
    int tail = nc - 8 * (nv - 1);                        /* 1..8 columns */
    int masked = tail != 8;
    __m256i mlast = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    float *Cij = C + (long)i * ldc + j;
    const float *Pij = P ? P + (long)i * ldp + j : NULL;
    long h_off = (long)i * ldc + j;
    TILE_SWITCH_MR
}
#undef TILE_CASE_NV
#undef TILE_CALL
#undef LOAD8
#else
/* Plain-loop path: the same tiling with plain loops the compiler vectorizes along j; the
 * same fmaf chain per element and the same epilogue (epilogue_one), so the same bits. */
#define GEMM_PATH "loops"
#define MR 4
#define NR 32
#define LARGE_C 262144
static inline void
matmul_tile(const int kind, int i, int j, int M, int N, int K, const float *A, long a_row, long a_col,
            const float *B, long ldb, float *C, long ldc, const epilogue *e, const float *P, long ldp) {
    int mr = M - i < MR ? M - i : MR;
    int nc = N - j < NR ? N - j : NR;
    float acc[MR][NR];
    memset(acc, 0, sizeof acc);
    if (P)
        for (int r = 0; r < mr; r++)
            for (int c = 0; c < nc; c++) acc[r][c] = P[(long)(i + r) * ldp + j + c];
    for (int k = 0; k < K; k++) {
        const float *restrict b = B + (long)k * ldb + j;
        for (int r = 0; r < mr; r++) {
            float a = A[(long)(i + r) * a_row + (long)k * a_col];
            for (int c = 0; c < nc; c++) acc[r][c] = fmaf(a, b[c], acc[r][c]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nc; c++) {
            long at = (long)(i + r) * ldc + j + c;
            if (kind == EPI_CONTINUE) C[at] = acc[r][c];
            else C[at] = epilogue_one(e, acc[r][c], C[at], j + c, kind == EPI_BACKWARD ? e->deriv[at] : 0.0f);
        }
}
#endif

/* Tile order: column panels of C outside, row blocks inside. One NR-column panel of B
 * (layer 1's W: 784 x 64 floats, 200 KB) then stays in L2 while every row block of A
 * streams past it. Except when all of B is small (at most 64 K floats: it stays in L2 in
 * any order) and C is large (over LARGE_C floats, about the L2): then row blocks outside,
 * so that C streams through the cache whole rows at a time. Each element is one sum over K in
 * the same order whatever the tile order: the order changes no bit. One K block of the
 * product: every tile, its sums started from P (NULL: from zero). */
static inline __attribute__((always_inline)) void
matmul_block(const int kind, int M, int N, int K, const float *A, long a_row, long a_col,
             const float *B, long ldb, float *C, long ldc, const epilogue *e, const float *P, long ldp) {
    int rows_outside = (long)K * N <= 65536 && (long)M * N > LARGE_C;
    int row_tiles = (M + MR - 1) / MR, tile = 0;
    for (int i = 0, j = 0; i < M && j < N; tile++) {   /* one call site: the tile code is inlined once */
        /* By rows, C is large (layer 1's weights or their gradient at a large image: every
         * element written once, and for the update read once, per step): the next row
         * block of C is asked for a block early, for writing. The tile touches C only in
         * its epilogue, after the sums, too late for the out-of-order core to fetch it. */
        if (rows_outside && j == 0 && i + MR < M)
            for (int r = i + MR; r < i + 2 * MR && r < M; r++)
                for (int c = 0; c < N; c += 16) __builtin_prefetch(C + (long)r * ldc + c, 1, 2);
        /* By column panels, the update and the plain sums: the tile two ahead is asked for,
         * for writing. Its lines may sit in another core's cache (W that the other workers
         * read in their forward, a gradient buffer they summed), and each write must first
         * take its line back, a round trip between cores; asked for ahead, the round trips
         * overlap the sums of the tiles in between (docs/NOTES.md 44). */
        else if (e->shared_c && !rows_outside && (kind == EPI_UPDATE || kind == EPI_STORE)) {
            int ahead = tile + 2, pi = ahead % row_tiles * MR, pj = ahead / row_tiles * NR;
            if (pj < N)
                for (int r = pi; r < pi + MR && r < M; r++)
                    for (int c = pj; c < pj + NR && c < N; c += 16) __builtin_prefetch(C + (long)r * ldc + c, 1, 2);
        }
        matmul_tile(kind, i, j, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e, P, ldp);
        if (rows_outside) { if ((j += NR) >= N) { j = 0; i += MR; } }
        else if ((i += MR) >= M) { i = 0; j += NR; }
    }
}

/* One tile of a K block before the last (a team that shares out the tiles: openmp's
 * loop): partial sums into P, started from `from` (NULL: from zero). */
static __attribute__((unused)) void
matmul_tile_partial(int i, int j, int M, int N, int K, const float *A, long a_row, long a_col,
                    const float *B, long ldb, float *P, long ldp, const float *from) {
    matmul_tile(EPI_CONTINUE, i, j, M, N, K, A, a_row, a_col, B, ldb, P, ldp, &EPI_PLAIN, from, ldp);
}

/* A K block before the last: partial sums, whatever the product (one copy of the code) */
static __attribute__((unused)) void
matmul_block_partial(int M, int N, int K, const float *A, long a_row, long a_col,
                     const float *B, long ldb, float *P, long ldp, const float *from) {
    matmul_block(EPI_CONTINUE, M, N, K, A, a_row, a_col, B, ldb, P, ldp, &EPI_PLAIN, from, ldp);
}

/* Blocking over K: a 64-column panel of B over more than KC rows (128 KB) may no longer
 * stay in L2 while the row blocks of A stream past it, so K goes in blocks of KC: each
 * tile of a block starts from the partial sums the block before stored, and only the
 * last block applies the epilogue. A stored and reloaded float is the same float, so
 * every element is still one chain of roundings over K in order: no bit changes. The
 * partial sums go to C itself, except for the update, whose epilogue reads C's old
 * values: there they go to a scratch of M x N floats (update_scratch). */
#ifndef KC
#define KC 512
#endif
/* The update's partial sums over its K blocks: one buffer per thread, grown to the
 * largest M x N asked for and kept, since the update runs every step (the system frees it
 * at exit). NULL when out of memory: the caller then runs one block over all of K. */
static inline float *update_scratch(size_t n) {
    static _Thread_local float *buf;
    static _Thread_local size_t cap;
    if (n > cap) {
        free(buf);
        buf = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
        cap = buf ? n : 0;
    }
    return buf;
}

/* All tiles over all of K, in the calling thread */
static inline __attribute__((always_inline)) void
matmul_tiles(const int kind, int M, int N, int K, const float *A, long a_row, long a_col,
             const float *B, long ldb, float *C, long ldc, const epilogue *e) {
    float *P = C;
    long ldp = ldc;
    if (K > KC && kind == EPI_UPDATE) {
        P = update_scratch((size_t)M * (size_t)N);
        ldp = N;
    }
    for (int k0 = 0;; k0 += KC) {   /* K <= KC, or no scratch: one block over all of K */
        int kc = K - k0 <= KC || !P ? K - k0 : KC;
        const float *Ak = A + (long)k0 * a_col, *Bk = B + (long)k0 * ldb;
        const float *from = k0 || kind == EPI_CONTINUE ? P : NULL;
        if (k0 + kc < K) { matmul_block_partial(M, N, kc, Ak, a_row, a_col, Bk, ldb, P, ldp, from); continue; }
        matmul_block(kind, M, N, kc, Ak, a_row, a_col, Bk, ldb, C, ldc, e, from, ldp);
        break;
    }
}

/* C += A . B as the continuation of the sums already in C: each element's chain of
 * fused multiply-adds goes on over this K (the CNN's dense gradient over a split K). */
static __attribute__((unused)) void
matmul_continue(int M, int N, int K, const float *A, long a_row, long a_col,
                const float *B, long ldb, float *C, long ldc) {
    matmul_tiles(EPI_CONTINUE, M, N, K, A, a_row, a_col, B, ldb, C, ldc, &EPI_PLAIN);
}

/* The product's sums started from P (M x N, leading dimension ldp) instead of zero, then
 * e's epilogue into C: the update (C + alpha * sums) or the plain sums (alpha = 1). One
 * chain of fused multiply-adds per element over a K that was split between calls (the
 * owner's sums over every worker's rows, common/owner.h, go on in P from one worker's rows
 * to the next). P is scratch: over more than KC rows of K, the blocks before the last go
 * on in it. */
static __attribute__((unused)) void
matmul_from(float *P, long ldp, int M, int N, int K, const float *A, long a_row, long a_col,
            const float *B, long ldb, float *C, long ldc, const epilogue *e) {
    int before = K > KC ? (K - 1) / KC * KC : 0;
    if (before) matmul_continue(M, N, before, A, a_row, a_col, B, ldb, P, ldp);
    A += (long)before * a_col;
    B += (long)before * ldb;
    if (e->accumulate) matmul_block(EPI_UPDATE, M, N, K - before, A, a_row, a_col, B, ldb, C, ldc, e, P, ldp);
    else if (!e->bias && e->act == ACT_NONE && !e->deriv)
        matmul_block(EPI_STORE, M, N, K - before, A, a_row, a_col, B, ldb, C, ldc, e, P, ldp);
    else { fprintf(stderr, "gemm: internal error: matmul_from takes the update or the plain sums\n"); exit(1); }
}

#ifdef HAVE_CBLAS
/* The library ceiling (serial --gemm blas): single-threaded cblas_sgemm, then the
 * epilogue as a second pass. Not bit-identical to the kernel: OpenBLAS sums in its own
 * order, chosen by CPU. */
static int gemm_use_blas __attribute__((unused));
static void matmul_blas(int M, int N, int K, const float *A, long a_row, long a_col,
                        const float *B, long ldb, float *C, long ldc, const epilogue *e) {
    int trans_a = a_row == 1 && a_col != 1;
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    long lda = trans_a ? a_col : a_row;
    if (e->accumulate && !e->bias && e->act == ACT_NONE && !e->deriv) {
        cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, M, N, K, e->alpha, A, (int)lda, B, (int)ldb, 1.0f, C, (int)ldc);
        return;
    }
    if (e->accumulate) { fprintf(stderr, "gemm: internal error: unsupported BLAS epilogue\n"); exit(1); }
    cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, M, N, K, e->alpha, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
    if (!e->bias && e->act == ACT_NONE && !e->deriv) return;
    epilogue rest = *e;
    rest.alpha = 1.0f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long at = (long)i * ldc + j;
            C[at] = epilogue_one(&rest, C[at], 0.0f, j, e->deriv ? e->deriv[at] : 0.0f);
        }
}
#endif

/* The product with its epilogue, all tiles in the calling thread; the kind of epilogue
 * becomes a compile-time constant of one specialised copy of the kernel. */
static __attribute__((unused)) void
matmul(int M, int N, int K, const float *A, long a_row, long a_col,
       const float *B, long ldb, float *C, long ldc, const epilogue *e) {
#ifdef HAVE_CBLAS
    if (gemm_use_blas) { matmul_blas(M, N, K, A, a_row, a_col, B, ldb, C, ldc, e); return; }
#endif
    if (e->accumulate) matmul_tiles(EPI_UPDATE, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
    else if (e->deriv) matmul_tiles(EPI_BACKWARD, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
    else if (!e->bias && e->act == ACT_NONE) matmul_tiles(EPI_STORE, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
    else matmul_tiles(EPI_FORWARD, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
}

/* dst[j * ld + i] = src[i * cols + j]: the transpose of a block of rows of src lands in
 * the same block of columns of dst (ld = rows of the whole matrix; ld = rows transposes
 * all of src). In 16 x 16 blocks so that both the reads and the strided writes stay
 * within a few cache lines (a plain loop spends more time here than the backward
 * product it prepares). */
static inline void transpose(const float *restrict src, int rows, int cols, float *restrict dst, long ld) {
    enum { BLOCK = 16 };
    for (int i0 = 0; i0 < rows; i0 += BLOCK)
        for (int j0 = 0; j0 < cols; j0 += BLOCK) {
            int i1 = i0 + BLOCK < rows ? i0 + BLOCK : rows, j1 = j0 + BLOCK < cols ? j0 + BLOCK : cols;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++) dst[(long)j * ld + i] = src[(long)i * cols + j];
        }
}

#endif
