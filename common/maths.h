/*
 * common/maths.h — the maths of an MLP that every trainer has verbatim (header-only):
 * aligned buffers, the sigmoid pass, softmax + cross-entropy, argmax, the split of n
 * items over workers, the fixed-order sums of gradient buffers, the model's FLOP count
 * and bytes. Strategy code (how a step is shared) never lives here: the owner-computes
 * sums are common/owner.h; data loading is common/data.h.
 */
#ifndef PARTRAIN_MATHS_H
#define PARTRAIN_MATHS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"       /* IDX_CLASSES */
#include "options.h"

#ifdef __cplusplus
#define restrict __restrict__
#endif

/* Every buffer starts on a 64-byte boundary: a misaligned 64-byte vector load spans
 * two cache lines, which costs a quarter of the kernel's speed. */
static inline float *alloc_floats(long n) {
    size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
    return (float *)aligned_alloc(64, bytes ? bytes : 64);
}
static inline float *zeroed_floats(long n) {
    float *p = alloc_floats(n);
    if (p) memset(p, 0, sizeof(float) * (size_t)n);
    return p;
}
#define PAD16(n) (((n) + 15L) / 16 * 16)   /* floats: keep each view 64-byte aligned */

/* The floats between two rows of a layer's W (out columns): a row of an even number of
 * cache lines (out a multiple of 32) gets one line more. Rows a multiple of 128 bytes
 * apart put a column panel's K rows in a fraction of the L1's sets, where they evict each
 * other before the next row block of the product reads them again (docs/NOTES.md 51). */
static inline int w_ld(int out) { return out % 32 == 0 ? out + 16 : out; }

