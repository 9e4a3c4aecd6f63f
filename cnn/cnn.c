/*
 * cnn/cnn.c — the CNN of seed report 003, trained with hybrid MPI + OpenMP.
 *
 * Model: S x S x 1 -> Conv2D F filters 3x3 (no padding) -> ReLU -> max-pool 2x2 ->
 * flatten (filter-major) -> dense -> 10 -> softmax + cross-entropy; plain mini-batch SGD
 * with serial's update W = fmaf(-lr/B, g, W), g summed over the global batch of B rows.
 * Strategy, two levels:
 *   MPI ranks  data parallel with global-batch semantics, as mpi/mpi.c: each rank
 *              computes the gradient sums of its part of every batch, the sums are added
 *              over the ranks, every replica applies the same update (--batch-per-rank:
 *              seed report 003's per-rank batches instead).
 *   OpenMP     T threads per rank share each step by samples: thread t runs everything
 *              per sample (conv + ReLU + pool, logits, softmax, conv backward) on its
 *              block of rows, then its dense gradient as one product; a thread done early
 *              takes 4-sample pieces from the back of another's block, and every sum stays
 *              that of the static split (matmul_continue goes on with the owner's chain).
 *              The threads' buffers are added in thread order: reruns are bit-identical.
 * Communicated per step (--sync), by each rank's master thread (MPI_THREAD_FUNNELED):
 *   the gradient sums, allreduce (every rank updates) or reduce-bcast (rank 0 updates,
 *   then broadcasts). Barriers per step: 2 on one rank, 4 (allreduce) or 6 on P ranks.
 * Kernels: a direct convolution vectorized along the output row (AVX-512), bias, ReLU
 * and pooling fused in registers (only the pooled values and each window's argmax are
 * stored); the dense products use common/gemm.h. Without AVX-512 a scalar path runs
 * (forward bit-identical, backward within the tests' tolerance: docs/cnn.md). The summary
 * line reports each worker's conv time per sample. Errors: as mpi/mpi. Design: docs/cnn.md.
 *
 * Compile: make cnn   (mpicc -std=c11 -O3 -march=native -fopenmp -Icommon cnn/cnn.c common/{idx,options,results,checkpoint,watchdog}.c -lz -lm -pthread)
 * Run:     cnn/cnn --data data/fashion --epochs 5     (1 rank x 1 thread: the serial baseline)
 *          scripts/mpirun.sh --bind-to-none 2 cnn/cnn --threads 8 --sync allreduce
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>
#include <omp.h>

#include "checkpoint.h"
#include "checkpoint_mpi.h"
#include "data.h"
#include "gemm.h"       /* matmul(), transpose(): the one matrix kernel */
#include "idx.h"
#include "maths.h"
#include "options.h"
#include "prng.h"
#include "results.h"
#include "sharded_data.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"
#include "trace_mpi.h"  /* --trace: TRACE(cat, name) marks, the ranks' events gathered */

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#ifndef _OPENMP
#error "cnn/cnn.c needs OpenMP: compile with -fopenmp"
#endif

#define PROGRAM "cnn"
#include "mpi_util.h"   /* rank, nranks, mpi_check(), agree_or_die(), shard(), ... */
#include "watchdog.h"   /* --timeout-step: the stuck-rank watchdog */
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */
#define MAX_THREADS 256
#define MAX_FILTERS 256
#define CLASSES IDX_CLASSES
#define SLOT 16                 /* floats per (sample, filter) gradient slot: 9 weights, bias, padding */


// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

/* the variants: X(id, CSV name, --sync value, help) */
#define SYNC_MODES(X) \
    X(SYNC_ALLREDUCE,    "allreduce",    "allreduce",    "MPI_Allreduce of all gradients, every rank updates") \
    X(SYNC_REDUCE_BCAST, "reduce-bcast", "reduce-bcast", "MPI_Reduce to rank 0, rank 0 updates, MPI_Bcast")
enum sync_kind { SYNC_MODES(VARIANT_ENUM) N_SYNC };
static const variant SYNC[] = { SYNC_MODES(VARIANT_ROW) };

typedef struct {
    train_options common;
    int threads;                /* --threads T (per rank) */
    int sync;                   /* --sync allreduce|reduce-bcast */
    int filters;                /* --filters F */
    long batch_per_rank;        /* --batch-per-rank B (0: not given; --batch is global) */
    int batch_given;            /* --batch was on the command line */
} cnn_options;

static void usage(void) {
    printf("Usage: cnn/cnn [options]   or   scripts/mpirun.sh [--bind-to-none] P cnn/cnn [options]\n"
           "Trains seed report 003's CNN (conv 3x3 -> ReLU -> max-pool 2x2 -> dense -> softmax) on\n"
           "MNIST-style IDX data: data-parallel over P MPI ranks, T OpenMP threads per rank.\n\n");
    options_usage_common();
    printf("  (CNN: --batch defaults to 32; --hidden is rejected, the layer sizes follow\n"
           "   --filters and --image-size; --activation accepts relu only)\n"
           "CNN:\n"
           "  --filters F           convolution filters (3x3) [8]\n"
           "  --threads T           OpenMP threads per rank [1]\n"
           "  --sync MODE           gradient exchange per step [allreduce]:\n");
    variant_usage(SYNC, N_SYNC);
    printf("  --batch-per-rank B    B rows per rank per step, i.e. a global batch of P*B\n"
           "                        (seed report 003's semantics; instead of --batch)\n");
    watchdog_usage();
    options_usage_exit_status();
}

/* Ranks other than 0 parse with stderr muted: the flags are the same on every rank, so
 * rank 0 alone prints options_die()'s one-line error; every rank exits with status 2
 * (and finalizes MPI from the atexit handler). */
static void parse_options(cnn_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->common.batch = 32;
    o->threads = 1;
    o->sync = SYNC_ALLREDUCE;
    o->filters = 8;
    o->batch_per_rank = 0;
    o->batch_given = 0;
    int saved = mute_stderr_off_root();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { if (rank == 0) usage(); exit(0); }
        if (!strcmp(a, "--list-variants")) { if (rank == 0) variant_list("--sync", SYNC, N_SYNC); exit(0); }
        if (!strcmp(a, "--threads")) {
            o->threads = (int)options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, MAX_THREADS);
            continue;
        }
        if (!strcmp(a, "--filters")) {
            o->filters = (int)options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, MAX_FILTERS);
            continue;
        }
        if (!strcmp(a, "--sync")) {
            o->sync = variant_parse(PROGRAM, "--sync", options_value(PROGRAM, argc, argv, &i), SYNC, N_SYNC);
            continue;
        }
        if (watchdog_parse(PROGRAM, argc, argv, &i)) continue;
        if (!strcmp(a, "--batch-per-rank")) {
            o->batch_per_rank = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, 100000000);
            continue;
        }
        if (!strcmp(a, "--hidden"))
            options_die(PROGRAM, "--hidden: the CNN has no hidden dense layers; its sizes follow --filters and --image-size");
        if (!strcmp(a, "--activation")) {
            const char *v = options_value(PROGRAM, argc, argv, &i);
            if (strcmp(v, "relu")) options_die(PROGRAM, "--activation: the CNN uses relu only, got '%s'", v);
            continue;
        }
        if (!strcmp(a, "--batch")) o->batch_given = 1;
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) continue;
        options_die(PROGRAM, "unknown option '%s'", a);
    }
    if (o->batch_per_rank && o->batch_given)
        options_die(PROGRAM, "--batch and --batch-per-rank: give one of them, not both");
    if (o->common.image_size && o->common.image_size < 4)
        options_die(PROGRAM, "--image-size %d: the CNN needs images of at least 4x4 (3x3 conv, then 2x2 pooling)",
                    o->common.image_size);
    unmute_stderr(saved);
}

// ----------------------------------------------------------------------------
// model: one contiguous parameter buffer with views, and a gradient buffer laid out alike
//
// Conv: Wc is [9][F] (tap-major: Wc[(ky*3 + kx)*F + f]), as prng_init_dense fills a
// [fan_in][fan_out] matrix: He-normal, fan_in 9, stream PRNG_STREAM_INIT(1); bc[F] = 0.
// Dense: the matrix of prng_init_dense(features, 10, layer 2, output layer) (Xavier-
// uniform, stream PRNG_STREAM_INIT(2), filled [in][out]), stored as Wd = [10][features]
// (out x in, PyTorch's nn.Linear layout) so that both backward products run on full
// 64-column tiles; WdT = [features][10] is its copy for the forward product, rebuilt
// after every update. bd[10] = 0. The pooled maps are flattened filter-major (f, py, px),
// PyTorch's order.

typedef struct {
    int side;                     /* S: input images S x S */
    int filters;                  /* F */
    int conv_side;                /* C = S - 2 (3x3, stride 1, no padding) */
    int pool_side;                /* P = C / 2 (2x2, stride 2) */
    int features;                 /* F * P * P: inputs of the dense layer */
    int fstride, astride;         /* floats (pooled, dpool) and bytes (arg) per filter block of a
                                     sample: P * P */
    long prow, arow;              /* a sample's row of pooled/dpool (floats) and of arg (bytes) */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params (and grad), padding aligns each view */
    float *params, *grad;
    float *Wc, *bc, *Wd, *bd;     /* views into params */
    float *gWc, *gbc, *gWd, *gbd; /* the same views into grad: plain sums over the batch */
    float *WdT;                   /* Wd transposed, [features][10], for the forward product */
    /* work buffers, sized for max_rows samples */
    int max_rows;
    float *images;                /* rows x S * S: the samples as floats (common/data.h), the
                                     convolutions' input */
    float *pooled;                /* rows x prow: pooled ReLU(conv), the dense layer's input */
    unsigned char *arg;           /* rows x arow: argmax of each 2x2 window, 0..3 row-major */
    float *logits;                /* rows x 10, then dL/dlogits */
    float *dpool;                 /* rows x prow: dL/dpooled */
    float *slot;                  /* rows x F x SLOT: conv gradient of each (sample, filter) */
    float *slot_sum;              /* F x SLOT: scratch of the master's per-block slot sums */
    float *parts;                 /* (T - 1) x params_alloc: the gradient sums of threads 1..T-1
                                     over their blocks (thread 0's are grad itself; T: the team
                                     cnn_init was given; train_step's T must not exceed it) */
    double *loss_row;             /* rows: cross-entropy of each sample */
} cnn;

