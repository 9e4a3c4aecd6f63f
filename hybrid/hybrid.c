/*
 * hybrid/hybrid.c — two-level data-parallel trainer: P MPI ranks x T OpenMP threads.
 *
 * Strategy: mpi/mpi.c's rank split with openmp/openmp.c's `--accum reduction` inside each
 * rank (seed report 001, figure 1). Each global mini-batch is cut into P rank parts and
 * each rank part into T thread slices; thread t of rank r computes serial's gradient
 * sums on its slice into its own buffer. Per step:
 *   1. threads -> rank: thread t sums its parameter slice over the threads' buffers in
 *      thread order (a fixed order: bit-identical reruns); one thread: no sum, its
 *      buffer becomes the rank's;
 *   2. rank -> ranks: the master thread alone calls MPI (--sync): allreduce (every rank
 *      then updates), reduce-bcast (rank 0 updates, then broadcasts the parameters) or
 *      hierarchical (common/mpi_util.h's hier_allreduce(): MPI_Reduce within each node,
 *      MPI_Allreduce among the node leaders, MPI_Bcast within the node; every rank then
 *      updates; PARTRAIN_RANKS_PER_NODE=K: pseudo-nodes of K ranks, for tests);
 *   3. the threads apply serial's W = fmaf(-lr/B, g, W) to their slices.
 * Only the float summation order differs from serial: 1 x 1 is serial bit for bit.
 * Communicated per step: the rank gradients (the size of the model) between ranks;
 * barriers per step: 4 (allreduce, hierarchical) or 6 (reduce-bcast).
 * Thread level: MPI_Init_thread(MPI_THREAD_FUNNELED), every MPI call by the master thread
 * between barriers; a library providing less: one line, exit 2 (test hook
 * PARTRAIN_FAKE_PROVIDED=single|funneled|serialized|multiple).
 * CSV: comm_seconds = seconds in MPI; sync_seconds = barrier waits summed over a rank's
 * threads (which include waiting for the master's MPI call). More ranks x threads than
 * cores need OMP_WAIT_POLICY=passive; a warning says so. Design: docs/hybrid.md.
 *
 * Compile: make hybrid   (mpicc -std=c11 -O3 -march=native -fopenmp -Icommon hybrid/hybrid.c common/{idx,options,results,checkpoint,watchdog}.c -lz -lm -pthread)
 * Run:     scripts/mpirun.sh --bind-to-none 4 hybrid/hybrid --threads 8 --data data/fashion --batch 512
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
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

#ifndef _OPENMP
#error "hybrid/hybrid.c needs OpenMP: compile with -fopenmp"
#endif

#define PROGRAM "hybrid"
#include "mpi_util.h"   /* rank, nranks, mpi_check(), agree_or_die(), shard(), ... */
#include "mpi_run.h"    /* dump_params(): --dump-params without W's row padding */
#include "watchdog.h"   /* --timeout-step: the stuck-rank watchdog */
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */
#define MAX_THREADS 256


// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

/* the variants: X(id, CSV name, --sync value, help) */
#define SYNC_MODES(X) \
    X(SYNC_ALLREDUCE,    "allreduce",    "allreduce",    "MPI_Allreduce of all gradients, every rank updates") \
    X(SYNC_REDUCE_BCAST, "reduce-bcast", "reduce-bcast", "MPI_Reduce to rank 0, rank 0 updates, MPI_Bcast") \
    X(SYNC_HIERARCHICAL, "hierarchical", "hierarchical", "MPI_Reduce in each node, MPI_Allreduce of node leaders, MPI_Bcast")
enum sync_kind { SYNC_MODES(VARIANT_ENUM) N_SYNC };
static const variant SYNC[] = { SYNC_MODES(VARIANT_ROW) };

typedef struct {
    train_options common;
    int threads;                /* --threads T (per rank) */
    int sync;                   /* --sync allreduce|reduce-bcast|hierarchical */
    const char *dump_params;    /* --dump-params FILE (testing) */
} hybrid_options;

