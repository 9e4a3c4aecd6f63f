/*
 * common/owner.h — the owner-computes scheme's sums (header-only), used verbatim by
 * openmp --accum owner's threads and mpi/shm's ranks: the worker that owns a slice of the
 * parameters forms the slice's gradient sums itself, from every worker's activations and
 * dZ, as one chain over the workers' rows in order (serial's chain, serial's bits).
 */
#ifndef PARTRAIN_OWNER_H
#define PARTRAIN_OWNER_H

#include <string.h>

#include "gemm.h"

/* Rows of W per block of a slice's sums: the block (rows x out floats) stays in L1 (24 KB)
 * while every worker's rows are summed into it; a multiple of the kernel's 6-row tile. */
static inline int slice_block_rows(int out) {
    int r = 6144 / out / 6 * 6;
    return r < 6 ? 6 : r;
}

/* C (rows x out, leading dimension ldc) = e's epilogue of rows r0.. of a layer's weight
 * gradient summed over the ng workers' rows, act_u^T . dz_u (act_u: n[u] x in, dz_u: n[u] x
 * out), as ONE chain of fused multiply-adds per element: worker u's rows go on from the
 * sums of the workers before it (in tile, rows x out scratch). The workers' rows are the
 * batch's rows in order, so this is serial's chain over the whole batch: the same bits.
 * e: the update (C = W's rows) or the plain sums (C = a node sum). ng = 0 (a short batch
 * left these workers no rows): a zero gradient (W unchanged; the plain sums: zeros). */
static inline void slice_gradient_block(float *restrict C, long ldc, const epilogue *e, float *restrict tile, int rows, int out,
                                        long r0, int in, const float *const *act, const float *const *dz,
                                        const int *n, int ng) {
    if (ng == 0) {
        if (!e->accumulate)
            for (int r = 0; r < rows; r++) memset(C + (long)r * ldc, 0, sizeof(float) * (size_t)out);
        return;
    }
    for (int u = 0; u < ng - 1; u++)
        if (u == 0) matmul(rows, out, n[u], act[u] + r0, 1, in, dz[u], out, tile, out, &EPI_PLAIN);
        else matmul_continue(rows, out, n[u], act[u] + r0, 1, in, dz[u], out, tile, out);
    int last = ng - 1;
    if (last == 0) matmul(rows, out, n[0], act[0] + r0, 1, in, dz[0], out, C, ldc, e);
    else matmul_from(tile, out, rows, out, n[last], act[last] + r0, 1, in, dz[last], out, C, ldc, e);
}

/* s[j - j0], j in [j0, j1): the bias part, the column sums of every worker's dz_u over
 * its rows, worker after worker, as serial sums the batch's rows (from 0, in order): the
 * same bits. */
static inline void slice_bias_sums(float *restrict s, long j0, long j1, int out,
                                   const float *const *dz, const int *n, int ng) {
    for (long c0 = j0; c0 < j1; c0 += 16) {
        float part[16];
        int c = (int)(j1 - c0 < 16 ? j1 - c0 : 16);
        for (int j = 0; j < c; j++) part[j] = 0.0f;
        for (int u = 0; u < ng; u++)
            for (int i = 0; i < n[u]; i++)
                for (int j = 0; j < c; j++) part[j] += dz[u][(long)i * out + c0 + j];
        for (int j = 0; j < c; j++) s[c0 - j0 + j] = part[j];
    }
}

#endif
