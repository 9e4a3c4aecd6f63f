/*
 * common/owner.h — the owner-computes scheme's sums (header-only), used verbatim by
 * openmp --accum owner's threads and mpi/shm's ranks: the worker that owns a slice of the
 * parameters forms the slice's gradient sums itself, from every worker's activations and
 * dZ, in worker order (the bits of common/maths.h's sum_update()).
 */
#ifndef PARTRAIN_OWNER_H
#define PARTRAIN_OWNER_H

#include <string.h>

#include "gemm.h"

/* The owner-computes form of maths.h's fixed-order sums (mpi/shm, openmp --accum owner): the
 * worker that owns a slice of the parameters forms the slice's gradient sums itself from
 * every worker's activations and dZ, instead of reading every worker's whole gradient.
 * Rows of W per block: a block of the sums (rows x out floats) stays in L1 (24 KB) while
 * every worker's part is added to it; a multiple of the kernel's 6-row tile. */
static inline int slice_block_rows(int out) {
    int r = 6144 / out / 6 * 6;
    return r < 6 ? 6 : r;
}

static const epilogue EPI_ADD = { 1.0f, 1, NULL, ACT_NONE, NULL, ACT_NONE };   /* C = fmaf(1, acc, C) = C + acc */

/* tile (rows x out) = rows r0.. of a layer's weight gradient (W: in x out) summed over
 * the ng workers: worker u's sums act_u^T . dz_u over its own n[u] rows (act_u: n[u] x
 * in, dz_u: n[u] x out) by the kernel's chain, as in its own plain gradient, then added
 * in worker order, as sum_update() and sum_in_order() add the workers' buffers: the same
 * bits. ng = 0 (a short batch left these workers no rows): zeros. */
static inline void slice_gradient_block(float *restrict tile, int rows, int out, long r0, int in,
                                        const float *const *act, const float *const *dz, const int *n, int ng) {
    if (ng == 0) { memset(tile, 0, sizeof(float) * (size_t)rows * (size_t)out); return; }
    for (int u = 0; u < ng; u++)
        matmul(rows, out, n[u], act[u] + r0, 1, in, dz[u], out, tile, out, u ? &EPI_ADD : &EPI_PLAIN);
}

/* s[j - j0], j in [j0, j1): the bias part, worker u's column sums of dz_u (from 0, its
 * rows in order, as its own gradient's) added in worker order. */
static inline void slice_bias_sums(float *restrict s, long j0, long j1, int out,
                                   const float *const *dz, const int *n, int ng) {
    for (long j = j0; j < j1; j++) s[j - j0] = 0.0f;
    for (int u = 0; u < ng; u++)
        for (long c0 = j0; c0 < j1; c0 += 16) {
            float part[16];
            int c = (int)(j1 - c0 < 16 ? j1 - c0 : 16);
            for (int j = 0; j < c; j++) part[j] = 0.0f;
            for (int i = 0; i < n[u]; i++)
                for (int j = 0; j < c; j++) part[j] += dz[u][(long)i * out + c0 + j];
            for (int j = 0; j < c; j++) s[c0 - j0 + j] = u ? s[c0 - j0 + j] + part[j] : part[j];
        }
}

#endif