static void usage(void) {
    printf("Usage: scripts/mpirun.sh --bind-to-none P hybrid/hybrid --threads T [options]\n"
           "Trains an MLP on MNIST-style IDX data, data-parallel over P MPI ranks x T OpenMP threads.\n\n");
    options_usage_common();
    printf("Hybrid:\n"
           "  --threads T           OpenMP threads per rank [OMP_NUM_THREADS if set, else 1]\n"
           "  --sync MODE           gradient exchange between ranks per step [allreduce]:\n");
    variant_usage(SYNC, N_SYNC);
    printf("  --dump-params FILE    after training, rank 0 writes the parameters (W1 b1 W2 ...,\n"
           "                        raw float32) to FILE (for the equivalence tests)\n"
           "Environment (test hook): PARTRAIN_FAKE_PROVIDED=single|funneled|serialized|multiple\n"
           "                        pretends MPI_Init_thread provided that thread level\n");
    watchdog_usage();
    options_usage_exit_status();
}

/* Ranks other than 0 parse with stderr muted: the flags are the same on every rank, so
 * rank 0 alone prints options_die()'s one-line error; every rank exits with status 2
 * (and finalizes MPI from the atexit handler). */
static void parse_options(hybrid_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->threads = 0;
    o->sync = SYNC_ALLREDUCE;
    o->dump_params = NULL;
    int saved = mute_stderr_off_root();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { if (rank == 0) usage(); exit(0); }
        if (!strcmp(argv[i], "--list-variants")) { if (rank == 0) variant_list("--sync", SYNC, N_SYNC); exit(0); }
        if (!strcmp(argv[i], "--threads")) {
            o->threads = (int)options_long(PROGRAM, "--threads", options_value(PROGRAM, argc, argv, &i), 1, MAX_THREADS);
            continue;
        }
        if (!strcmp(argv[i], "--sync")) {
            o->sync = variant_parse(PROGRAM, "--sync", options_value(PROGRAM, argc, argv, &i), SYNC, N_SYNC);
            continue;
        }
        if (!strcmp(argv[i], "--dump-params")) { o->dump_params = options_value(PROGRAM, argc, argv, &i); continue; }
        if (watchdog_parse(PROGRAM, argc, argv, &i)) continue;
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) continue;
        options_die(PROGRAM, "unknown option '%s'", argv[i]);
    }
    if (!o->threads) {
        /* OMP_NUM_THREADS as the runtime parsed it, else 1 (ranks usually fill the cores) */
        o->threads = getenv("OMP_NUM_THREADS") ? omp_get_max_threads() : 1;
        if (o->threads > MAX_THREADS && getenv("OMP_NUM_THREADS"))   /* as --threads: refused, not capped */
            options_die(PROGRAM, "OMP_NUM_THREADS=%s: at most %d threads", getenv("OMP_NUM_THREADS"), MAX_THREADS);
        if (o->threads > MAX_THREADS) o->threads = MAX_THREADS;
    }
    unmute_stderr(saved);
}

// ----------------------------------------------------------------------------
// model: one contiguous parameter buffer with per-layer views, and the rank's gradient
// in one buffer too (so one MPI call covers every layer)
//
// Layer l (1..L) maps size[l-1] inputs to size[l] outputs: W[l] is size[l-1] x size[l]
// row-major, its rows w_ld(size[l]) floats apart (common/maths.h), so the forward product
// is act[l-1] . W[l]; b[l] has size[l] entries. The gradients have the same order without
// W's row padding (as mpi's: the bytes between ranks are the model's, no more): layer l's
// weight gradient at gw_off[l], its rows size[l] floats apart, its bias gradient at gb_off[l].
// The activations and the thread's own gradient live in one `work` per thread, sized for
// that thread's slice of the rank's part of a batch.

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params, with padding that aligns each view */
    float *params;                /* all W and b, layer by layer: W1 b1 W2 b2 ... */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    float *wt[MAX_LAYERS + 1];    /* W[l]^T (l >= 2), kept current by whoever updates W[l] */
    long grad_alloc;              /* floats in a gradient: params' layout without the row padding */
    long gw_off[MAX_LAYERS + 1], gb_off[MAX_LAYERS + 1];   /* layer l's views in a gradient */
    float *grad;                  /* the rank's gradient (sum over its threads, then over ranks) */
} mlp;

typedef struct {
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[0] = input rows, act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of hidden layer l */
    float *grad;                  /* this thread's gradient, laid out like the rank's */
    unsigned char *y;             /* labels of the rows in act[0] */
} work;