static int cnn_init(cnn *m, int side, int filters, uint64_t seed, int max_rows, int threads) {
    memset(m, 0, sizeof *m);
    int F = filters;
    m->side = side;
    m->filters = F;
    m->conv_side = side - 2;
    m->pool_side = m->conv_side / 2;
    m->features = F * m->pool_side * m->pool_side;
    m->fstride = m->astride = m->pool_side * m->pool_side;
    m->prow = m->arow = m->features;
    m->max_rows = max_rows;
    long nf = (long)m->features * CLASSES;
    m->n_params = 9L * F + F + nf + CLASSES;
    m->params_alloc = PAD16(9L * F) + PAD16(F) + PAD16(nf) + PAD16(CLASSES);
    m->params = alloc_floats(m->params_alloc);
    m->grad = alloc_floats(m->params_alloc);
    m->WdT = alloc_floats(nf);
    if (!m->params || !m->grad || !m->WdT) return -1;
    memset(m->params, 0, sizeof(float) * (size_t)m->params_alloc);   /* padding and biases stay zero */
    memset(m->grad, 0, sizeof(float) * (size_t)m->params_alloc);
    float *views[4], *gviews[4];
    long sizes[4] = { 9L * F, F, nf, CLASSES };
    for (int v = 0, off = 0; v < 4; off += (int)PAD16(sizes[v]), v++) {
        views[v] = m->params + off;
        gviews[v] = m->grad + off;
    }
    m->Wc = views[0]; m->bc = views[1]; m->Wd = views[2]; m->bd = views[3];
    m->gWc = gviews[0]; m->gbc = gviews[1]; m->gWd = gviews[2]; m->gbd = gviews[3];
    prng_init_dense(m->Wc, 9, F, 1, 0, seed);                  /* He-normal, fan_in 9 */
    prng_init_dense(m->WdT, m->features, CLASSES, 2, 1, seed); /* Xavier-uniform, [in][out] */
    transpose(m->WdT, m->features, CLASSES, m->Wd, m->features);
    long rf = (long)max_rows * m->prow, ra = ((long)max_rows * m->arow + 64 + 63) / 64 * 64;
    m->images = alloc_floats((long)max_rows * side * side);
    m->pooled = alloc_floats(rf);
    m->arg = aligned_alloc(64, (size_t)ra);     /* + 64: the backward's whole 16-byte loads */
    m->logits = alloc_floats((long)max_rows * CLASSES);
    m->dpool = alloc_floats(rf);
    m->slot = alloc_floats((long)max_rows * F * SLOT);
    m->slot_sum = alloc_floats((long)F * SLOT);
    if (threads > 1 && !(m->parts = alloc_floats((long)(threads - 1) * m->params_alloc))) return -1;
    m->loss_row = malloc(sizeof(double) * (size_t)max_rows);
    if (!m->images || !m->pooled || !m->arg || !m->logits || !m->dpool || !m->slot || !m->slot_sum || !m->loss_row)
        return -1;
    memset(m->arg, 0, (size_t)ra);
    return 0;
}

static void cnn_free(cnn *m) {
    free(m->params); free(m->grad); free(m->WdT); free(m->images); free(m->pooled); free(m->arg);
    free(m->logits); free(m->dpool); free(m->slot); free(m->slot_sum); free(m->parts); free(m->loss_row);
}

/* Thread t's gradient sums over its samples, laid out like params: thread 0's are grad
 * itself (with T = 1 nothing is ever combined), the others' live in parts. */
static float *thread_grad(const cnn *m, int t) {
    return t == 0 ? m->grad : m->parts + (long)(t - 1) * m->params_alloc;
}
/* In g, a gradient buffer laid out like grad: the counterpart of view_of_grad (m->gWd, ...) */
static float *grad_view(const cnn *m, float *g, const float *view_of_grad) { return g + (view_of_grad - m->grad); }

/* model FLOP per training sample, counted like the MLP trainers: forward 2*MACs per
 * layer, weight gradients the same, input gradients for every layer but the first (so
 * none for the convolution); ReLU, pooling, softmax not counted. 275,808 by default. */
static double cnn_flops_per_sample(const cnn *m) {
    double conv = 2.0 * 9 * m->filters * (double)m->conv_side * m->conv_side;
    double dense = 2.0 * m->features * CLASSES;
    return 2 * conv + 3 * dense;
}

/* "conv8": the CSV's hidden column for the CNN */
static const char *cnn_layers_string(const cnn *m, char *buf, int len) {
    snprintf(buf, (size_t)len, "conv%d", m->filters);
    return buf;
}

/* rows [*lo, *hi) of n for thread t of T: contiguous, sizes differ by at most one */
static void split(long n, int t, int T, long *lo, long *hi) {
    long base = n / T, rem = n % T;
    *lo = t * base + (t < rem ? t : rem);
    *hi = *lo + base + (t < rem ? 1 : 0);
}

typedef struct {
    _Alignas(64) double sync;     /* seconds waiting at barriers (own cache line: no false sharing) */
    long correct;                 /* training samples classified correctly */
    double conv_seconds;          /* in the conv forward and backward of the samples this thread ran */
    long conv_samples;            /*   (epochs 2..E; every epoch when E = 1): this core's speed, as */
                                  /*   the conv touches only the thread's own data (docs/cnn.md) */
} thread_stats;

/* Every thread of the team; the wait is this rank's synchronisation time. */
static void team_barrier(thread_stats *st) {
    double t0 = timer_now();
    TRACE(TRACE_WAIT, "barrier") {
#pragma omp barrier
    }
    st->sync += timer_now() - t0;
}

// ----------------------------------------------------------------------------
// forward
//
// One (sample, filter) at a time: conv 3x3 + bias, ReLU, 2x2 max-pooling into that
// filter's block of the sample (pf, af: P x P row-major). Only the pooled value and the
// window's argmax are kept. Tie rule: the window is scanned in
// row-major order (0,0) (0,1) (1,0) (1,1) with a strict >, so the FIRST maximum is the
// argmax and alone gets the gradient (PyTorch's CPU max_pool2d does the same).

/* The reference: plain loops, the conv sum as bias + taps in row-major order with one
 * fused multiply-add each. */
__attribute__((unused))   /* only the tests call it */
static void conv_pool_forward_ref(const cnn *m, const float *restrict img, int f, float *restrict pf,
                                  unsigned char *restrict af) {
    int S = m->side, P = m->pool_side, F = m->filters;
    float w[9], bias = m->bc[f];
    for (int k = 0; k < 9; k++) w[k] = m->Wc[k * F + f];
    for (int py = 0; py < P; py++)
        for (int px = 0; px < P; px++) {
            float best = 0.0f;
            int which = 0;
            for (int q = 0; q < 4; q++) {
                int y = 2 * py + q / 2, x = 2 * px + q % 2;
                float v = bias;
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) v = fmaf(w[ky * 3 + kx], img[(long)(y + ky) * S + x + kx], v);
                v = v > 0.0f ? v : 0.0f;                        /* ReLU */
                if (q == 0 || v > best) { best = v; which = q; }
            }
            pf[py * P + px] = best;
            af[py * P + px] = (unsigned char)which;
        }
}

#if defined(__AVX512F__)
/* Lanes of a 32-wide row held in two vectors (a = columns 0..15, b = 16..31):
 * EVEN/ODD pick columns 0,2,..,30 / 1,3,..,31 (deinterleave for pooling), ILO/IHI
 * interleave two 16-wide vectors back into columns 0..15 / 16..31. */
#define EVEN_IDX _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define ODD_IDX  _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
#define ILO_IDX  _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
#define IHI_IDX  _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)

/* Whether a pass whose last input row is `last_row`, at chunk column cx0, must use masked
 * loads: its farthest plain load (32 floats from column cx0 + 2 of that row) would end
 * beyond the S x S image. */
static inline int pass_masked(int S, int last_row, int cx0) {
    return (long)last_row * S + cx0 + 2 + 32 > (long)S * S;
}

/* Masks of a chunk of n conv columns (n even, 2..32): the two input vectors, the pooled one */
static inline void chunk_masks(int n, __mmask16 *mlo, __mmask16 *mhi, __mmask16 *mp) {
    *mlo = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
    *mhi = (__mmask16)(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0);
    *mp = (__mmask16)(n >= 32 ? 0xFFFF : (1u << (n / 2)) - 1);
}

/* Input rows of one pass, shared by the conv rows they feed: input row r of the pass
 * (r = 0 .. 2*NP+1) meets tap row ky of conv row c = r - ky. OP(c, ky) consumes the
 * pair of vectors (lo, hi) of input row r shifted by kx. Conv rows 2, 3 exist only when
 * the pass covers two pooled rows (NP == 2). Written out, not looped, so that every
 * accumulator is a named register.
 * Loads: masked (zeros beyond the conv columns of the chunk) only where a plain 16-float
 * load would run past the end of the image (pass_masked()); elsewhere plain loads, whose
 * lanes beyond the chunk's columns read pixels of the next rows: finite values that only
 * reach conv columns the pooling discards (forward) or meet zero gradients (backward).
 * A masked load costs an extra vector-ALU uop, and the FMAs need those ports. */
#define IN_ROW(r, kx) \
    __m512 lo = MASKED ? _mm512_maskz_loadu_ps(mlo, row + (r) * S + (kx)) : _mm512_loadu_ps(row + (r) * S + (kx)), \
           hi = MASKED ? _mm512_maskz_loadu_ps(mhi, row + (r) * S + (kx) + 16) : _mm512_loadu_ps(row + (r) * S + (kx) + 16);
#define PASS_ROWS(OP) \
    for (int kx = 0; kx < 3; kx++) { IN_ROW(0, kx) OP(0, 0) } \
    for (int kx = 0; kx < 3; kx++) { IN_ROW(1, kx) OP(0, 1) OP(1, 0) } \
    for (int kx = 0; kx < 3; kx++) { IN_ROW(2, kx) OP(0, 2) OP(1, 1) if (NP > 1) { OP(2, 0) } } \
    for (int kx = 0; kx < 3; kx++) { IN_ROW(3, kx) OP(1, 2) if (NP > 1) { OP(2, 1) OP(3, 0) } } \
    if (NP > 1) { \
        for (int kx = 0; kx < 3; kx++) { IN_ROW(4, kx) OP(2, 2) OP(3, 1) } \
        for (int kx = 0; kx < 3; kx++) { IN_ROW(5, kx) OP(3, 2) } }

