/*
 * common/gemm_avx512.h — the matrix kernel's AVX-512 path: a 6 x 64 register tile
 * (matmul_tile, MR, NR).
 * Included by common/gemm.h, which chooses the path at compile time; on its own, empty
 * unless the build targets it.
 */
#ifndef PARTRAIN_GEMM_AVX512_H
#define PARTRAIN_GEMM_AVX512_H

#if defined(__AVX512F__) && !defined(GEMM_LOOPS)
#include <immintrin.h>

#include "gemm_tile.h"

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
#endif

#endif