/* One thread's counters, each on its own cache line (no false sharing). */
typedef struct {
    _Alignas(64) double loss;     /* summed cross-entropy of this thread's rows, this epoch */
    long correct;                 /* correct predictions among them (training or test) */
    double barrier;               /* seconds waiting at barriers, this epoch */
} thread_stats;

static int mlp_init(mlp *m, int inputs, const train_options *o) {
    memset(m, 0, sizeof *m);
    m->n_layers = o->n_hidden + 1;
    m->size[0] = inputs;
    for (int l = 1; l <= o->n_hidden; l++) m->size[l] = o->hidden[l - 1];
    m->size[m->n_layers] = IDX_CLASSES;
    m->activation = o->activation;
    for (int l = 1; l <= m->n_layers; l++) {
        m->n_params += (long)m->size[l - 1] * m->size[l] + m->size[l];
        m->params_alloc += PAD16((long)m->size[l - 1] * w_ld(m->size[l])) + PAD16(m->size[l]);
    }
    m->grad_alloc = grad_layout(m->size, m->n_layers, m->gw_off, m->gb_off);
    m->params = zeroed_floats(m->params_alloc);   /* padding stays zero */
    m->grad = zeroed_floats(m->grad_alloc);
    if (!m->params || !m->grad) return -1;
    float *p = m->params;
    for (int l = 1; l <= m->n_layers; l++) {
        m->W[l] = p; p += PAD16((long)m->size[l - 1] * w_ld(m->size[l]));
        m->b[l] = p; p += PAD16(m->size[l]);
        prng_init_dense_ld(m->W[l], w_ld(m->size[l]), m->size[l - 1], m->size[l], l, l == m->n_layers, o->seed);
        memset(m->b[l], 0, sizeof(float) * (size_t)m->size[l]);
        if (l >= 2) {
            if (!(m->wt[l] = alloc_floats((long)m->size[l - 1] * m->size[l]))) return -1;
            transpose_ld(m->W[l], w_ld(m->size[l]), m->size[l - 1], m->size[l], m->wt[l], m->size[l - 1]);
        }
    }
    return 0;
}

static int work_init(work *w, const mlp *m, int max_rows) {
    memset(w, 0, sizeof *w);
    w->max_rows = max_rows;
    for (int l = 0; l <= m->n_layers; l++) {
        w->act[l] = alloc_floats((long)max_rows * m->size[l]);
        w->delta[l] = alloc_floats((long)max_rows * m->size[l]);
        if (!w->act[l] || !w->delta[l]) return -1;
    }
    w->y = malloc((size_t)max_rows);
    if (!w->y) return -1;
    if (!(w->grad = zeroed_floats(m->grad_alloc))) return -1;   /* padding stays zero */
    return 0;
}

static void work_free(work *w, const mlp *m) {
    for (int l = 0; l <= m->n_layers; l++) { free(w->act[l]); free(w->delta[l]); }
    free(w->y); free(w->grad);
}

static void mlp_free(mlp *m) {
    free(m->params); free(m->grad);
    for (int l = 2; l <= m->n_layers; l++) free(m->wt[l]);
}

/* A barrier, timed: the wait is added to the thread's counters. */
static void team_barrier(thread_stats *st) {
    double t0 = timer_now();
    TRACE(TRACE_WAIT, "barrier") {
#pragma omp barrier
    }
    st->barrier += timer_now() - t0;
}

// ----------------------------------------------------------------------------
// forward: the calling thread does the whole layer on its own rows

/* act[l] = activation(act[l-1] . W[l] + b[l]); the last layer leaves logits. */
static void dense_forward(const mlp *m, work *w, int l, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    int hidden = l < m->n_layers;
    epilogue e = EPI_PLAIN;
    e.bias = m->b[l];
    if (hidden && m->activation != ACT_SIGMOID) e.act = m->activation;
    matmul(rows, out, in, w->act[l - 1], in, 1, m->W[l], w_ld(out), w->act[l], out, &e);
    if (hidden && m->activation == ACT_SIGMOID) sigmoid_inplace(w->act[l], (long)rows * out);
}

static void mlp_forward(const mlp *m, work *w, int rows) {
    for (int l = 1; l <= m->n_layers; l++) TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, w, l, rows);
}

// ----------------------------------------------------------------------------
// backward: dense_backward() writes the plain gradient of the thread's rows,
// g = act[l-1]^T . dZ (the product's epilogue with alpha 1, no accumulate), into the
// thread's buffer; the update comes after the two-level sum below. With P x T = 1 x 1
// that is serial's fused W += scale * A^T dZ taken apart: the same acc, then the same fmaf.