/* 2x2 pooling of conv rows (top: t0 t1, bottom: u0 u1 = columns 0..15, 16..31, after
 * ReLU) into one pooled row of up to 16 values + argmax */
static inline __attribute__((always_inline)) void
pool_store(__m512 t0, __m512 t1, __m512 u0, __m512 u1, float *pooled, unsigned char *arg, __mmask16 mp) {
    const __m512i even = EVEN_IDX, odd = ODD_IDX;
    /* the window's four values, one window per lane, in row-major order */
    __m512 best = _mm512_permutex2var_ps(t0, even, t1), q1 = _mm512_permutex2var_ps(t0, odd, t1),
           q2 = _mm512_permutex2var_ps(u0, even, u1), q3 = _mm512_permutex2var_ps(u0, odd, u1);
    __m512i which = _mm512_setzero_si512();
    __mmask16 k = _mm512_cmp_ps_mask(q1, best, _CMP_GT_OQ);       /* strict >: first max wins */
    best = _mm512_mask_blend_ps(k, best, q1); which = _mm512_mask_mov_epi32(which, k, _mm512_set1_epi32(1));
    k = _mm512_cmp_ps_mask(q2, best, _CMP_GT_OQ);
    best = _mm512_mask_blend_ps(k, best, q2); which = _mm512_mask_mov_epi32(which, k, _mm512_set1_epi32(2));
    k = _mm512_cmp_ps_mask(q3, best, _CMP_GT_OQ);
    best = _mm512_mask_blend_ps(k, best, q3); which = _mm512_mask_mov_epi32(which, k, _mm512_set1_epi32(3));
    _mm512_mask_storeu_ps(pooled, mp, best);
    _mm512_mask_cvtepi32_storeu_epi8(arg, mp, which);
}

/* NP pooled rows (2*NP conv rows) x 32 conv columns: each input row is loaded once per
 * shift and feeds up to three conv rows (NP = 2: 36 loads for 72 FMAs). Accumulation
 * order per conv output: bias, then taps (ky, kx) row-major: the reference's. */
static inline __attribute__((always_inline)) void
conv_pool_pass(const int NP, const int MASKED, const float *row, int S, const __m512 w[9], __m512 bias, __mmask16 mlo,
               __mmask16 mhi, __mmask16 mp, float *pooled, unsigned char *arg, int P) {
    __m512 a0l = bias, a0h = bias, a1l = bias, a1h = bias, a2l = bias, a2h = bias, a3l = bias, a3h = bias;
#define FWD_OP(c, ky) a##c##l = _mm512_fmadd_ps(w[(ky) * 3 + kx], lo, a##c##l); \
                      a##c##h = _mm512_fmadd_ps(w[(ky) * 3 + kx], hi, a##c##h);
    PASS_ROWS(FWD_OP)
#undef FWD_OP
    const __m512 zero = _mm512_setzero_ps();   /* ReLU, then pooling */
    pool_store(_mm512_max_ps(a0l, zero), _mm512_max_ps(a0h, zero), _mm512_max_ps(a1l, zero),
               _mm512_max_ps(a1h, zero), pooled, arg, mp);
    if (NP > 1)
        pool_store(_mm512_max_ps(a2l, zero), _mm512_max_ps(a2h, zero), _mm512_max_ps(a3l, zero),
                   _mm512_max_ps(a3h, zero), pooled + P, arg + P, mp);
}

static void conv_pool_forward_one(const cnn *m, const float *restrict img, int f, float *restrict pf,
                                  unsigned char *restrict af) {
    int S = m->side, P = m->pool_side, F = m->filters, W2 = 2 * P;
    __m512 w[9];
    for (int k = 0; k < 9; k++) w[k] = _mm512_set1_ps(m->Wc[k * F + f]);
    const __m512 bias = _mm512_set1_ps(m->bc[f]);
    for (int cx0 = 0; cx0 < W2; cx0 += 32) {
        __mmask16 mlo, mhi, mp;
        chunk_masks(W2 - cx0, &mlo, &mhi, &mp);
        for (int py = 0; py < P; py += 2) {
            const float *row = img + (long)(2 * py) * S + cx0;
            float *po = pf + py * P + cx0 / 2;
            unsigned char *ao = af + py * P + cx0 / 2;
            int np = P - py >= 2 ? 2 : 1;
            if (pass_masked(S, 2 * py + 2 * np + 1, cx0)) {
                if (np == 2) conv_pool_pass(2, 1, row, S, w, bias, mlo, mhi, mp, po, ao, P);
                else conv_pool_pass(1, 1, row, S, w, bias, mlo, mhi, mp, po, ao, P);
            } else {
                if (np == 2) conv_pool_pass(2, 0, row, S, w, bias, mlo, mhi, mp, po, ao, P);
                else conv_pool_pass(1, 0, row, S, w, bias, mlo, mhi, mp, po, ao, P);
            }
        }
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
/* AVX2 + FMA (no AVX-512): the AVX-512 forward's design on 8-float vectors. A pass is one
 * pooled row: conv rows 2py and 2py + 1 over a chunk of 32 conv columns, in 8 ymm
 * accumulators; each input row is loaded once per shift and feeds both conv rows it
 * meets. Per conv output: bias, then taps (ky, kx) row-major, one FMA each: the
 * reference's order and bits. Loads are masked (zeros beyond the chunk's conv columns)
 * only where a plain load would run past the image (pass_masked); elsewhere the lanes
 * beyond the chunk read pixels of the next row, which only reach conv columns the
 * pooling discards. */
static inline int pass_masked(int S, int last_row, int cx0) {
    return (long)last_row * S + cx0 + 2 + 32 > (long)S * S;
}

/* lanes 0..7 of a 32-column chunk's vector v that hold one of its n columns */
static inline __m256i lane_mask(int n, int v) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* columns 0, 2, .., 14 (even) or 1, 3, .., 15 (odd) of two 8-column vectors a, b */
static inline __m256 even8(__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                                                  _MM_SHUFFLE(3, 1, 2, 0)));
}
static inline __m256 odd8(__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))),
                                                  _MM_SHUFFLE(3, 1, 2, 0)));
}

/* 2x2 pooling of 8 windows: top row (t0 t1), bottom row (u0 u1), 16 conv columns after
 * ReLU; the window scanned (0,0) (0,1) (1,0) (1,1) with a strict >: the first maximum */
static inline __attribute__((always_inline)) void
pool8(__m256 t0, __m256 t1, __m256 u0, __m256 u1, __m256 *best, __m256 *which) {
    __m256 b = even8(t0, t1), q1 = odd8(t0, t1), q2 = even8(u0, u1), q3 = odd8(u0, u1), w = _mm256_setzero_ps();
    __m256 k = _mm256_cmp_ps(q1, b, _CMP_GT_OQ);
    b = _mm256_blendv_ps(b, q1, k); w = _mm256_blendv_ps(w, _mm256_set1_ps(1.0f), k);
    k = _mm256_cmp_ps(q2, b, _CMP_GT_OQ);
    b = _mm256_blendv_ps(b, q2, k); w = _mm256_blendv_ps(w, _mm256_set1_ps(2.0f), k);
    k = _mm256_cmp_ps(q3, b, _CMP_GT_OQ);
    b = _mm256_blendv_ps(b, q3, k); w = _mm256_blendv_ps(w, _mm256_set1_ps(3.0f), k);
    *best = b;
    *which = w;
}

static inline __attribute__((always_inline)) void
conv_pool_pass(const int MASKED, const float *row, int S, const float *w, float bias, int n, float *pooled,
               unsigned char *arg) {
    const __m256i m0 = lane_mask(n, 0), m1 = lane_mask(n, 1), m2 = lane_mask(n, 2), m3 = lane_mask(n, 3);
    __m256 a0 = _mm256_set1_ps(bias), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
#define LD(p, m) (MASKED ? _mm256_maskload_ps((p), (m)) : _mm256_loadu_ps(p))
    for (int r = 0; r < 4; r++)            /* input row 2py + r: conv row 0 at ky = r, row 1 at ky = r - 1 */
        for (int kx = 0; kx < 3; kx++) {
            const float *p = row + (long)r * S + kx;
            __m256 i0 = LD(p, m0), i1 = LD(p + 8, m1), i2 = LD(p + 16, m2), i3 = LD(p + 24, m3);
            if (r < 3) {
                __m256 wv = _mm256_broadcast_ss(w + r * 3 + kx);
                a0 = _mm256_fmadd_ps(wv, i0, a0); a1 = _mm256_fmadd_ps(wv, i1, a1);
                a2 = _mm256_fmadd_ps(wv, i2, a2); a3 = _mm256_fmadd_ps(wv, i3, a3);
            }
            if (r > 0) {
                __m256 wv = _mm256_broadcast_ss(w + (r - 1) * 3 + kx);
                c0 = _mm256_fmadd_ps(wv, i0, c0); c1 = _mm256_fmadd_ps(wv, i1, c1);
                c2 = _mm256_fmadd_ps(wv, i2, c2); c3 = _mm256_fmadd_ps(wv, i3, c3);
            }
        }
#undef LD
    const __m256 zero = _mm256_setzero_ps();   /* ReLU, then pooling */
    __m256 b0, w0, b1, w1;
    pool8(_mm256_max_ps(a0, zero), _mm256_max_ps(a1, zero), _mm256_max_ps(c0, zero), _mm256_max_ps(c1, zero), &b0, &w0);
    pool8(_mm256_max_ps(a2, zero), _mm256_max_ps(a3, zero), _mm256_max_ps(c2, zero), _mm256_max_ps(c3, zero), &b1, &w1);
    float which[16];
    _mm256_storeu_ps(which, w0);
    _mm256_storeu_ps(which + 8, w1);
    int np = n / 2;                        /* pooled columns of the chunk */
    if (np == 16) {
        _mm256_storeu_ps(pooled, b0);
        _mm256_storeu_ps(pooled + 8, b1);
    } else {
        _mm256_maskstore_ps(pooled, lane_mask(np, 0), b0);
        _mm256_maskstore_ps(pooled + 8, lane_mask(np, 1), b1);
    }
    for (int i = 0; i < np; i++) arg[i] = (unsigned char)which[i];
}

