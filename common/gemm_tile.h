/*
 * common/gemm_tile.h — what every path of the matrix kernel (common/gemm.h) shares: the
 * epilogue applied while C is in registers (its parameters, its scalar definition
 * epilogue_one, its compile-time kinds) and the dispatch of a tile on its row count.
 * Included by common/gemm.h and by the vector paths, common/gemm_avx512.h and gemm_avx2.h.
 */
#ifndef PARTRAIN_GEMM_TILE_H
#define PARTRAIN_GEMM_TILE_H

#include <math.h>
#include <stddef.h>

#include "options.h"

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

#endif