static inline void sigmoid_inplace(float *x, long n) {
    for (long i = 0; i < n; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
}

/* Softmax + cross-entropy on the logits in place: leaves dL/dlogits = p - onehot
 * (per sample, not yet divided by the batch size). Returns the summed loss (double)
 * and counts correct argmax predictions. */
static inline double softmax_xent(float *restrict z, const unsigned char *restrict y, int rows, int classes,
                                  long *correct) {
    double loss = 0.0;
    for (int i = 0; i < rows; i++) {
        float *zi = z + (long)i * classes;
        int best = 0;
        float mx = zi[0];
        for (int c = 1; c < classes; c++) if (zi[c] > mx) { mx = zi[c]; best = c; }
        float zy = zi[y[i]] - mx;
        float sum = 0.0f;
        for (int c = 0; c < classes; c++) { zi[c] = expf(zi[c] - mx); sum += zi[c]; }
        /* -log p_y = log(sum) - (z_y - max): finite even when p_y underflows */
        loss += (double)logf(sum) - (double)zy;
        float inv = 1.0f / sum;
        for (int c = 0; c < classes; c++) zi[c] *= inv;
        zi[y[i]] -= 1.0f;
        *correct += best == y[i];
    }
    return loss;
}

static inline int argmax10(const float *z, int classes) {
    int best = 0;
    for (int c = 1; c < classes; c++) if (z[c] > z[best]) best = c;
    return best;
}

/* Correct argmax predictions of rows logits against y; each prediction into pred when
 * pred is not NULL. */
static inline long count_correct(const float *logits, int rows, int classes, const unsigned char *y, unsigned char *pred) {
    long correct = 0;
    for (int i = 0; i < rows; i++) {
        int p = argmax10(logits + (long)i * classes, classes);
        correct += p == y[i];
        if (pred) pred[i] = (unsigned char)p;
    }
    return correct;
}

/* [*lo, *hi) = worker t's part of n items, in units of `unit` items (sizes differ by at
 * most one unit; the last part takes the remainder). unit 1: batch rows; unit 16:
 * parameter slices, so that two threads never write the same cache line. */
static inline void split_units(long n, int t, int T, long unit, long *lo, long *hi) {
    long units = (n + unit - 1) / unit, q = units / T, r = units % T;
    long u0 = t * q + (t < r ? t : r), u1 = u0 + q + (t < r);
    *lo = u0 * unit < n ? u0 * unit : n;
    *hi = u1 * unit < n ? u1 * unit : n;
}

/* model FLOP per training sample of layers size[0] -> ... -> size[L]: forward 2*in*out
 * per layer, weight gradients the same, input gradients for every layer but the first
 * (elementwise work not counted) */
static inline double dense_flops_per_sample(const int *size, int L) {
    double f = 0;
    for (int l = 1; l <= L; l++) {
        double io = (double)size[l - 1] * size[l];
        f += 4 * io + (l > 1 ? 2 * io : 0);
    }
    return f;
}

/* The gradient layout mpi, hybrid and shm (across nodes) send between ranks: the
 * parameters' order (W1 b1 W2 b2 ...) without W's row padding, each view on 16 floats,
 * so that only the model's floats travel. Layer l's weight gradient starts at gw[l], its
 * rows size[l] floats apart, its bias gradient at gb[l]; returns the floats of it all. */
static inline long grad_layout(const int *size, int L, long *gw, long *gb) {
    long n = 0;
    for (int l = 1; l <= L; l++) {
        gw[l] = n;
        gb[l] = n += PAD16((long)size[l - 1] * size[l]);
        n += PAD16(size[l]);
    }
    return n;
}

/* Serial's update W = fmaf(scale, g, W) on rows [r0, r1) of a layer's W (out columns, rows
 * w_ld(out) floats apart) from a gradient without the padding (rows out floats apart): the
 * layout mpi and hybrid send between ranks, so that only the model's floats travel. */
static inline void sgd_update_rows(float *W, const float *g, int out, long r0, long r1, float scale) {
    for (long r = r0; r < r1; r++) {
        float *restrict w = W + r * w_ld(out);
        const float *restrict gr = g + r * out;
        for (int j = 0; j < out; j++) w[j] = fmaf(scale, gr[j], w[j]);
    }
}

/* W[p] = fmaf(scale, g_0[p] + g_1[p] + ... + g_{ng-1}[p], W[p]) for p in [lo, hi):
 * the sum always in the order of g[], chunk by chunk in a buffer that stays in L1, so
 * whoever computes a slice gets the same bits (openmp --accum reduction's threads,
 * mpi/shm's ranks). ng >= 1. */
static inline void sum_update(float *restrict w, float *const *g, int ng, long lo, long hi, float scale) {
    enum { CHUNK = 512 };
    float s[CHUNK] __attribute__((aligned(64)));
    for (long p0 = lo; p0 < hi; p0 += CHUNK) {
        int c = (int)(hi - p0 < CHUNK ? hi - p0 : (long)CHUNK);
        const float *restrict g0 = g[0] + p0;
        for (int k = 0; k < c; k++) s[k] = g0[k];
        for (int u = 1; u < ng; u++) {
            const float *restrict gu = g[u] + p0;
            for (int k = 0; k < c; k++) s[k] += gu[k];
        }
        float *restrict wp = w + p0;
        for (int k = 0; k < c; k++) wp[k] = fmaf(scale, s[k], wp[k]);
    }
}

/* dst[p] = g_0[p] + g_1[p] + ... + g_{ng-1}[p] for p in [lo, hi), always in the order
 * of g[] (ng = 0, no worker had rows of a short batch: zeros); hybrid's threads, mpi/shm's
 * ranks across nodes. */
static inline void sum_in_order(float *restrict dst, float *const *g, int ng, long lo, long hi) {
    if (ng == 0) { memset(dst + lo, 0, sizeof(float) * (size_t)(hi - lo)); return; }
    const float *restrict g0 = g[0];
    for (long p = lo; p < hi; p++) dst[p] = g0[p];
    for (int u = 1; u < ng; u++) {
        const float *restrict gu = g[u];
        for (long p = lo; p < hi; p++) dst[p] += gu[p];
    }
}

/* What a dense net of o's layers takes for `features` inputs and `rows` rows of
 * activations, with `grads` gradient buffers the size of the parameters besides them:
 * parameters, W^T of the widest layer, activations and deltas, the update's K-block
 * scratch (rows over KC), gradients. For the memory check before loading. */
static inline double dense_model_bytes(const train_options *o, int features, long rows, int grads) {
    double params = 0, widest = 0, width_sum = features + IDX_CLASSES;
    int prev = features;
    for (int l = 0; l <= o->n_hidden; l++) {
        int out = l < o->n_hidden ? o->hidden[l] : IDX_CLASSES;
        double w = (double)prev * out;
        params += PAD16((long)prev * w_ld(out)) + PAD16(out);
        if (w > widest) widest = w;
        if (l < o->n_hidden) width_sum += out;
        prev = out;
    }
    return sizeof(float) * (params * (1 + grads) + widest * (rows > 512 ? 2 : 1) + 2.0 * rows * width_sum);
}

#endif