static void conv_pool_forward_one(const cnn *m, const float *restrict img, int f, float *restrict pf,
                                  unsigned char *restrict af) {
    int S = m->side, P = m->pool_side, F = m->filters, W2 = 2 * P;
    float w[9];
    for (int k = 0; k < 9; k++) w[k] = m->Wc[k * F + f];
    for (int cx0 = 0; cx0 < W2; cx0 += 32) {
        int n = W2 - cx0 < 32 ? W2 - cx0 : 32;        /* conv columns of the chunk (even) */
        for (int py = 0; py < P; py++) {
            const float *row = img + (long)(2 * py) * S + cx0;
            if (pass_masked(S, 2 * py + 3, cx0))
                conv_pool_pass(1, row, S, w, m->bc[f], n, pf + py * P + cx0 / 2, af + py * P + cx0 / 2);
            else
                conv_pool_pass(0, row, S, w, m->bc[f], n, pf + py * P + cx0 / 2, af + py * P + cx0 / 2);
        }
    }
}
#else
/* Without AVX-512 or AVX2: the reference's sums and tie rule, computed a row of up to 32 conv
 * columns at a time in loops the compiler vectorizes (each conv output is still bias +
 * taps in row-major order, one fused multiply-add each, so the same bits). */
static void conv_pool_forward_one(const cnn *m, const float *restrict img, int f, float *restrict pf,
                                  unsigned char *restrict af) {
    int S = m->side, P = m->pool_side, F = m->filters, W2 = 2 * P;
    float w[9], bias = m->bc[f];
    for (int k = 0; k < 9; k++) w[k] = m->Wc[k * F + f];
    for (int cx0 = 0; cx0 < W2; cx0 += 32) {
        int n = W2 - cx0 < 32 ? W2 - cx0 : 32;        /* conv columns of the chunk (even) */
        for (int py = 0; py < P; py++) {
            float conv[2][32];                        /* ReLU(conv) of conv rows 2py, 2py + 1 */
            for (int c = 0; c < 2; c++) {
                float *restrict v = conv[c];
                for (int x = 0; x < n; x++) v[x] = bias;
                for (int ky = 0; ky < 3; ky++) {
                    const float *restrict row = img + (long)(2 * py + c + ky) * S + cx0;
                    for (int kx = 0; kx < 3; kx++)
                        for (int x = 0; x < n; x++) v[x] = fmaf(w[ky * 3 + kx], row[x + kx], v[x]);
                }
                for (int x = 0; x < n; x++) v[x] = v[x] > 0.0f ? v[x] : 0.0f;
            }
            for (int i = 0; i < n / 2; i++) {         /* the window (0,0) (0,1) (1,0) (1,1), strict > */
                float best = conv[0][2 * i];
                int which = 0;
                if (conv[0][2 * i + 1] > best) { best = conv[0][2 * i + 1]; which = 1; }
                if (conv[1][2 * i] > best) { best = conv[1][2 * i]; which = 2; }
                if (conv[1][2 * i + 1] > best) { best = conv[1][2 * i + 1]; which = 3; }
                pf[py * P + cx0 / 2 + i] = best;
                af[py * P + cx0 / 2 + i] = (unsigned char)which;
            }
        }
    }
}
#endif

/* The next sample's image, requested while this sample is convolved: the images are
 * gathered at random from a training set far larger than the caches. */
static inline void prefetch_image(const float *img, long SS) {
    for (long k = 0; k < SS; k += 16) __builtin_prefetch(img + k, 0, 3);
}

/* conv + ReLU + pool of `rows` samples: `omp for collapse(2)` over (sample x filter),
 * report 003's listing 1; the static schedule gives each thread a contiguous block of
 * samples, all filters of each, so every image is read by one thread only. Sample b is
 * base + idx[b] (or base + b) images in. Called by every thread; no barrier at the end.
 * Evaluation uses it; training uses conv_pool_forward_rows (see train_step). */
static void conv_pool_forward(cnn *m, const float *base, const uint32_t *idx, int rows) {
    int F = m->filters;
    long SS = (long)m->side * m->side;
#pragma omp for collapse(2) schedule(static) nowait
    for (int b = 0; b < rows; b++)
        for (int f = 0; f < F; f++) {
            if (f == 0 && b + 1 < rows) prefetch_image(base + (idx ? (long)idx[b + 1] : b + 1) * SS, SS);
            conv_pool_forward_one(m, base + (idx ? (long)idx[b] : b) * SS, f, m->pooled + b * m->prow + f * m->fstride,
                                  m->arg + b * m->arow + f * m->astride);
        }
}

/* conv + ReLU + pool of samples [r0, r1) of the step (sample b is d's idx[b]), every
 * filter, in the calling thread: the same (sample x filter) iterations as
 * conv_pool_forward, a thread's block of whole samples. Each sample is first converted
 * into images (the backward reads it there); the next one is fetched meanwhile. */
static void conv_pool_forward_rows(cnn *m, const dataset *d, const uint32_t *idx, long r0, long r1) {
    int F = m->filters;
    long SS = (long)m->side * m->side;
    for (long b = r0; b < r1; b++) {
        if (b + 1 < r1) prefetch_batch(d, idx + b + 1, 1);
        float *img = m->images + b * SS;
        dataset_rows(d, idx + b, 0, 1, img);
        for (int f = 0; f < F; f++)
            conv_pool_forward_one(m, img, f, m->pooled + b * m->prow + f * m->fstride, m->arg + b * m->arow + f * m->astride);
    }
}

/* logits of rows [r0, r1) = pooled . Wd^T + bd (serial's kernel, the bias in its epilogue) */
static void dense_forward(cnn *m, long r0, long r1) {
    if (r1 <= r0) return;
    epilogue e = EPI_PLAIN;
    e.bias = m->bd;
    matmul((int)(r1 - r0), CLASSES, m->features, m->pooled + r0 * m->prow, m->prow, 1, m->WdT, CLASSES,
           m->logits + r0 * CLASSES, CLASSES, &e);
}

// ----------------------------------------------------------------------------
// backward: the plain gradient sums of a thread's rows into its gradient buffer g
// (thread_grad; nothing updated yet)

/* dL/dpooled of rows [r0, r1) = dlogits . Wd */
static void dense_backward_input(cnn *m, long r0, long r1) {
    if (r1 <= r0) return;
    matmul((int)(r1 - r0), m->features, CLASSES, m->logits + r0 * CLASSES, CLASSES, 1, m->Wd, m->features,
           m->dpool + r0 * m->prow, m->prow, &EPI_PLAIN);
}

/* gWd of g = dlogits^T . pooled over the samples [r0, r1), each element summed over them
 * in order inside the kernel (an empty block gives zeros) */
static void dense_backward_weights(cnn *m, long r0, long r1, float *g) {
    matmul(CLASSES, m->features, (int)(r1 - r0), m->logits + r0 * CLASSES, 1, CLASSES, m->pooled + r0 * m->prow,
           m->prow, grad_view(m, g, m->gWd), m->features, &EPI_PLAIN);
}

/* gbd of g = column sums of dlogits over the samples [r0, r1), in sample order */
static void dense_backward_bias(cnn *m, long r0, long r1, float *g) {
    float *restrict db = grad_view(m, g, m->gbd);
    for (int c = 0; c < CLASSES; c++) db[c] = 0.0f;
    for (long i = r0; i < r1; i++) {
        const float *restrict d = m->logits + (long)i * CLASSES;
        for (int c = 0; c < CLASSES; c++) db[c] += d[c];
    }
}

/* The conv gradient of one (sample, filter) into slot[0..8] (taps) and slot[9] (bias);
 * pooled, arg, dpool point to that filter's block of the sample (P x P row-major).
 * dL/dconv is dL/dpooled at the window's argmax, times ReLU'(conv) = (pooled > 0) (the
 * argmax of a window whose values are all 0 is a dead ReLU), zero elsewhere; then
 * dL/dWc[ky][kx] = sum over positions of dL/dconv * input at (y + ky, x + kx). */
__attribute__((unused))
static void conv_backward_ref(const cnn *m, const float *restrict img, const float *restrict pooled,
                              const unsigned char *restrict arg, const float *restrict dpool, float *restrict slot) {
    int S = m->side, P = m->pool_side;
    float g[10] = {0};
    for (int py = 0; py < P; py++)
        for (int px = 0; px < P; px++) {
            long at = (long)py * P + px;
            if (!(pooled[at] > 0.0f)) continue;
            float d = dpool[at];
            int y = 2 * py + arg[at] / 2, x = 2 * px + arg[at] % 2;
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) g[ky * 3 + kx] = fmaf(d, img[(long)(y + ky) * S + x + kx], g[ky * 3 + kx]);
            g[9] += d;
        }
    memcpy(slot, g, sizeof g);
}

#if defined(__AVX512F__)
/* dL/dconv of one pooled row, rebuilt in registers: the pooled gradient, masked by
 * pooled > 0 (ReLU') and by argmax == q, re-interleaved to the conv columns of the top
 * row (t0 t1) and of the bottom row (u0 u1); db accumulates the bias gradient. */
static inline __attribute__((always_inline)) void
unpool(const float *pooled, const unsigned char *arg, const float *dpool, __mmask16 mp, __m512 *db,
       __m512 *t0, __m512 *t1, __m512 *u0, __m512 *u1) {
    const __m512 zero = _mm512_setzero_ps();
    const __m512i ilo = ILO_IDX, ihi = IHI_IDX;
    __m512 pv = _mm512_maskz_loadu_ps(mp, pooled), gv = _mm512_maskz_loadu_ps(mp, dpool);
    /* 16 argmax bytes (the buffer has slack at its end), lanes beyond mp unused */
    __m512i av = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)arg));
    gv = _mm512_maskz_mov_ps(_mm512_mask_cmp_ps_mask(mp, pv, zero, _CMP_GT_OQ), gv);
    *db = _mm512_add_ps(*db, gv);
    __m512 g0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(av, _mm512_setzero_si512()), gv),
           g1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(av, _mm512_set1_epi32(1)), gv),
           g2 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(av, _mm512_set1_epi32(2)), gv),
           g3 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(av, _mm512_set1_epi32(3)), gv);
    *t0 = _mm512_permutex2var_ps(g0, ilo, g1); *t1 = _mm512_permutex2var_ps(g0, ihi, g1);
    *u0 = _mm512_permutex2var_ps(g2, ilo, g3); *u1 = _mm512_permutex2var_ps(g2, ihi, g3);
}

/* NP pooled rows x 32 conv columns: dL/dconv in registers (d0..d3 = conv rows, l/h =
 * columns 0..15, 16..31), then the forward's load pattern: tap (ky, kx) accumulates
 * dL/dconv of conv row c times input row c + ky shifted by kx, in nine vectors. */