/* Layer l with dZ (dL/d pre-activation) in dz: the gradient for the layer below
 * (W[l]^T from m->wt: the old W), then this layer's weight and bias gradients. */
static void dense_backward(const mlp *m, work *w, int l, const float *dz, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    if (l > 1) {
        /* delta[l-1] = (dz . W^T) * act'(act[l-1]) */
        epilogue e = EPI_PLAIN;
        e.deriv = w->act[l - 1];
        e.deriv_act = m->activation;
        matmul(rows, in, out, dz, out, 1, m->wt[l], in, w->delta[l - 1], in, &e);
    }
    /* gW = act[l-1]^T . dz */
    matmul(in, out, rows, w->act[l - 1], 1, in, dz, out, w->grad + m->gw_off[l], out, &EPI_SHARED_SUMS);
    /* gb = column sums of dz */
    float *restrict db = w->grad + m->gb_off[l];
    for (int j = 0; j < out; j++) db[j] = 0.0f;
    for (int i = 0; i < rows; i++) {
        const float *restrict d = dz + (long)i * out;
        for (int j = 0; j < out; j++) db[j] += d[j];
    }
}

// ----------------------------------------------------------------------------
// communication: threads -> rank (fixed-order sum), rank -> ranks (MPI, master thread)

static double comm_seconds;      /* inside MPI calls during training, since the last reset */
static int sync_mode;            /* --sync */
static hier_comms hier;          /* hierarchical: the node and leader communicators */

/* COMM(MPI_Allreduce, (args)): call, check, add the seconds to comm_seconds. Only ever
 * run by the master thread (MPI_THREAD_FUNNELED), so comm_seconds needs no lock. */
#define COMM(fn, args) do { double t_ = timer_now(); TRACE(trace_mpi_cat(#fn), #fn) mpi_check(fn args, #fn); \
                            comm_seconds += timer_now() - t_; } while (0)

/* thread t's slices: rows [i0, i1) of every W and columns [j0, j1) of every b, in 16s so
 * that two threads never write the same cache line (of the parameters or a gradient) */
typedef struct { long i0[MAX_LAYERS + 1], i1[MAX_LAYERS + 1], j0[MAX_LAYERS + 1], j1[MAX_LAYERS + 1]; } slices;

static void my_slices(const mlp *m, int t, int T, slices *s) {
    for (int l = 1; l <= m->n_layers; l++) {
        split_units(m->size[l - 1], t, T, 16, &s->i0[l], &s->i1[l]);
        split_units(m->size[l], t, T, 16, &s->j0[l], &s->j1[l]);
    }
}

/* level 1, by every thread: its slices of the rank gradient = sum over the threads */
static void reduce_threads(mlp *m, float *const *g, int ng, const slices *s) {
    for (int l = 1; l <= m->n_layers; l++) {
        long out = m->size[l];
        sum_in_order(m->grad, g, ng, m->gw_off[l] + s->i0[l] * out, m->gw_off[l] + s->i1[l] * out);
        sum_in_order(m->grad, g, ng, m->gb_off[l] + s->j0[l], m->gb_off[l] + s->j1[l]);
    }
}

