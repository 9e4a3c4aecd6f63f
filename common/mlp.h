/*
 * common/mlp.h — the small pieces of an MLP trainer that every trainer has verbatim
 * (header-only): aligned buffers, the sigmoid pass, softmax + cross-entropy, argmax,
 * gathering a batch, the fixed-order sums of gradient buffers, the model's FLOP count
 * and the ASCII-art predictions. Strategy code (how a step is shared) never lives here:
 * the owner-computes sums are common/owner.h.
 */
#ifndef PARTRAIN_MLP_H
#define PARTRAIN_MLP_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "options.h"
#include "memcheck.h"

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

/* rows samples of d, in the order idx gives, into x (rows x features) and y */
static inline void gather_batch(const dataset *d, const uint32_t *idx, int rows, float *x, unsigned char *y) {
    size_t bytes = sizeof(float) * (size_t)d->features;
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * d->features, d->x + (size_t)idx[r] * d->features, bytes);
        y[r] = d->y[idx[r]];
    }
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

/* W[p] = fmaf(scale, g_0[p] + g_1[p] + ... + g_{ng-1}[p], W[p]) for p in [lo, hi):
 * the sum always in the order of g[], chunk by chunk in a buffer that stays in L1, so
 * whoever computes a slice gets the same bits (openmp --accum reduction's threads,
 * mpi --sync shm's ranks). ng >= 1. */
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
 * of g[] (ng = 0, no worker had rows of a short batch: zeros); hybrid's threads, mpi
 * --sync shm's ranks across nodes. */
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
        params += PAD16((long)w) + PAD16(out);
        if (w > widest) widest = w;
        if (l < o->n_hidden) width_sum += out;
        prev = out;
    }
    return sizeof(float) * (params * (1 + grads) + widest * (rows > 512 ? 2 : 1) + 2.0 * rows * width_sum);
}

/* The sizes of a run's data, from the files' headers: counts and the image side, with
 * --train, --test, --batch full and --image-size applied and checked. A problem: one
 * line "prog: ..." on stderr, exit 2. */
typedef struct { long train_n, test_n; int side; } data_plan;
static inline void plan_data(const char *prog, train_options *o, data_plan *p) {
    char err[IDX_ERR_LEN];
    long train_avail, test_avail;
    int train_side = 0, test_side = 0;
    if (dataset_count(o->data_dir, "train", &train_avail, err, sizeof err) ||
        dataset_count(o->data_dir, "t10k", &test_avail, err, sizeof err) ||
        dataset_side(o->data_dir, "train", &train_side, err, sizeof err) ||
        dataset_side(o->data_dir, "t10k", &test_side, err, sizeof err) ||
        (!o->image_size && dataset_check_sides(o->data_dir, train_side, test_side, err, sizeof err))) {
        fprintf(stderr, "%s: %s\n", prog, err);
        exit(2);
    }
    if (o->train_n > train_avail) options_die(prog, "--train %ld: %s holds only %ld training samples", o->train_n, o->data_dir, train_avail);
    if (o->test_n > test_avail) options_die(prog, "--test %ld: %s holds only %ld test samples", o->test_n, o->data_dir, test_avail);
    p->train_n = o->train_n ? o->train_n : train_avail;
    p->test_n = o->test_n ? o->test_n : test_avail;
    p->side = o->image_size ? o->image_size : train_side;
    if (o->batch_full) o->batch = p->train_n;
    if (o->batch > p->train_n) options_die(prog, "--batch %ld is larger than the %ld training samples", o->batch, p->train_n);
}

/* The data of a one-process run, after plan_data() and the memory check: the first
 * --train and --test samples of the files, resampled to --image-size. A problem with
 * the files: one line "prog: ..." on stderr, exit 2. */
static inline void load_data(const char *prog, train_options *o, const data_plan *p, dataset *train, dataset *test) {
    char err[IDX_ERR_LEN];
    if (dataset_load(o->data_dir, "train", 0, p->train_n, o->image_size, train, err, sizeof err) ||
        dataset_load(o->data_dir, "t10k", 0, p->test_n, o->image_size, test, err, sizeof err) ||
        dataset_check_sides(o->data_dir, train->side, test->side, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        exit(2);
    }
}

/* --predict K: the first K test images as ASCII art, with the predicted and true label */
static inline void print_predictions(const dataset *d, const unsigned char *pred, int k) {
    static const char shades[] = " .:-=+*#%@";
    int step = d->side > 28 ? d->side / 28 : 1;
    for (int s = 0; s < k && s < d->n; s++) {
        printf("test image %d: predicted %d, true %d%s\n", s, pred[s], d->y[s], pred[s] == d->y[s] ? "" : "  <-- wrong");
        for (int r = 0; r < d->side; r += step) {
            for (int c = 0; c < d->side; c += step) {
                float v = d->x[(size_t)s * d->features + (size_t)r * d->side + c];
                int q = (int)(v * 9.999f);
                putchar(shades[q < 0 ? 0 : q > 9 ? 9 : q]);
            }
            putchar('\n');
        }
    }
}

#endif