static inline __attribute__((always_inline)) void
conv_backward_pass(const int NP, const int MASKED, const float *row, int S, const float *pooled,
                   const unsigned char *arg, const float *dpool, int P, __mmask16 mlo, __mmask16 mhi,
                   __mmask16 mp, __m512 g[9], __m512 *db) {
    __m512 d0l, d0h, d1l, d1h, d2l = _mm512_setzero_ps(), d2h = d2l, d3l = d2l, d3h = d2l;
    unpool(pooled, arg, dpool, mp, db, &d0l, &d0h, &d1l, &d1h);
    if (NP > 1) unpool(pooled + P, arg + P, dpool + P, mp, db, &d2l, &d2h, &d3l, &d3h);
    __m512 g00 = g[0], g01 = g[1], g02 = g[2], g10 = g[3], g11 = g[4], g12 = g[5], g20 = g[6], g21 = g[7], g22 = g[8];
#define BWD_OP(c, ky) if (kx == 0) BWD_FMA(c, ky, 0) else if (kx == 1) BWD_FMA(c, ky, 1) else BWD_FMA(c, ky, 2)
#define BWD_FMA(c, ky, kxc) { g##ky##kxc = _mm512_fmadd_ps(d##c##h, hi, _mm512_fmadd_ps(d##c##l, lo, g##ky##kxc)); }
    PASS_ROWS(BWD_OP)
#undef BWD_OP
#undef BWD_FMA
    g[0] = g00; g[1] = g01; g[2] = g02; g[3] = g10; g[4] = g11; g[5] = g12; g[6] = g20; g[7] = g21; g[8] = g22;
}

/* noinline: gcc 12 inlined it into sample_pass once sample_pass timed the conv, and the
 * epoch got 6-7 % slower (pinned 1 x 1, 20,000 samples, alternating runs) */
static __attribute__((noinline)) void conv_backward_one(const cnn *m, const float *restrict img, const float *restrict pooled,
                              const unsigned char *restrict arg, const float *restrict dpool, float *restrict slot) {
    int S = m->side, P = m->pool_side, W2 = 2 * P;
    __m512 g[9], db = _mm512_setzero_ps();
    for (int k = 0; k < 9; k++) g[k] = _mm512_setzero_ps();
    long base = 0;
    for (int cx0 = 0; cx0 < W2; cx0 += 32) {
        __mmask16 mlo, mhi, mp;
        chunk_masks(W2 - cx0, &mlo, &mhi, &mp);
        for (int py = 0; py < P; py += 2) {
            const float *row = img + (long)(2 * py) * S + cx0;
            long at = base + (long)py * P + cx0 / 2;
            int np = P - py >= 2 ? 2 : 1;
            if (pass_masked(S, 2 * py + 2 * np + 1, cx0)) {
                if (np == 2) conv_backward_pass(2, 1, row, S, pooled + at, arg + at, dpool + at, P, mlo, mhi, mp, g, &db);
                else conv_backward_pass(1, 1, row, S, pooled + at, arg + at, dpool + at, P, mlo, mhi, mp, g, &db);
            } else {
                if (np == 2) conv_backward_pass(2, 0, row, S, pooled + at, arg + at, dpool + at, P, mlo, mhi, mp, g, &db);
                else conv_backward_pass(1, 0, row, S, pooled + at, arg + at, dpool + at, P, mlo, mhi, mp, g, &db);
            }
        }
    }
    for (int k = 0; k < 9; k++) slot[k] = _mm512_reduce_add_ps(g[k]);
    slot[9] = _mm512_reduce_add_ps(db);
}
#else
/* x[0] + ... + x[15] in the tree of GCC's _mm512_reduce_add_ps: halves, then quarters,
 * then pairs (a + b == b + a exactly, so only the grouping matters) */
static inline float reduce16(const float x[16]) {
    float h[8], q[4];
    for (int i = 0; i < 8; i++) h[i] = x[i + 8] + x[i];
    for (int i = 0; i < 4; i++) q[i] = h[i + 4] + h[i];
    return (q[0] + q[2]) + (q[1] + q[3]);
}

#if defined(__AVX2__) && defined(__FMA__)
/* AVX2: the same 16 lanes per tap in two ymm vectors (lanes 0..7: conv columns 0..7 then
 * 16..23 of the chunk; lanes 8..15: columns 8..15 then 24..31), filled in the AVX-512
 * kernel's order and added in its tree (reduce16), so the same bits. dL/dconv is rebuilt in
 * registers from the argmax as there; the loads are the forward's (pass_masked). */
static void conv_backward_one(const cnn *m, const float *restrict img, const float *restrict pooled,
                              const unsigned char *restrict arg, const float *restrict dpool, float *restrict slot) {
    int S = m->side, P = m->pool_side, W2 = 2 * P;
    const __m256 zero = _mm256_setzero_ps();
    __m256 g[9][2], db[2] = { zero, zero };
    for (int k = 0; k < 9; k++) g[k][0] = g[k][1] = zero;
    for (int cx0 = 0; cx0 < W2; cx0 += 32) {
        int n = W2 - cx0 < 32 ? W2 - cx0 : 32;        /* conv columns of the chunk (even) */
        const __m256i m0 = lane_mask(n, 0), m1 = lane_mask(n, 1), m2 = lane_mask(n, 2), m3 = lane_mask(n, 3);
        for (int py = 0; py < P; py++) {
            long at = (long)py * P + cx0 / 2;
            __m256 d[2][4];                           /* dL/dconv of conv rows 2py, 2py + 1, columns 8v.. */
            for (int h = 0; h < 2; h++) {             /* pooled columns 8h .. 8h + 7 */
                __m256i pm = lane_mask(n / 2, h);
                __m256 pv = _mm256_maskload_ps(pooled + at + 8 * h, pm), gv = _mm256_maskload_ps(dpool + at + 8 * h, pm);
                gv = _mm256_and_ps(gv, _mm256_cmp_ps(pv, zero, _CMP_GT_OQ));          /* ReLU' */
                db[h] = _mm256_add_ps(db[h], gv);
                /* 8 argmax bytes (the buffer has slack at its end; lanes beyond hold gv = 0) */
                __m256i av = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(arg + at + 8 * h)));
                __m256 q[4];
                for (int k = 0; k < 4; k++)
                    q[k] = _mm256_and_ps(gv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(av, _mm256_set1_epi32(k))));
                for (int c = 0; c < 2; c++) {         /* interleave (q 2c, q 2c+1) into conv columns 16h .. 16h + 15 */
                    __m256 lo = _mm256_unpacklo_ps(q[2 * c], q[2 * c + 1]), hi = _mm256_unpackhi_ps(q[2 * c], q[2 * c + 1]);
                    d[c][2 * h] = _mm256_permute2f128_ps(lo, hi, 0x20);
                    d[c][2 * h + 1] = _mm256_permute2f128_ps(lo, hi, 0x31);
                }
            }
            const float *row = img + (long)(2 * py) * S + cx0;
            int masked = pass_masked(S, 2 * py + 3, cx0);
            for (int c = 0; c < 2; c++)
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) {
                        const float *p = row + (long)(c + ky) * S + kx;
                        __m256 x0, x1, x2, x3;
                        if (masked) {
                            x0 = _mm256_maskload_ps(p, m0); x1 = _mm256_maskload_ps(p + 8, m1);
                            x2 = _mm256_maskload_ps(p + 16, m2); x3 = _mm256_maskload_ps(p + 24, m3);
                        } else {
                            x0 = _mm256_loadu_ps(p); x1 = _mm256_loadu_ps(p + 8);
                            x2 = _mm256_loadu_ps(p + 16); x3 = _mm256_loadu_ps(p + 24);
                        }
                        __m256 *gk = g[ky * 3 + kx];
                        gk[0] = _mm256_fmadd_ps(d[c][2], x2, _mm256_fmadd_ps(d[c][0], x0, gk[0]));
                        gk[1] = _mm256_fmadd_ps(d[c][3], x3, _mm256_fmadd_ps(d[c][1], x1, gk[1]));
                    }
        }
    }
    float lanes[16];
    for (int k = 0; k < 9; k++) {
        _mm256_storeu_ps(lanes, g[k][0]);
        _mm256_storeu_ps(lanes + 8, g[k][1]);
        slot[k] = reduce16(lanes);
    }
    _mm256_storeu_ps(lanes, db[0]);
    _mm256_storeu_ps(lanes + 8, db[1]);
    slot[9] = reduce16(lanes);
}
#else
/* Without AVX-512: the AVX-512 kernel's sums, lane for lane, in plain loops over 16 lanes
 * that the compiler vectorizes (two 8-float vectors with AVX2). Each tap keeps 16 partial
 * sums; lane l takes conv columns l and 16 + l of each 32-column chunk (l first), conv
 * rows in order, chunk after chunk; the bias gradient's lane l takes pooled column l; the
 * lanes are then added in _mm512_reduce_add_ps's tree. Columns beyond the chunk have a
 * zero gradient, whose products add nothing to a sum, so they read zeros here. Hence the
 * same bits as the AVX-512 kernel on every CPU: the golden hashes hold without AVX-512. */
static void conv_backward_one(const cnn *m, const float *restrict img, const float *restrict pooled,
                              const unsigned char *restrict arg, const float *restrict dpool, float *restrict slot) {
    int S = m->side, P = m->pool_side, W2 = 2 * P;
    float g[9][16], db[16];
    memset(g, 0, sizeof g);
    memset(db, 0, sizeof db);
    for (int cx0 = 0; cx0 < W2; cx0 += 32) {
        int n = W2 - cx0 < 32 ? W2 - cx0 : 32;        /* conv columns of the chunk (even) */
        for (int py = 0; py < P; py++) {
            float d[2][32], x[4][34];                 /* dL/dconv of conv rows 2py, 2py + 1; input rows */
            memset(d, 0, sizeof d);
            memset(x, 0, sizeof x);
            long at = (long)py * P + cx0 / 2;
            for (int i = 0; i < 16; i++) {
                float gv = i < n / 2 && pooled[at + i] > 0.0f ? dpool[at + i] : 0.0f;
                db[i] += gv;
                if (i < n / 2) d[arg[at + i] / 2][2 * i + arg[at + i] % 2] = gv;
            }
            for (int r = 0; r < 4; r++)
                memcpy(x[r], img + (long)(2 * py + r) * S + cx0, sizeof(float) * (size_t)(n + 2));
            for (int c = 0; c < 2; c++)
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) {
                        float *restrict gk = g[ky * 3 + kx];
                        const float *restrict xr = x[c + ky] + kx;
                        for (int l = 0; l < 16; l++)
                            gk[l] = fmaf(d[c][16 + l], xr[16 + l], fmaf(d[c][l], xr[l], gk[l]));
                    }
        }
    }
    for (int k = 0; k < 9; k++) slot[k] = reduce16(g[k]);
    slot[9] = reduce16(db);
}
#endif
#endif