/* level 2, master thread only (between barriers): the rank gradients over the ranks */
static void exchange_gradients(mlp *m) {
    int n = (int)m->grad_alloc;
    if (sync_mode == SYNC_ALLREDUCE)
        COMM(MPI_Allreduce, (MPI_IN_PLACE, m->grad, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    else if (sync_mode == SYNC_HIERARCHICAL)
        COMM(hier_allreduce, (m->grad, n, &hier));
    else
        COMM(MPI_Reduce, (rank == 0 ? MPI_IN_PLACE : m->grad, m->grad, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD));
}

/* reduce-bcast, master thread only: rank 0's updated parameters to every rank */
static void broadcast_params(mlp *m) {
    COMM(MPI_Bcast, (m->params, (int)m->params_alloc, MPI_FLOAT, 0, MPI_COMM_WORLD));
}

// ----------------------------------------------------------------------------
// update: serial's formula on the thread's slices, W = fmaf(-lr/B, g, W), B global

static void update_slices(mlp *m, float scale, const slices *s) {
    for (int l = 1; l <= m->n_layers; l++) {
        sgd_update_rows(m->W[l], m->grad + m->gw_off[l], m->size[l], s->i0[l], s->i1[l], scale);
        float *restrict b = m->b[l];
        const float *restrict gb = m->grad + m->gb_off[l];
        for (long j = s->j0[l]; j < s->j1[l]; j++) b[j] = fmaf(scale, gb[j], b[j]);
    }
}

/* the thread's rows of each W[l] into the columns of W[l]^T used by the next backward */
static void transpose_slices(mlp *m, const slices *s) {
    for (int l = 2; l <= m->n_layers; l++) {
        int in = m->size[l - 1], out = m->size[l];
        long i0 = s->i0[l], i1 = s->i1[l];
        if (i1 > i0) transpose_ld(m->W[l] + i0 * w_ld(out), w_ld(out), (int)(i1 - i0), out, m->wt[l] + i0, in);
    }
}

/* One SGD step, called by every thread of the rank: thread t trains on its slice of
 * the rank's rows [idx, idx + rank_rows) of a global batch of batch_rows rows, then the
 * two-level sum and the update. A thread (or a rank) without rows still does its part
 * of the sums and joins every barrier and collective. */
static void train_step(mlp *m, work *ws, thread_stats *st, const dataset *d, const uint32_t *idx,
                       int rank_rows, int batch_rows, float lr, const uint32_t *next_idx, int next_rank_rows,
                       int t, int T) {
    int L = m->n_layers;
    work *w = &ws[t];
    long lo, hi, next_lo, next_hi;
    split_units(rank_rows, t, T, 1, &lo, &hi);
    split_units(next_rank_rows, t, T, 1, &next_lo, &next_hi);
    int n = (int)(hi - lo);
    if (n > 0) TRACE(TRACE_DATA, "batch") gather_batch(d, idx + lo, n, w->act[0], w->y);
    if (next_hi > next_lo)   /* this thread's rows of the next step, fetched while this one computes */
        TRACE(TRACE_DATA, "prefetch") prefetch_batch(d, next_idx + next_lo, (int)(next_hi - next_lo));
    if (n > 0) {
        mlp_forward(m, w, n);
        TRACE(TRACE_COMPUTE, "loss") st->loss += softmax_xent(w->act[L], w->y, n, m->size[L], &st->correct);
        TRACE(TRACE_COMPUTE, trace_layer("backward", L)) dense_backward(m, w, L, w->act[L], n);
        for (int l = L - 1; l >= 1; l--)
            TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_backward(m, w, l, w->delta[l], n);
    }
    slices s;
    my_slices(m, t, T, &s);
    float *g[MAX_THREADS];
    int active = rank_rows < T ? rank_rows : T;   /* threads 0..active-1 had rows */
    for (int u = 0; u < active; u++) g[u] = ws[u].grad;
    float scale = -lr / (float)batch_rows;
    team_barrier(st);                              /* every thread's gradient is complete */
    if (T == 1 && active == 1) {                   /* one thread: its gradient is the rank's (a sum of */
        float *spare = m->grad;                    /* one buffer is a copy), so the two buffers swap roles */
        m->grad = w->grad;                         /* (both have zero padding; the thread's is written */
        w->grad = spare;                           /* whole by every backward) */
    } else
        TRACE(TRACE_COMM, "thread sum") reduce_threads(m, g, active, &s);
    team_barrier(st);                              /* the rank's gradient is complete */
#pragma omp master
    exchange_gradients(m);
    team_barrier(st);                              /* the sum over ranks is in m->grad */
    if (sync_mode != SYNC_REDUCE_BCAST) {         /* allreduce, hierarchical: every rank has the sum */
        TRACE(TRACE_UPDATE, "update") update_slices(m, scale, &s);
    } else {
        if (rank == 0) TRACE(TRACE_UPDATE, "update") update_slices(m, scale, &s);
        team_barrier(st);                          /* rank 0's parameters are updated */
#pragma omp master
        broadcast_params(m);
        team_barrier(st);                          /* every rank holds rank 0's parameters */
    }
    TRACE(TRACE_UPDATE, "transpose W") transpose_slices(m, &s);
    team_barrier(st);                              /* W and W^T updated before the next forward */
}

// ----------------------------------------------------------------------------
// data movement and evaluation

/* Correct predictions on the samples of d (this rank's test shard; may be empty);
 * predictions optional. Every EVAL_BATCH rows are split over the threads, each forwards
 * its slice with its own buffers (no barrier); the counts are added in thread order. */
static long evaluate(const mlp *m, work *ws, thread_stats *st, int T, const dataset *d,
                     unsigned char *predictions) {
    int L = m->n_layers, classes = m->size[L];
    for (int t = 0; t < T; t++) st[t].correct = 0;
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num();
        work *w = &ws[t];
        for (long start = 0; start < d->n; start += EVAL_BATCH) {
            int rows = (int)(d->n - start < EVAL_BATCH ? d->n - start : EVAL_BATCH);
            if (t == 0) watchdog_beat();
            long lo, hi;
            split_units(rows, t, T, 1, &lo, &hi);
            int n = (int)(hi - lo);
            if (n == 0) continue;
            dataset_rows(d, NULL, start + lo, n, w->act[0]);
            mlp_forward(m, w, n);
            for (int i = 0; i < n; i++) {
                int p = argmax10(w->act[L] + (long)i * classes, classes);
                st[t].correct += p == d->y[start + lo + i];
                if (predictions) predictions[start + lo + i] = (unsigned char)p;
            }
        }
    }
    long correct = 0;
    for (int t = 0; t < T; t++) correct += st[t].correct;
    return correct;
}

// ----------------------------------------------------------------------------
// main

static const char *thread_level_name(int level) {
    return level == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
         : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED" : level == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE"
         : "an unknown level";
}

/* The thread level MPI provided, or the one PARTRAIN_FAKE_PROVIDED names (test hook). */
static int provided_level(int provided) {
    const char *fake = getenv("PARTRAIN_FAKE_PROVIDED");
    if (!fake || !*fake) return provided;
    if (!strcmp(fake, "single")) return MPI_THREAD_SINGLE;
    if (!strcmp(fake, "funneled")) return MPI_THREAD_FUNNELED;
    if (!strcmp(fake, "serialized")) return MPI_THREAD_SERIALIZED;
    if (!strcmp(fake, "multiple")) return MPI_THREAD_MULTIPLE;
    die_all("PARTRAIN_FAKE_PROVIDED=%s: not a thread level (single, funneled, serialized, multiple)", fake);
}

/* what the model and its per-thread buffers take on a rank, for the memory check before
 * loading (team_size: the threads per rank) */
static int team_size = 1;
static double model_bytes(const train_options *o, int features) {
    long rows = (o->batch + nranks - 1) / nranks;
    rows = rows > EVAL_BATCH ? rows : EVAL_BATCH;
    return dense_model_bytes(o, features, rows, team_size + 1) + team_size * gemm_pack_bytes_dense(o, features, rows);
}

#ifndef TESTING
int main(int argc, char **argv) {
    program_name = PROGRAM;
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, PROGRAM ": MPI_Init_thread failed\n");
        return 1;
    }
    atexit(finalize_at_exit);
    mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
    /* The levels are ordered SINGLE < FUNNELED < SERIALIZED < MULTIPLE (MPI standard). */
    provided = provided_level(provided);
    if (provided < MPI_THREAD_FUNNELED)
        die_all("the MPI library provides only %s, but OpenMP threads next to MPI calls from the master thread "
                "need MPI_THREAD_FUNNELED (use an MPI built with thread support, or mpi/mpi)",
                thread_level_name(provided));
    hybrid_options ho;
    parse_options(&ho, argc, argv);
    train_options *o = &ho.common;
    flags_agree(o, ho.sync);
    int T = ho.threads;
    sync_mode = ho.sync;
    char err[IDX_ERR_LEN] = "";
    if (sync_mode == SYNC_HIERARCHICAL) hier_init(&hier);

    /* outputs (rank 0 writes them): checked before the work, not after it */
    agree_or_die(rank == 0 && (results_check_output(o->csv, "--csv", err, sizeof err) ||
                               results_check_output(ho.dump_params, "--dump-params", err, sizeof err) ||
                               checkpoint_check_flags(o, err, sizeof err) || schedule_check_flags(o, err, sizeof err) ||
                               trace_check_output(o, (const char *[]){ ho.dump_params, NULL }, err, sizeof err)),
                 err, 2);
    agree_or_die(trace_open(o, T, rank, 4 * MAX_LAYERS + 16, err, sizeof err), err, 2);

    /* data: every rank checks the files; the sizes decide the same errors on every rank */
    sharded_data data;
    team_size = T;
    load_sharded_data(o, 0, model_bytes, &data);
    dataset train = data.train, test = data.test;
    long train_n = data.train_n, test_n = data.test_n, test_count = data.test_count;

    /* threads: exactly T per rank, never fewer (a smaller team would mis-split the work) */
    const char *wait_policy = getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "";
    int cores = omp_get_num_procs();
    if (rank == 0 && (long)nranks * T > cores && !*wait_policy)
        fprintf(stderr, PROGRAM ": warning: %d ranks x %d threads on %d cores with OMP_WAIT_POLICY unset: "
                "spinning threads slow the others down; set OMP_WAIT_POLICY=passive\n", nranks, T, cores);
    omp_set_dynamic(0);
    int team = 0;
