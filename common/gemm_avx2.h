/*
 * common/gemm_avx2.h — the matrix kernel's AVX2 + FMA path: a 6 x 16 register tile
 * (matmul_tile, MR, NR).
 * Included by common/gemm.h, which chooses the path at compile time; on its own, empty
 * unless the build targets it.
 */
#ifndef PARTRAIN_GEMM_AVX2_H
#define PARTRAIN_GEMM_AVX2_H

#if defined(__AVX2__) && defined(__FMA__) && !defined(GEMM_LOOPS)
#include <immintrin.h>

#include "gemm_tile.h"

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
#endif

#endif