/* The conv gradients of samples [r0, r1), one slot per (sample, filter), in the calling
 * thread (the samples it convolved in the forward pass, their images still in images). */
static void conv_backward_rows(cnn *m, long r0, long r1) {
    int F = m->filters;
    long SS = (long)m->side * m->side;
    for (long b = r0; b < r1; b++) {
        if (b + 1 < r1) prefetch_image(m->images + (b + 1) * SS, SS);
        for (int f = 0; f < F; f++) {
            long fo = b * m->prow + (long)f * m->fstride;
            conv_backward_one(m, m->images + b * SS, m->pooled + fo, m->arg + b * m->arow + f * m->astride,
                              m->dpool + fo, m->slot + (b * F + f) * SLOT);
        }
    }
}

/* gWc, gbc of g = the slots of samples [r0, r1) summed in sample order (F x SLOT floats
 * per sample), through the scratch s of F x SLOT floats */
static void conv_grad_sum(cnn *m, long r0, long r1, float *g, float *restrict s) {
    int F = m->filters, n = F * SLOT;
    float *gWc = grad_view(m, g, m->gWc), *gbc = grad_view(m, g, m->gbc);
    for (int i = 0; i < n; i++) s[i] = 0.0f;
    for (long b = r0; b < r1; b++) {
        const float *restrict sb = m->slot + b * n;
        for (int i = 0; i < n; i++) s[i] += sb[i];
    }
    for (int f = 0; f < F; f++) {
        for (int k = 0; k < 9; k++) gWc[k * F + f] = s[f * SLOT + k];
        gbc[f] = s[f * SLOT + 9];
    }
}

/* The threads' sums combined in thread order, into grad (thread 0's): grad += g_1, then
 * += g_2, ... — a fixed order, so a run is reproducible for a given T, and with T = 2 the
 * two blocks of a batch are added exactly as two ranks' sums are (1 x 2 == 2 x 1).
 * combine_small: the master, the conv and dense biases and conv weights (the small part);
 * combine_dense_slice: thread t, its block of columns of gWd (every class). */
static void add_into(float *restrict dst, const float *restrict src, long n) {
    for (long i = 0; i < n; i++) dst[i] += src[i];
}

static void combine_small(cnn *m, int active) {
    for (int u = 1; u < active; u++) {
        float *g = thread_grad(m, u);
        add_into(m->gWc, grad_view(m, g, m->gWc), 9L * m->filters);
        add_into(m->gbc, grad_view(m, g, m->gbc), m->filters);
        add_into(m->gbd, grad_view(m, g, m->gbd), CLASSES);
    }
}

static void combine_dense_slice(cnn *m, int active, int t, int T) {
    long j0, j1, n = m->features;
    split(n, t, T, &j0, &j1);
    for (int u = 1; u < active; u++) {
        const float *gu = grad_view(m, thread_grad(m, u), m->gWd);
        for (int c = 0; c < CLASSES; c++) add_into(m->gWd + c * n + j0, gu + c * n + j0, j1 - j0);
    }
}

// ----------------------------------------------------------------------------
// communication: the master thread's MPI calls, every one checked and timed

static double comm_seconds;      /* inside MPI calls during training, since the last reset */
static int sync_mode;            /* --sync */

/* COMM(MPI_Allreduce, (args)): call, check, add the seconds to comm_seconds */
#define COMM(fn, args) do { double t_ = timer_now(); TRACE(trace_mpi_cat(#fn), #fn) mpi_check(fn args, #fn); \
                            comm_seconds += timer_now() - t_; } while (0)

/* Master thread, after backward: the gradient sums over the ranks (allreduce: on every
 * rank; reduce-bcast: on rank 0 only) */