#pragma omp parallel num_threads(T)
    {
#pragma omp single
        team = omp_get_num_threads();
    }
    if (team != T) die_all("the OpenMP runtime gave %d threads instead of %d (OMP_THREAD_LIMIT?)", team, T);

    /* model and buffers: one work per thread, for its slice of the rank's rows */
    mlp m;
    long rank_rows = (o->batch + nranks - 1) / nranks;
    long big = rank_rows > EVAL_BATCH ? rank_rows : EVAL_BATCH;
    int max_rows = (int)((big + T - 1) / T);
    work *ws = calloc((size_t)T, sizeof *ws);
    thread_stats *st = aligned_alloc(64, sizeof(thread_stats) * (size_t)T);
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_n);
    double *loss_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *acc_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *epoch_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *comm_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *sync_sec = malloc(sizeof(double) * (size_t)o->epochs);
    int bad = !ws || !st || !order || !loss_curve || !acc_curve || !epoch_sec || !comm_sec || !sync_sec ||
          mlp_init(&m, train.features, o);
    for (int i = 0; i < T && !bad; i++) bad = work_init(&ws[i], &m, max_rows);
    agree_or_die(bad, "out of memory", 1);
    if (m.params_alloc > INT_MAX) die_all("--hidden: %ld parameters are more than one MPI message can count", m.params_alloc);
    memset(st, 0, sizeof(thread_stats) * (size_t)T);
    char variant[64];
    snprintf(variant, sizeof variant, "%s", SYNC[ho.sync].name);

    /* checkpoint: --resume goes on after the epochs the file holds (then W^T, which the
     * updates keep current, is made again from the loaded W) */
    checkpoint ck;
    checkpoint_init(&ck, PROGRAM, variant, nranks, T, o, train.side, train_n, test_n, NULL, m.params, m.params_alloc,
                    (double *[]){ loss_curve, acc_curve, epoch_sec, comm_sec, sync_sec }, 5);
    resume_on_every_rank(&ck, o, 1);
    agree_or_die(target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err), err, 2);
    for (int l = 2; o->resume && l <= m.n_layers; l++)
        transpose_ld(m.W[l], w_ld(m.size[l]), m.size[l - 1], m.size[l], m.wt[l], m.size[l - 1]);
    if (rank == 0) {
        printf("hybrid: %s MLP %d", options_activation_name(o->activation), m.size[0]);
        for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
        printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld (%ld..%ld per rank), lr %g, seed %llu,"
               " sync %s, %d ranks x %d threads on %d cores, %s, OMP_WAIT_POLICY %s\n",
               m.n_params, o->data_dir, train_n, test_n, train.side, train.side, o->batch, o->batch / nranks,
               rank_rows, o->lr, (unsigned long long)o->seed, variant, nranks, T, cores,
               thread_level_name(provided), *wait_policy ? wait_policy : "unset");
        if (sync_mode == SYNC_HIERARCHICAL)
            printf("hybrid: hierarchical: %d node%s, up to %d rank%s each%s\n", hier.nodes, hier.nodes == 1 ? "" : "s",
                   hier.max_node_size, hier.max_node_size == 1 ? "" : "s",
                   hier.pseudo ? " (pseudo-nodes: PARTRAIN_RANKS_PER_NODE)" : "");
        if (o->resume) printf("hybrid: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);
        fflush(stdout);
    }

    /* training: one parallel region per epoch; MPI inside it from the master thread only */
    watchdog_start();
    trace_start_mpi();
    double t_start = timer_now() - ck.seconds;
    for (int epoch = ck.epochs_done + 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        memset(st, 0, sizeof(thread_stats) * (size_t)T);
        comm_seconds = 0.0;
        long batch = o->batch;
        long spe = steps_per_epoch(o, train_n);   /* lr_at(o, epoch, step, spe): the step's rate */
        double t0 = timer_now();
#pragma omp parallel num_threads(T)
        {
            int t = omp_get_thread_num();
            for (long start = 0; start < train_n; start += batch) {
                int rows = (int)(train_n - start < batch ? train_n - start : batch);
                long lo, count;   /* this rank's rows of the global batch */
                shard(rows, rank, nranks, &lo, &count);
                if (t == 0) watchdog_progress(epoch, start / batch + 1);
                float lr = lr_at(o, epoch, start / batch, spe);
                double t_step = trace_step_begin_team(epoch);
                long next = start + batch, next_lo = 0, next_count = 0;   /* the next step's rows, prefetched */
                if (next < train_n) shard((int)(train_n - next < batch ? train_n - next : batch), rank, nranks, &next_lo, &next_count);
                train_step(&m, ws, &st[t], &train, order + start + lo, (int)count, rows, lr,
                           next < train_n ? order + next + next_lo : NULL, (int)next_count, t, T);
                trace_step_end(t_step);
            }
        }
        double seconds = timer_now() - t0, comm = comm_seconds;
        double loss_sum = 0.0, barrier = 0.0;
        long correct = 0;
        for (int t = 0; t < T; t++) {        /* in thread order: the same sum every run */
            loss_sum += st[t].loss;
            correct += st[t].correct;
            barrier += st[t].barrier;
        }
        long test_correct;
        trace_epoch_level(epoch);
        TRACE(TRACE_EVAL, "eval") test_correct = evaluate(&m, ws, st, T, &test, NULL);
        /* totals over the ranks (every rank gets them, so all stop together on divergence) */
        double mine[5] = { loss_sum, (double)correct, (double)test_correct, comm, barrier }, sum[5], slowest;
        mpi_check(MPI_Allreduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        mpi_check(MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        epoch_sec[epoch - 1] = slowest;
        comm_sec[epoch - 1] = sum[3] / nranks;
        sync_sec[epoch - 1] = sum[4] / nranks;
        loss_curve[epoch - 1] = sum[0] / (double)train_n;
        acc_curve[epoch - 1] = 100.0 * sum[2] / (double)test_n;
        char extra[64];
        snprintf(extra, sizeof extra, "comm %.3f s", comm_sec[epoch - 1]);
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

    /* results: rank 0 alone */
    int status = 0;
    if (rank == 0) {
        double comm_median = results_epoch_median(comm_sec, o->epochs);
        double sync_median = results_epoch_median(sync_sec, o->epochs);
        result_row row;
        results_fill(&row, PROGRAM, variant, nranks, T, o, train.side, train_n, test_n,
                     dense_flops_per_sample(m.size, m.n_layers), total, loss_curve, acc_curve, epoch_sec);
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
            evaluate(&m, ws, st, T, &first, pred);
            print_predictions(&first, pred, (int)k);
            dataset_free(&first);
            free(pred);
        }
        if (ho.dump_params && dump_params(m.n_layers, m.size, m.W, m.b, ho.dump_params, err, sizeof err)) status = 1;
        else {
            char extra[128];
            snprintf(extra, sizeof extra, "comm %.3f s (%.0f%%) | barriers %.3f s (all threads) | replicas identical",
                     comm_median, 100.0 * comm_median / row.epoch_seconds_median, sync_median);
            if (results_finish(&row, o->csv, NULL, extra, err, sizeof err)) status = 1;
        }
        if (status) fprintf(stderr, PROGRAM ": %s\n", err);
    }

    if (trace_finish_mpi(PROGRAM, variant, o)) status = 1;
    for (int i = 0; i < T; i++) work_free(&ws[i], &m);
    hier_free(&hier);
    mlp_free(&m);
    dataset_free(&train);
    if (test_count > 0) dataset_free(&test);
    free(ws); free(st); free(order); free(loss_curve); free(acc_curve); free(epoch_sec); free(comm_sec);
    free(sync_sec);
    return status;
}
#endif
