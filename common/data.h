/*
 * common/data.h — a run's data (header-only): the plan (counts and image side from the
 * IDX files' headers, the flags checked against them), loading it for one process, the
 * shards of n items over P parts, gathering a shuffled batch as floats, and --predict's
 * ASCII art.
 * The IDX reader itself is common/idx.c; the memory check common/memcheck.h; the
 * data-parallel loader over MPI ranks common/sharded_data.h.
 */
#ifndef PARTRAIN_DATA_H
#define PARTRAIN_DATA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"
#include "memcheck.h"
#include "options.h"

/* The sizes of a run's data, from the files' headers: counts and the image side, with
 * --train, --test, --batch full and --image-size applied and checked. A problem: one
 * line "prog: ..." on stderr, exit 2. */
typedef struct { long train_n, test_n; int side, file_side; } data_plan;
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
    p->file_side = train_side;
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

/* part k's contiguous range [*lo, *lo + *count) of n items over `parts` parts: sizes
 * differ by at most one */
static inline void shard(long n, int k, int parts, long *lo, long *count) {
    long base = n / parts, rem = n % parts;
    *lo = k * base + (k < rem ? k : rem);
    *count = base + (k < rem ? 1 : 0);
}

/* A row of at most SMALL_ROW_BYTES (a 28 x 28 image's 784 pixel bytes) is a few cache lines
 * at a random place: too short a stream for the hardware prefetcher to catch, so the
 * gather asks for its lines itself. Larger rows (resampled floats, 12 KB and up) are
 * streams it does follow: asking for their thousands of lines stalls the core more than
 * it saves (docs/NOTES.md 53). */
enum { SMALL_ROW_BYTES = 4096, GATHER_AHEAD = 2 };

/* d's samples as stored: *bytes per row (pixel bytes or resampled floats), from the start */
static inline const char *dataset_store(const dataset *d, size_t *bytes) {
    *bytes = (d->pixels ? 1 : sizeof(float)) * (size_t)d->features;
    return d->pixels ? (const char *)d->pixels : (const char *)d->x;
}

/* rows samples of d as floats into x (rows x features): sample idx[r], or first + r when
 * idx is NULL. Bytes are converted (pixel_floats), resampled floats copied. A shuffled
 * batch's small rows were asked for a step early (prefetch_batch), but the step's own
 * traffic has pushed them out of L2 since: each is asked into L1 again GATHER_AHEAD rows
 * before its turn. */
static inline void dataset_rows(const dataset *d, const uint32_t *idx, long first, int rows, float *x) {
    size_t features = (size_t)d->features, bytes;
    const char *base = dataset_store(d, &bytes);
    for (int r = 0; r < rows; r++) {
        if (idx && bytes <= SMALL_ROW_BYTES && r + GATHER_AHEAD < rows)
            for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(base + (size_t)idx[r + GATHER_AHEAD] * bytes + b, 0, 3);
        size_t s = idx ? idx[r] : (size_t)(first + r);
        if (d->pixels) pixel_floats(d->pixels + s * features, (long)features, x + (size_t)r * features);
        else memcpy(x + (size_t)r * features, d->x + s * features, sizeof(float) * features);
    }
}

/* rows samples of d, in the order idx gives, into x (rows x features) and y */
static inline void gather_batch(const dataset *d, const uint32_t *idx, int rows, float *x, unsigned char *y) {
    dataset_rows(d, idx, 0, rows, x);
    for (int r = 0; r < rows; r++) y[r] = d->y[idx[r]];
}

/* Asks for the rows that gather_batch() will copy next, a step early: the samples are
 * scattered over the whole training set, so each small row is a trip to DRAM that the
 * hardware cannot foresee; issued before a step's compute, the trips overlap it. Large
 * rows are left to the hardware (SMALL_ROW_BYTES).
 * The empty volatile asm keeps the call: GCC counts a prefetch as no side effect, finds
 * the whole function pure and deletes the call at -O1 and above (tests/test_headers.sh
 * checks the builds for prefetch instructions). */
static inline void prefetch_batch(const dataset *d, const uint32_t *idx, int rows) {
    size_t bytes;
    const char *base = dataset_store(d, &bytes);
    for (int r = 0; bytes <= SMALL_ROW_BYTES && r < rows; r++) {
        const char *row = base + (size_t)idx[r] * bytes;
        for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
    }
    __asm__ __volatile__("" ::: "memory");
}

/* --predict K: the first K test images as ASCII art, with the predicted and true label */
static inline void print_predictions(const dataset *d, const unsigned char *pred, int k) {
    static const char shades[] = " .:-=+*#%@";
    int step = d->side > 28 ? d->side / 28 : 1;
    for (int s = 0; s < k && s < d->n; s++) {
        printf("test image %d: predicted %d, true %d%s\n", s, pred[s], d->y[s], pred[s] == d->y[s] ? "" : "  <-- wrong");
        for (int r = 0; r < d->side; r += step) {
            for (int c = 0; c < d->side; c += step) {
                size_t at = (size_t)s * d->features + (size_t)r * d->side + c;
                float v = d->x ? d->x[at] : 0.0f;
                if (d->pixels) pixel_floats(d->pixels + at, 1, &v);
                int q = (int)(v * 9.999f);
                putchar(shades[q < 0 ? 0 : q > 9 ? 9 : q]);
            }
            putchar('\n');
        }
    }
}

#endif