static void exchange_gradients(cnn *m) {
    int n = (int)m->params_alloc;
    if (sync_mode == SYNC_ALLREDUCE)
        COMM(MPI_Allreduce, (MPI_IN_PLACE, m->grad, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    else
        COMM(MPI_Reduce, (rank == 0 ? MPI_IN_PLACE : m->grad, m->grad, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD));
}

/* Master thread, reduce-bcast: rank 0's updated parameters to every rank */
static void broadcast_params(cnn *m) {
    COMM(MPI_Bcast, (m->params, (int)m->params_alloc, MPI_FLOAT, 0, MPI_COMM_WORLD));
}

// ----------------------------------------------------------------------------
// update: serial's formula, W = fmaf(-lr/B, g, W) with B the global batch. The master
// updates the 90 conv and bias parameters right after the exchange; then thread t
// updates its block of columns of Wd and writes the same block of rows of WdT.

static void sgd_update(float *restrict w, const float *restrict g, long n, float scale) {
    for (long i = 0; i < n; i++) w[i] = fmaf(scale, g[i], w[i]);
}

static void update_small(cnn *m, float scale) {
    sgd_update(m->Wc, m->gWc, 9L * m->filters, scale);
    sgd_update(m->bc, m->gbc, m->filters, scale);
    sgd_update(m->bd, m->gbd, CLASSES, scale);
}

static void update_slice(cnn *m, float scale, int t, int T) {
    long j0, j1, n = m->features;
    split(n, t, T, &j0, &j1);
    for (int c = 0; c < CLASSES; c++) sgd_update(m->Wd + c * n + j0, m->gWd + c * n + j0, j1 - j0, scale);
}

static void transpose_slice(cnn *m, int t, int T) {
    long j0, j1, n = m->features;
    split(n, t, T, &j0, &j1);
    for (long j = j0; j < j1; j++)
        for (int c = 0; c < CLASSES; c++) m->WdT[j * CLASSES + c] = m->Wd[c * n + j];
}

// ----------------------------------------------------------------------------
// sharing a step: thread t owns block t of the rank's samples (split: sizes differ by at
// most one) and takes pieces of it from the front; a thread done with its own block
// takes pieces from the back of another's. Who ran a sample changes no value: the
// per-sample results go to that sample's rows, and every sum over a block is one chain
// in sample order (the owner's prefix, then the taken tail continued after the barrier).

#define PIECE 4   /* samples per piece taken from the back of another thread's block: the
                     dense products are matrix products over a piece's rows, so a piece of
                     1 would run them one row at a time */

typedef struct {
    _Alignas(64) _Atomic uint64_t span;   /* samples [front, back) of the block not yet taken,
                                             front << 32 | back (own cache line: it is the
                                             one word the threads contend for) */
    long owner_end;                       /* the owner ran [its start, owner_end) itself; the
                                             rest of the block was taken by others */
} sample_block;
static sample_block blocks[MAX_THREADS];
static int test_hold_owner = -1;   /* tests/test_cnn.c: this thread starts its own block only
                                      once another has taken a piece of it */

/* Claims the next piece [*lo, *hi) of block b: from the front, half of what is left and
 * at least PIECE samples (the owner; `all`: everything, one thread alone), or PIECE
 * samples from the back (another thread). Returns 0 when nothing is left; *lo is then
 * where the owner's part ends. */
static int take_piece(sample_block *b, int from_front, int all, long *lo, long *hi) {
    uint64_t s = atomic_load_explicit(&b->span, memory_order_relaxed), next;
    for (;;) {
        long front = (long)(s >> 32), back = (long)(s & 0xffffffffu), left = back - front, n;
        if (left <= 0) { *lo = *hi = front; return 0; }
        if (from_front) {
            n = all ? left : left / 2 > PIECE ? left / 2 : PIECE;
            if (n > left) n = left;
            *lo = front; *hi = front + n;
            next = (uint64_t)(front + n) << 32 | (uint64_t)back;
        } else {
            n = PIECE < left ? PIECE : left;
            *lo = back - n; *hi = back;
            next = (uint64_t)front << 32 | (uint64_t)(back - n);
        }
        if (atomic_compare_exchange_weak_explicit(&b->span, &s, next, memory_order_relaxed, memory_order_relaxed))
            return 1;
    }
}

/* Everything that is per sample, for samples [r0, r1) of the step, in the calling
 * thread: conv + ReLU + pool, logits, softmax (loss and dL/dlogits), dL/dpooled, the conv
 * backward into each (sample, filter)'s slot. */
static void sample_pass(cnn *m, thread_stats *st, const dataset *d, const uint32_t *idx, long r0, long r1) {
    double c0 = timer_now();
    TRACE(TRACE_COMPUTE, "forward L1") conv_pool_forward_rows(m, d, idx, r0, r1);
    double c1 = timer_now();
    TRACE(TRACE_COMPUTE, "forward L2") dense_forward(m, r0, r1);
    TRACE(TRACE_COMPUTE, "loss") for (long i = r0; i < r1; i++) {
        unsigned char y = d->y[idx[i]];
        m->loss_row[i] = softmax_xent(m->logits + i * CLASSES, &y, 1, CLASSES, &st->correct);
    }
    TRACE(TRACE_COMPUTE, "backward L2") dense_backward_input(m, r0, r1);
    double c2 = timer_now();
    TRACE(TRACE_COMPUTE, "backward L1") conv_backward_rows(m, r0, r1);
    st->conv_seconds += (c1 - c0) + (timer_now() - c2);
    st->conv_samples += r1 - r0;
}

/* After the barrier, thread t's block of columns of every holding thread's dense weight
 * sums: the chain over what was taken from the end of that block, continued from the
 * owner's prefix (nothing taken: nothing to do) */
static void finish_taken_tails(cnn *m, int rows, int active, int t, int T) {
    long j0, j1, n = m->features;
    split(n, t, T, &j0, &j1);
    if (j1 <= j0) return;
    for (int u = 0; u < active; u++) {
        long lo, hi;
        split(rows, u, T, &lo, &hi);
        long from = blocks[u].owner_end;
        if (from >= hi) continue;
        matmul_continue(CLASSES, (int)(j1 - j0), (int)(hi - from), m->logits + from * CLASSES, 1, CLASSES,
                        m->pooled + from * m->prow + j0, m->prow, grad_view(m, thread_grad(m, u), m->gWd) + j0, n);
    }
}

/* The master, after the barrier: the conv and dense-bias sums of each holding thread's
 * block (slots and dL/dlogits in sample order) into that thread's buffer */
static void small_sums(cnn *m, int rows, int active, int T) {
    for (int u = 0; u < active; u++) {
        long lo, hi;
        split(rows, u, T, &lo, &hi);
        float *g = thread_grad(m, u);
        conv_grad_sum(m, lo, hi, g, m->slot_sum);
        dense_backward_bias(m, lo, hi, g);
    }
}

/* One SGD step on this rank's `rows` samples (images idx[0..rows) of d) of a global batch
 * of batch_rows samples; called by every thread of the team.
 *   Per-sample work, no barrier: thread t runs its block's samples front to back, in
 *   pieces (sample_pass), then the dense weight gradient over the part it ran as one
 *   product into its own buffer (thread_grad); then it takes pieces from the back of
 *   blocks not yet finished (a core the VM slows for a while keeps fewer of its samples:
 *   docs/cnn.md). Every activation the owner's product reads was written by its core.
 *   one rank   barrier; thread t continues the sums of every block over its taken tail
 *              for its block of columns of the dense weights, adds the threads' sums in
 *              thread order, applies them and rewrites that block of WdT; the master sums
 *              each block's conv slots and dense bias, adds them in thread order, applies
 *              them and sums the losses; barrier. 2 barriers per step, no MPI call.
 *   P ranks    barrier; the rank's sums combined into grad (as above); barrier; the
 *              master's MPI call and its update of the small part; barrier; the dense
 *              block updated (allreduce: every rank; reduce-bcast: rank 0, then a barrier,
 *              the master's MPI_Bcast, a barrier) and transposed; barrier (WdT complete
 *              before the next step's logits). 4 barriers (6 with reduce-bcast).
 * The sums are those of a static split — block t's sums in sample order, the blocks'
 * sums added in thread order — whoever ran which piece: a run is reproducible for a
 * given T, and 1 x 2 adds the same two block sums as 2 x 1 (bit-identical). Threads
 * after the first `rows` own no samples (a batch smaller than T) and hold no sums;
 * thread 0 always does, zeros for a rank without rows. The master adds this rank's
 * summed loss to *loss. */
static void train_step(cnn *m, thread_stats *st, const dataset *d, const uint32_t *idx, int rows, int batch_rows,
                       float lr, double *loss, int t, int T) {
    long r0, r1, lo, hi;
    split(rows, t, T, &r0, &r1);
    int active = rows < T ? (rows > 0 ? rows : 1) : T;   /* threads 0..active-1 hold sums */
    atomic_store_explicit(&blocks[t].span, (uint64_t)r0 << 32 | (uint64_t)r1, memory_order_relaxed);
    if (test_hold_owner >= 0 && t == test_hold_owner && T > 1) {   /* tests only: wait (up to 30 s: a loaded machine may not run the other thread for a while) until a piece is taken */
        double t0 = timer_now();
        while ((long)(atomic_load_explicit(&blocks[t].span, memory_order_relaxed) & 0xffffffffu) == r1 &&
               timer_now() - t0 < 30.0) {}
    }
    while (take_piece(&blocks[t], 1, T == 1, &lo, &hi)) sample_pass(m, st, d, idx, lo, hi);
    blocks[t].owner_end = lo;
    if (t < active) TRACE(TRACE_COMPUTE, "backward L2") dense_backward_weights(m, r0, lo, thread_grad(m, t));
    for (int found = T > 1; found;) {    /* others' blocks, until a sweep finds nothing */
        found = 0;
        for (int v = (t + 1) % T; v != t; v = (v + 1) % T)
            while (take_piece(&blocks[v], 0, 0, &lo, &hi)) { sample_pass(m, st, d, idx, lo, hi); found = 1; }
    }
    team_barrier(st);            /* every sample done, every owner's prefix summed */
    float scale = -lr / (float)batch_rows;
    TRACE(TRACE_COMM, "thread sum") {
        finish_taken_tails(m, rows, active, t, T);
        combine_dense_slice(m, active, t, T);
    }
#pragma omp master
    TRACE(TRACE_COMM, "thread sum") {
        small_sums(m, rows, active, T);
        combine_small(m, active);
        for (int i = 0; i < rows; i++) *loss += m->loss_row[i];
    }
    if (nranks == 1) {
        TRACE(TRACE_UPDATE, "update") update_slice(m, scale, t, T);
        TRACE(TRACE_UPDATE, "transpose W") transpose_slice(m, t, T);
#pragma omp master
        TRACE(TRACE_UPDATE, "update") update_small(m, scale);
        team_barrier(st);        /* parameters updated before the next step reads them */
        return;
    }
    team_barrier(st);            /* this rank's sums complete in grad */
#pragma omp master
    {
        exchange_gradients(m);
        if (sync_mode == SYNC_ALLREDUCE || rank == 0) TRACE(TRACE_UPDATE, "update") update_small(m, scale);
    }
    team_barrier(st);
    if (sync_mode == SYNC_ALLREDUCE || rank == 0) TRACE(TRACE_UPDATE, "update") update_slice(m, scale, t, T);
    if (sync_mode == SYNC_REDUCE_BCAST) {
        team_barrier(st);
#pragma omp master
        broadcast_params(m);
        team_barrier(st);
    }
    TRACE(TRACE_UPDATE, "transpose W") transpose_slice(m, t, T);
    team_barrier(st);            /* WdT complete before the next step's logits */
}

// ----------------------------------------------------------------------------
// data movement and evaluation

/* Correct predictions on the samples of d (this rank's test shard; may be empty), by T
 * threads in blocks of EVAL_BATCH rows; predictions optional. */
static long evaluate(cnn *m, thread_stats *st, int T, const dataset *d, unsigned char *predictions) {
    long SS = (long)m->side * m->side;
    for (int t = 0; t < T; t++) st[t].correct = 0;
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num();
        thread_stats *s = &st[t];
        for (long start = 0; start < d->n; start += EVAL_BATCH) {
            int rows = (int)(d->n - start < EVAL_BATCH ? d->n - start : EVAL_BATCH);
            if (t == 0) watchdog_beat();
#pragma omp for schedule(static)
            for (int b = 0; b < rows; b++) dataset_rows(d, NULL, start + b, 1, m->images + b * SS);
            conv_pool_forward(m, m->images, NULL, rows);
            team_barrier(s);
            long r0, r1;
            split(rows, t, T, &r0, &r1);
            dense_forward(m, r0, r1);
            for (long i = r0; i < r1; i++) {
                int p = argmax10(m->logits + i * CLASSES, CLASSES);
                s->correct += p == d->y[start + i];
                if (predictions) predictions[start + i] = (unsigned char)p;
            }
            team_barrier(s);     /* the next block overwrites pooled and logits */
        }
    }
    long correct = 0;
    for (int t = 0; t < T; t++) correct += st[t].correct;
    return correct;
}

// ----------------------------------------------------------------------------
// main

/* what the model and its per-thread buffers take on a rank, for the memory check before
 * loading: the dense layer's weights, transposed copy and T + 1 gradients, and the
 * pooled activations of a rank's rows (F x P x P per sample), each thread's packed copies
 * in the dense products */
static int team_size = 1, filter_count = 8;
static double model_bytes(const train_options *o, int features) {
    int pooled_side = ((int)sqrt((double)features) - 2) / 2;
    double pooled = (double)filter_count * pooled_side * pooled_side;
    long rows = (o->batch + nranks - 1) / nranks;
    rows = rows > 512 ? rows : 512;
    return sizeof(float) * (pooled * CLASSES * (team_size + 3) + 3.0 * rows * pooled) +
           team_size * gemm_pack_bytes(pooled > rows ? pooled : (double)rows);
}

#ifndef TESTING
int main(int argc, char **argv) {
    program_name = PROGRAM;
    /* FUNNELED: OpenMP threads run, but only the master thread (this one) calls MPI */
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, PROGRAM ": MPI_Init_thread failed\n");
        return 1;
    }
    atexit(finalize_at_exit);
    mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
    if (provided < MPI_THREAD_FUNNELED) {
        if (rank == 0)
            fprintf(stderr, PROGRAM ": the MPI library provides thread level %d, below MPI_THREAD_FUNNELED (%d)\n",
                    provided, MPI_THREAD_FUNNELED);
        return 1;
    }
    cnn_options co;
    parse_options(&co, argc, argv);
    train_options *o = &co.common;
    flags_agree(o, co.sync * 1000L + co.filters);
    sync_mode = co.sync;
    int T = co.threads;
    char err[IDX_ERR_LEN] = "";

    /* outputs (rank 0 writes them): checked before the work, not after it */
    agree_or_die(rank == 0 && (results_check_output(o->csv, "--csv", err, sizeof err) ||
                               checkpoint_check_flags(o, err, sizeof err) || schedule_check_flags(o, err, sizeof err) ||
                               trace_check_output(o, NULL, err, sizeof err)),
                 err, 2);
    agree_or_die(trace_open(o, T, rank, 64, err, sizeof err), err, 2);

    /* data: every rank checks the files; the sizes decide the same errors on every rank */
    sharded_data data;
    team_size = T;
    filter_count = co.filters;
    load_sharded_data(o, co.batch_per_rank, model_bytes, &data);
    dataset train = data.train, test = data.test;
    long train_n = data.train_n, test_n = data.test_n, test_count = data.test_count;
    if (train.side < 4)
        die_all("%s: %dx%d images are too small for the CNN (at least 4x4; see --image-size)", o->data_dir, train.side, train.side);

    /* threads: exactly T per rank, never fewer (a smaller team would mis-split the work) */
    const char *wait_policy = getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "";
    omp_set_dynamic(0);
    int team = 0;
#pragma omp parallel num_threads(T)
    {
#pragma omp single
        team = omp_get_num_threads();
    }
    agree_or_die(team != T, "the OpenMP runtime gave fewer threads than --threads (OMP_THREAD_LIMIT?)", 2);
    /* oversubscription: ranks on this node x threads vs cores, and cores this rank may use */
    MPI_Comm node;
    int local_ranks = 1, cores = (int)sysconf(_SC_NPROCESSORS_ONLN), usable = omp_get_num_procs(), few = 0;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    mpi_check(MPI_Comm_size(node, &local_ranks), "MPI_Comm_size");
    mpi_check(MPI_Comm_free(&node), "MPI_Comm_free");
    mpi_check(MPI_Allreduce(&(int){ T > usable }, &few, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (rank == 0 && few)
        fprintf(stderr, PROGRAM ": warning: a rank may use fewer cores than its %d threads (mpirun binds each rank "
                "to one core when ranks <= cores): launch with scripts/mpirun.sh --bind-to-none\n", T);
    if (rank == 0 && local_ranks * T > cores && strcmp(wait_policy, "passive") && strcmp(wait_policy, "PASSIVE"))
        fprintf(stderr, PROGRAM ": warning: %d ranks x %d threads on %d cores with OMP_WAIT_POLICY %s: spinning "
                "threads slow the others down; set OMP_WAIT_POLICY=passive\n", local_ranks, T, cores,
                *wait_policy ? wait_policy : "unset");

    /* model: rank r holds at most ceil(B / P) rows of a batch */
    cnn m;
    long rank_rows = (o->batch + nranks - 1) / nranks;
    int max_rows = (int)(rank_rows > EVAL_BATCH ? rank_rows : EVAL_BATCH);
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_n);
    thread_stats *st = aligned_alloc(64, sizeof(thread_stats) * (size_t)T);
    double *loss_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *acc_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *epoch_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *comm_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *sync_sec = malloc(sizeof(double) * (size_t)o->epochs);
    int bad = cnn_init(&m, train.side, co.filters, o->seed, max_rows, T) || !order || !st || !loss_curve || !acc_curve ||
          !epoch_sec || !comm_sec || !sync_sec;
    agree_or_die(bad, "out of memory", 1);
    if (m.params_alloc > INT_MAX) die_all("--filters/--image-size: %ld parameters are more than one MPI message can count", m.params_alloc);
    memset(st, 0, sizeof(thread_stats) * (size_t)T);
    char layers[64], variant[64];
    cnn_layers_string(&m, layers, sizeof layers);
    snprintf(variant, sizeof variant, "%s", SYNC[co.sync].name);

    /* checkpoint: --resume goes on after the epochs the file holds (then WdT, which the
     * updates keep current, is made again from the loaded Wd) */
    checkpoint ck;
    char net[32];
    snprintf(net, sizeof net, "filters=%d", co.filters);
    checkpoint_init(&ck, PROGRAM, variant, nranks, T, o, train.side, train_n, test_n, net, m.params, m.params_alloc,
                    (double *[]){ loss_curve, acc_curve, epoch_sec, comm_sec, sync_sec }, 5);
    resume_on_every_rank(&ck, o, 1);
    agree_or_die(target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err), err, 2);
    if (o->resume) transpose(m.Wd, CLASSES, m.features, m.WdT, CLASSES);
    if (rank == 0) {
        int S = m.side, C = m.conv_side, P = m.pool_side;
        printf("cnn: CNN %dx%dx1 -conv %dx3x3-> %dx%dx%d -relu, maxpool 2x2-> %dx%dx%d = %d -dense-> %d (%ld parameters), "
               "%s: %ld train / %ld test, batch %ld (%ld..%ld per rank%s), lr %g, seed %llu, sync %s, %d ranks x %d threads, "
               "OMP_WAIT_POLICY %s\n",
               S, S, m.filters, C, C, m.filters, P, P, m.filters, m.features, CLASSES, m.n_params, o->data_dir, train_n,
               test_n, o->batch, o->batch / nranks, rank_rows, co.batch_per_rank ? ", --batch-per-rank" : "", o->lr,
               (unsigned long long)o->seed, variant, nranks, T, *wait_policy ? wait_policy : "unset");
        if (o->resume) printf("cnn: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);
        fflush(stdout);
    }

    /* training: one parallel region per epoch; every thread walks every batch */
    watchdog_start();
    trace_start_mpi();
    double t_start = timer_now() - ck.seconds;
    for (int epoch = ck.epochs_done + 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        comm_seconds = 0.0;
        for (int t = 0; t < T; t++) {
            st[t].sync = 0.0;
            st[t].correct = 0;
            if (epoch <= ck.epochs_done + 2) { st[t].conv_seconds = 0.0; st[t].conv_samples = 0; }   /* the first warms up */
        }
        double loss_sum = 0.0, t0 = timer_now();
#pragma omp parallel num_threads(T)
        {
            int t = omp_get_thread_num();
            for (long start = 0; start < train_n; start += o->batch) {
                int rows = (int)(train_n - start < o->batch ? train_n - start : o->batch);
                long lo, count;   /* this rank's rows of the global batch */
                shard(rows, rank, nranks, &lo, &count);
                if (t == 0) watchdog_progress(epoch, start / o->batch + 1);
                double t_step = trace_step_begin_team(epoch);
                train_step(&m, &st[t], &train, order + start + lo, (int)count, rows,
                           lr_at(o, epoch, start / o->batch, steps_per_epoch(o, train_n)), &loss_sum, t, T);
                trace_step_end(t_step);
            }
        }
        double seconds = timer_now() - t0, comm = comm_seconds, sync = 0.0;
        long correct = 0;
        for (int t = 0; t < T; t++) { sync += st[t].sync; correct += st[t].correct; }
        long test_correct;
        trace_epoch_level(epoch);
        TRACE(TRACE_EVAL, "eval") test_correct = evaluate(&m, st, T, &test, NULL);
        /* totals over the ranks (every rank gets them, so all stop together on divergence) */
        double mine[5] = { loss_sum, (double)correct, (double)test_correct, comm, sync }, sum[5], slowest;
        mpi_check(MPI_Allreduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        mpi_check(MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        epoch_sec[epoch - 1] = slowest;
        comm_sec[epoch - 1] = sum[3] / nranks;
        sync_sec[epoch - 1] = sum[4] / nranks;
        loss_curve[epoch - 1] = sum[0] / (double)train_n;
        acc_curve[epoch - 1] = 100.0 * sum[2] / (double)test_n;
        char extra[64];
        snprintf(extra, sizeof extra, "comm %.3f s  sync %.3f s", comm_sec[epoch - 1], sync_sec[epoch - 1]);
        if (results_epoch(PROGRAM, rank == 0, o->quiet, epoch, o->epochs, loss_curve[epoch - 1],
                          100.0 * sum[1] / (double)train_n, acc_curve[epoch - 1], epoch_sec[epoch - 1], train_n, extra))
            return 1;
        int stop = target_reached(o, epoch, acc_curve[epoch - 1]);   /* the same sums on every rank */
        watchdog_beat();   /* a checkpoint being written is progress */
        TRACE_IF(checkpoint_due(o, epoch), TRACE_CHECKPOINT, "checkpoint")
            t_start += checkpoint_after_epoch_root(&ck, o, epoch, timer_now() - t_start);
        if (stop) break;
    }
    double total = timer_now() - t_start;

    /* the replicas must be bit-identical (every rank applied the same sums) */
    if (!replicas_identical(m.params, sizeof(float) * (size_t)m.params_alloc)) return 1;

    /* each worker's (rank-major, then thread) conv microseconds per sample, to rank 0:
     * how fast each core ran while this configuration trained (bench/cnn-bench.sh sets
     * them against the 1 x 1 run's; -1: the worker ran no samples) */
    double *conv_us = malloc(sizeof(double) * (size_t)T), *conv_all = malloc(sizeof(double) * (size_t)T * nranks);
    char *conv_text = malloc((size_t)T * nranks * 12 + 1);
    agree_or_die(!conv_us || !conv_all || !conv_text, "out of memory", 1);
    for (int t = 0; t < T; t++) conv_us[t] = st[t].conv_samples ? 1e6 * st[t].conv_seconds / (double)st[t].conv_samples : -1.0;
    mpi_check(MPI_Gather(conv_us, T, MPI_DOUBLE, conv_all, T, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");
    conv_text[0] = '\0';
    for (int w = 0, at = 0; rank == 0 && w < T * nranks; w++)
        at += conv_all[w] < 0 ? snprintf(conv_text + at, 12, "%s-", w ? "," : "")
                              : snprintf(conv_text + at, 12, "%s%.2f", w ? "," : "", conv_all[w] > 9999 ? 9999.0 : conv_all[w]);

    /* results: rank 0 alone */
    int status = 0;
    if (rank == 0) {
        double comm_median = results_epoch_median(comm_sec, o->epochs);
        double sync_median = results_epoch_median(sync_sec, o->epochs);
        result_row row;
        results_fill(&row, PROGRAM, variant, nranks, T, o, train.side, train_n, test_n, cnn_flops_per_sample(&m),
                     total, loss_curve, acc_curve, epoch_sec);
        row.hidden = layers;   /* "conv8": the CNN's layers, not --hidden */
        row.comm_seconds = comm_median;
        row.sync_seconds = sync_median;
        if (o->predict) {   /* rank 0 shows the first K test images, whichever shard holds them */
            dataset first;
            long k = o->predict < test_n ? o->predict : test_n;
            unsigned char *pred = malloc((size_t)k);
            if (!pred || dataset_load(o->data_dir, "t10k", 0, k, o->image_size, &first, err, sizeof err)) {
                fprintf(stderr, PROGRAM ": %s\n", pred ? err : "out of memory");
                return 1;
            }
            evaluate(&m, st, T, &first, pred);
            print_predictions(&first, pred, (int)k);
            dataset_free(&first);
            free(pred);
        }
        size_t extra_len = strlen(conv_text) + 160;
        char *extra = malloc(extra_len);
        if (extra)
            snprintf(extra, extra_len, "comm %.3f s (%.0f%%) | sync %.3f s | conv us/sample %s | replicas identical",
                     comm_median, 100.0 * comm_median / row.epoch_seconds_median, sync_median, conv_text);
        if (results_finish(&row, o->csv, NULL, extra ? extra : "replicas identical", err, sizeof err)) {
            status = 1;
            fprintf(stderr, PROGRAM ": %s\n", err);
        }
        free(extra);
    }

    if (trace_finish_mpi(PROGRAM, variant, o)) status = 1;
    cnn_free(&m);
    dataset_free(&train);
    if (test_count > 0) dataset_free(&test);
    free(order); free(st); free(loss_curve); free(acc_curve); free(epoch_sec); free(comm_sec); free(sync_sec);
    free(conv_us); free(conv_all); free(conv_text);
    return status;
}
#endif
