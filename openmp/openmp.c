/*
 * openmp/openmp.c — shared-memory trainer: T OpenMP threads share every mini-batch SGD
 * step, in one of five ways (--accum), so their costs can be compared side by side.
 *
 * Strategy: serial's MLP and maths (common/gemm.h, common/maths.h) with serial's update
 * W = fmaf(-lr/B, g, W), g summed over the whole mini-batch of B rows for any T:
 *   critical   thread t takes a slice of the batch's rows, computes its own gradient
 *              buffer and adds it into one global gradient in `omp critical`; then each
 *              thread updates its slice of the parameters (seed report 001, listing 1).
 *   reduction  the same without a lock: thread t sums its parameter slice over the
 *              threads' buffers in thread order (fixed order: bit-identical reruns).
 *   owner      reduction's slices, their sums formed where they are used: after backward
 *              (deltas only) thread t computes its parameter slice's gradient from every
 *              thread's activations and dZ, one chain over thread 0's rows, then 1's, ...
 *              (serial's chain over the batch: serial's bits); no gradient buffer (the
 *              cross-core traffic cut from the model's size to the batch's activations).
 *   loop       one model and one set of activations, every loop of the step split over
 *              the team (seed report 000): products tile by tile by column panels of W,
 *              row-wise work by rows; each element is computed by one thread in serial's
 *              order, so the weights are serial's bit for bit at every T.
 *   model      thread t owns a block of layer 1's hidden units (its columns of W1, b1,
 *              rows of W2) and everything that touches them; the small rest of the net
 *              runs whole on every thread's replica. No gradient is ever combined.
 * What moves per step: critical/reduction each thread's gradient (the size of the
 *   model); owner and loop the activations; model layer 2's partial products (each
 *   thread converts the whole batch's input itself).
 * Synchronisation per step: critical 1 critical section + 2 barriers, reduction and owner 2,
 *   loop 3, model 1 barrier. sync_seconds: time in them, summed over the threads.
 * Threads: one `omp parallel` region per epoch; above the cores OMP_WAIT_POLICY=passive
 *   (a warning says so). Design, tolerances and determinism: docs/openmp.md.
 *
 * Compile: make openmp   (cc -std=c11 -O3 -march=native -fopenmp -Icommon openmp/openmp.c common/{idx,options,results,checkpoint}.c -lz -lm)
 * Run:     openmp/openmp --threads 8 --accum loop --data data/fashion --epochs 5 --batch 64
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "checkpoint.h"
#include "data.h"
#include "gemm.h"       /* matmul(), transpose(): the one matrix kernel */
#include "idx.h"
#include "maths.h"
#include "options.h"
#include "owner.h"      /* --accum owner: the owner-computes sums */
#include "prng.h"
#include "results.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"
#include "trace.h"     /* --trace: TRACE(cat, name) marks, one track per thread */

#ifndef _OPENMP
#error "openmp/openmp.c needs OpenMP: compile with -fopenmp"
#endif

#define PROGRAM "openmp"
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */
#define MAX_THREADS 256

// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

/* the variants: X(id, CSV name, --accum value, help) */
#define ACCUM_MODES(X) \
    X(ACCUM_CRITICAL,  "critical",  "critical",  "batch slices, gradients summed in omp critical") \
    X(ACCUM_REDUCTION, "reduction", "reduction", "batch slices, lock-free fixed-order sum per parameter slice") \
    X(ACCUM_OWNER,     "owner",     "owner",     "batch slices, each thread forms its parameter slice's sums from all rows (serial's bits)") \
    X(ACCUM_LOOP,      "loop",      "loop",      "one model, every product split over the threads") \
    X(ACCUM_MODEL,     "model",     "model",     "each thread owns a slice of layer 1's hidden units")
enum accum_kind { ACCUM_MODES(VARIANT_ENUM) N_ACCUM };
static const variant ACCUM[] = { ACCUM_MODES(VARIANT_ROW) };

typedef struct {
    train_options common;
    int threads;                /* --threads T */
    int accum;                  /* --accum critical|reduction|owner|loop|model */
} openmp_options;

static void usage(void) {
    printf("Usage: openmp/openmp [options]\n"
           "Trains an MLP on MNIST-style IDX data with OpenMP threads sharing each mini-batch.\n\n");
    options_usage_common();
    printf("OpenMP:\n"
           "  --threads T           threads [OMP_NUM_THREADS if set, else all cores: %d]\n"
           "  --accum MODE          how the threads share a step [loop]:\n",
           omp_get_num_procs());
    variant_usage(ACCUM, N_ACCUM);
    options_usage_exit_status();
}

static void parse_options(openmp_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->threads = 0;
    o->accum = ACCUM_LOOP;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(); exit(0); }
        if (!strcmp(argv[i], "--threads")) {
            o->threads = (int)options_long(PROGRAM, "--threads", options_value(PROGRAM, argc, argv, &i), 1, MAX_THREADS);
            continue;
        }
        if (!strcmp(argv[i], "--list-variants")) { variant_list("--accum", ACCUM, N_ACCUM); exit(0); }
        if (!strcmp(argv[i], "--accum")) {
            o->accum = variant_parse(PROGRAM, "--accum", options_value(PROGRAM, argc, argv, &i), ACCUM, N_ACCUM);
            continue;
        }
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) continue;
        options_die(PROGRAM, "unknown option '%s'", argv[i]);
    }
    if (!o->threads) {
        /* OMP_NUM_THREADS as the runtime parsed it (first level of a list), else every core */
        o->threads = getenv("OMP_NUM_THREADS") ? omp_get_max_threads() : omp_get_num_procs();
        if (o->threads > MAX_THREADS && getenv("OMP_NUM_THREADS"))   /* as --threads: refused, not capped */
            options_die(PROGRAM, "OMP_NUM_THREADS=%s: at most %d threads", getenv("OMP_NUM_THREADS"), MAX_THREADS);
        if (o->threads > MAX_THREADS) o->threads = MAX_THREADS;
    }
}

/* W^T[j + c][r] = panel[r][c] for rows i..i+MR of the panel (in x wd) of W that starts
 * at column j: the thread that updated the tile refreshes its transpose too (loop). */
static void transpose_tile(const float *restrict panel, int in, int wd, int i, int j, float *restrict wt) {
    int i1 = i + MR < in ? i + MR : in;
    for (int c = 0; c < wd; c++)
        for (int r = i; r < i1; r++) wt[(long)(j + c) * in + r] = panel[(long)r * wd + c];
}

// ----------------------------------------------------------------------------
// model: one contiguous parameter buffer with per-layer views
//
// Layer l (1..L) maps size[l-1] inputs to size[l] outputs: W[l] is size[l-1] x size[l]
// (so the forward product is act[l-1] . W[l]), b[l] has size[l] entries.
// W[l] is row-major, as serial's (rows w_ld(size[l]) floats apart), for critical,
// reduction and owner. For loop and model it is stored column
// panel by column panel (the NR columns of one kernel tile, 64 or 16, each panel row-major,
// the last one narrower): each thread owns whole panels, and so a contiguous part of
// memory. With row-major W two threads that own the two halves of every row slow each
// other down (most likely the hardware prefetchers pull the neighbour's half of a row
// into the wrong core; docs/NOTES.md). Same elements, same order of operations: only
// the addresses differ.
// The activations live in `work` buffers: one per thread for critical/reduction (sized
// for that thread's slice of a batch), one shared by the team for loop.

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params, with padding that aligns each view */
    float *params;                /* all W and b, layer by layer: W1 b1 W2 b2 ... */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    int panel;                    /* columns per stored panel of W: NR (loop) or 0 (row-major) */
    float *wt[MAX_LAYERS + 1];    /* W[l]^T (l >= 2), row-major, kept current by whoever updates W[l] */
    float *grad;                  /* critical: the global gradient sum, laid out like params */
    float *partial;               /* loop, batches over KC rows: the update's partial sums over
                                     the K blocks before the last, laid out like params */
    int arrivals;                 /* critical: threads that added their gradient this step */
} mlp;

typedef struct {
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[0] = input rows, act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of hidden layer l */
    float *grad;                  /* critical/reduction: this thread's gradient, laid out like params;
                                     owner: a block of its slice's sums (slice_block_rows) */
    unsigned char *y;             /* labels of the rows in act[0] */
    float *x2;                    /* loop, model: the other input buffer (the next batch is */
    unsigned char *y2;            /*       gathered during this one's step), and its labels */
    float *part[2];               /* model: this thread's partial layer-2 pre-activations, by step parity */
    float *db;                    /* model: column sums of a dZ (bias gradient) */
} work;

/* One thread's counters, each on its own cache line (no false sharing). */
typedef struct {
    _Alignas(64) double loss;     /* summed cross-entropy of this thread's rows, this epoch */
    long correct;                 /* correct predictions among them (training or test) */
    double critical;              /* seconds in the critical construct (entering + inside), this epoch */
    double barrier;               /* seconds waiting at barriers, this epoch */
} thread_stats;

/* offset of W[l] (and b[l]) in the parameter layout */
static long w_offset(const mlp *m, int l) { return m->W[l] - m->params; }
static long b_offset(const mlp *m, int l) { return m->b[l] - m->params; }

/* The stored panel of W[l] that starts at column j: its width, its leading dimension (a
 * panel's width; row-major W's rows lie w_ld(out) floats apart) and its address.
 * Row-major W is a single panel. */
static int panel_width(const mlp *m, int l, int j) {
    int out = m->size[l], p = m->panel ? m->panel : out;
    return out - j < p ? out - j : p;
}
static int panel_ld(const mlp *m, int l, int j) { return m->panel ? panel_width(m, l, j) : w_ld(m->size[l]); }
static float *panel_at(const mlp *m, int l, int j) { return m->W[l] + (long)m->size[l - 1] * j; }

static int mlp_init(mlp *m, int inputs, const train_options *o, int need_grad, int panels) {
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
    m->params = zeroed_floats(m->params_alloc);   /* padding stays zero */
    if (!m->params) return -1;
    if (need_grad && !(m->grad = zeroed_floats(m->params_alloc))) return -1;
    float *p = m->params;
    for (int l = 1; l <= m->n_layers; l++) {
        int in = m->size[l - 1], out = m->size[l];
        m->W[l] = p; p += PAD16((long)in * w_ld(out));
        m->b[l] = p; p += PAD16(out);
        prng_init_dense_ld(m->W[l], w_ld(out), in, out, l, l == m->n_layers, o->seed);
        memset(m->b[l], 0, sizeof(float) * (size_t)out);
        if (l >= 2) {
            if (!(m->wt[l] = alloc_floats((long)in * out))) return -1;
            transpose_ld(m->W[l], w_ld(out), in, out, m->wt[l], in);
        }
    }
    if (panels) {   /* re-store every W panel by panel (the initial values are row-major) */
        m->panel = NR;
        for (int l = 1; l <= m->n_layers; l++) {
            int in = m->size[l - 1], out = m->size[l], ld = w_ld(out);
            float *copy = alloc_floats((long)in * ld);
            if (!copy) return -1;
            memcpy(copy, m->W[l], sizeof(float) * (size_t)in * ld);
            for (int j = 0; j < out; j += NR) {
                int wd = panel_width(m, l, j);
                float *pw = panel_at(m, l, j);
                for (int r = 0; r < in; r++) memcpy(pw + (long)r * wd, copy + (long)r * ld + j, sizeof(float) * (size_t)wd);
            }
            memset(m->W[l] + (long)in * out, 0, sizeof(float) * (size_t)in * (ld - out));   /* the unused rest */
            free(copy);
        }
    }
    return 0;
}

static int work_init(work *w, const mlp *m, int max_rows, long grad_floats, int double_input) {
    memset(w, 0, sizeof *w);
    w->max_rows = max_rows;
    for (int l = 0; l <= m->n_layers; l++) {
        w->act[l] = alloc_floats((long)max_rows * m->size[l]);
        w->delta[l] = alloc_floats((long)max_rows * m->size[l]);
        if (!w->act[l] || !w->delta[l]) return -1;
    }
    w->y = malloc((size_t)max_rows);
    if (!w->y) return -1;
    if (grad_floats && !(w->grad = zeroed_floats(grad_floats))) return -1;   /* padding stays zero */
    if (double_input && (!(w->x2 = alloc_floats((long)max_rows * m->size[0])) || !(w->y2 = malloc((size_t)max_rows))))
        return -1;
    return 0;
}

/* owner: the floats of the largest block of a slice's sums (size[0..L]: the layer widths) */
static long owner_tile_floats(const int *size, int L) {
    long n = 16;
    for (int l = 1; l <= L; l++) {
        long b = (long)slice_block_rows(size[l]) * size[l];
        if (b > n) n = b;
        if (size[l] > n) n = size[l];   /* (the bias part) */
    }
    return n;
}

static void work_free(work *w, const mlp *m) {
    for (int l = 0; l <= m->n_layers; l++) { free(w->act[l]); free(w->delta[l]); }
    free(w->y); free(w->grad); free(w->x2); free(w->y2); free(w->part[0]); free(w->part[1]); free(w->db);
}

/* Bytes of what main() allocates besides the data, counted before the data is loaded (the
 * memory check), as mlp_init, work_init, work_init_model and mlp_replica size it: the
 * model (critical: and its global gradient; W^T of layers 2..L; loop and model: one W's
 * copy while re-storing it by panels), then per work (one for loop, else one per thread)
 * the activations and deltas of its rows (data parallel: its share of the batch or of an
 * evaluation block; loop and model: all of it), its gradient (critical, reduction) or
 * tile (owner) and, for loop and model, its second input; model's partial products and
 * every thread's replica of layers 2..L; loop's partial sums over K blocks; and each
 * thread's kernel scratch (its update's partial sums over K blocks, its packed copies). */
static double openmp_bytes(const train_options *o, int features, int accum, int T) {
    int L = o->n_hidden + 1, size[MAX_LAYERS + 1];
    size[0] = features;
    for (int l = 1; l < L; l++) size[l] = o->hidden[l - 1];
    size[L] = IDX_CLASSES;
    double params = 0, widest_w = 0, wt = 0, replica = 0, widths = 0, widest = 0;
    for (int l = 0; l <= L; l++) widths += size[l];
    for (int l = 1; l <= L; l++) {
        double w = (double)size[l - 1] * size[l];
        params += PAD16((long)size[l - 1] * w_ld(size[l])) + PAD16(size[l]);
        if (w > widest_w) widest_w = w;
        if (size[l] > widest) widest = size[l];
        if (l >= 2) { wt += w; replica += size[l] + (l >= 3 ? 2 * w : 0); }
    }
    int data_parallel = accum == ACCUM_CRITICAL || accum == ACCUM_REDUCTION || accum == ACCUM_OWNER;
    int paneled = accum == ACCUM_LOOP || accum == ACCUM_MODEL;
    double big = o->batch > EVAL_BATCH ? (double)o->batch : EVAL_BATCH;
    double rows = data_parallel ? ceil(big / T) : big, n_work = accum == ACCUM_LOOP ? 1 : T;
    double per_work = 2 * rows * widths + (paneled ? rows * features : 0)
                    + (accum == ACCUM_OWNER ? owner_tile_floats(size, L) : data_parallel ? params : 0);
    double floats = params * (accum == ACCUM_CRITICAL ? 2 : 1) + wt + (paneled ? widest_w : 0) + n_work * per_work;
    if (accum == ACCUM_MODEL) floats += T * (2.0 * (double)o->batch * size[2] + widest) + (T - 1) * replica;
    if (accum == ACCUM_LOOP && o->batch > KC) floats += params;
    if (data_parallel && rows > KC) floats += T * widest_w;   /* each thread's update over K blocks */
    return sizeof(float) * floats + n_work * rows * (paneled ? 2 : 1)   /* and the labels' bytes */
           + T * gemm_pack_bytes_dense(o, features, (long)big);      /* and each thread's packed copies */
}

/* model: the partial products of layer 2 (two, alternating by step) and a bias-gradient
 * buffer, for a thread that runs whole batches of up to `rows` rows */
static int work_init_model(work *w, const mlp *m, int rows) {
    int widest = 0;
    for (int l = 1; l <= m->n_layers; l++) widest = m->size[l] > widest ? m->size[l] : widest;
    w->part[0] = alloc_floats((long)rows * m->size[2]);
    w->part[1] = alloc_floats((long)rows * m->size[2]);
    w->db = alloc_floats(widest);
    return w->part[0] && w->part[1] && w->db ? 0 : -1;
}

/* model: thread t's view of the model. Layer 1's W and b and layer 2's W are the shared
 * ones (each thread touches only its own columns / rows); b[2] and every parameter of
 * layers 3..L (with W^T) are the thread's private replica, which every thread updates
 * identically. Thread 0's view is the shared model itself, so the shared model is
 * always current (evaluation reads it). */
static int mlp_replica(mlp *v, const mlp *m, int t) {
    *v = *m;
    if (t == 0) return 0;
    for (int l = 2; l <= m->n_layers; l++) {
        long nw = (long)m->size[l - 1] * m->size[l];
        if (!(v->b[l] = alloc_floats(m->size[l]))) return -1;
        memcpy(v->b[l], m->b[l], sizeof(float) * (size_t)m->size[l]);
        if (l == 2) continue;
        if (!(v->W[l] = alloc_floats(nw)) || !(v->wt[l] = alloc_floats(nw))) return -1;
        memcpy(v->W[l], m->W[l], sizeof(float) * (size_t)nw);
        memcpy(v->wt[l], m->wt[l], sizeof(float) * (size_t)nw);
    }
    return 0;
}

static void mlp_replica_free(mlp *v, const mlp *m) {
    for (int l = 2; l <= m->n_layers; l++) {
        if (v->b[l] != m->b[l]) free(v->b[l]);
        if (l > 2 && v->W[l] != m->W[l]) { free(v->W[l]); free(v->wt[l]); }
    }
}

/* After --resume loaded W and b: W^T, which the updates keep current, and model's
 * replicas of layers 2..L made again from them (copies: the same bits as before the stop). */
static void mlp_loaded(mlp *m, mlp *views, int T) {
    for (int l = 2; l <= m->n_layers; l++) {
        int in = m->size[l - 1];
        for (int j = 0, wd; j < m->size[l]; j += wd) {
            wd = panel_width(m, l, j);
            transpose_ld(panel_at(m, l, j), panel_ld(m, l, j), in, wd, m->wt[l] + (long)j * in, in);
        }
        for (int t = 1; views && t < T; t++) {
            long nw = (long)in * m->size[l];
            memcpy(views[t].b[l], m->b[l], sizeof(float) * (size_t)m->size[l]);
            if (l == 2) continue;
            memcpy(views[t].W[l], m->W[l], sizeof(float) * (size_t)nw);
            memcpy(views[t].wt[l], m->wt[l], sizeof(float) * (size_t)nw);
        }
    }
}

static void mlp_free(mlp *m) {
    free(m->params); free(m->grad); free(m->partial);
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
// forward
//
// critical/reduction: each thread runs serial's forward on its own rows and buffers.
// loop: layer 1 for all rows by column panels (dense_forward_team, then a barrier);
//   layers 2..L by rows, each thread its own rows straight through (train_step_loop).
//   The team shares a product's tiles out with an orphaned `omp for` (matmul_tile()); a
//   tile computes each of its elements over the whole K in serial's order, so who
//   computes a tile never changes the result.

/* act[l] = activation(act[l-1] . W[l] + b[l]); the last layer leaves logits. */
static void dense_forward(const mlp *m, work *w, int l, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    int hidden = l < m->n_layers;
    epilogue e = EPI_PLAIN;
    if (hidden && m->activation != ACT_SIGMOID) e.act = m->activation;
    for (int j = 0, wd; j < out; j += wd) {   /* row-major W: one panel, serial's one call */
        wd = panel_width(m, l, j);
        e.bias = m->b[l] + j;
        matmul(rows, wd, in, w->act[l - 1], in, 1, panel_at(m, l, j), panel_ld(m, l, j), w->act[l] + j, out, &e);
    }
    if (hidden && m->activation == ACT_SIGMOID) sigmoid_inplace(w->act[l], (long)rows * out);
}

static void mlp_forward(const mlp *m, work *w, int rows) {
    for (int l = 1; l <= m->n_layers; l++) TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, w, l, rows);
}

/* loop: act[1] = activation(x . W[1] + b[1]) for all rows, called by every thread of
 * the team. The tiles are shared out column panel first with a static schedule, like
 * the update of W[1] in dense_update_team: at T = 2 each thread reads and writes only its
 * own half of W[1] (0.8 MB for the default net), which stays in its core's cache. The
 * sigmoid, when used, is applied tile by tile by the thread that computed the tile. */
static void dense_forward_team(const mlp *m, work *w, const float *x, int rows) {
    int in = m->size[0], out = m->size[1];
    epilogue e = EPI_PLAIN;
    e.bias = m->b[1];
    if (m->activation != ACT_SIGMOID) e.act = m->activation;   /* layer 1 is always hidden */
    float *h = w->act[1];
    /* K (the inputs) in blocks of KC, as in matmul_tiles, the partial sums kept in h. The
     * loops of all blocks have the same iterations and static schedule, so OpenMP gives
     * each thread the same tiles in every block: its partial sums are its own, and no
     * barrier is needed between blocks. */
    for (int k0 = 0; k0 < in; k0 += KC) {
        int kc = in - k0 < KC ? in - k0 : KC, last = k0 + kc == in;
#pragma omp for collapse(2) schedule(static) nowait
        for (int j = 0; j < out; j += NR)
            for (int i = 0; i < rows; i += MR) {
                int wd = panel_width(m, 1, j);   /* the tile is the panel's width */
                const float *panel = panel_at(m, 1, j) + (long)k0 * wd, *from = k0 ? h + j : NULL;
                if (!last) {
                    matmul_tile_partial(i, 0, rows, wd, kc, x + k0, in, 1, panel, wd, h + j, out, from);
                    continue;
                }
                epilogue ej = e;
                ej.bias = m->b[1] + j;
                matmul_tile(EPI_FORWARD, i, 0, rows, wd, kc, x + k0, in, 1, panel, wd, h + j, out, &ej, from, out);
                if (m->activation == ACT_SIGMOID) {
                    int i1 = i + MR < rows ? i + MR : rows, j1 = j + NR < out ? j + NR : out;
                    for (int r = i; r < i1; r++) sigmoid_inplace(h + (long)r * out + j, j1 - j);
                }
            }
    }
}

// ----------------------------------------------------------------------------
// backward
//
// serial fuses the update into the weight-gradient product (W += scale * A^T dZ). Here:
// critical/reduction: dense_backward() writes the plain gradient of the thread's rows,
//   g = act[l-1]^T . dZ, into the thread's buffer; the update follows the combination
//   below. With T = 1 that is serial's fused update taken apart: the same acc, then the
//   same fmaf(scale, acc, W).
// loop: dense_delta() on the thread's rows; the fused update is dense_update_team().

/* delta[l-1] = (dz . W[l]^T) * act'(act[l-1]), from the copy W^T in m->wt[l] (made from
 * the W before this step's update, as serial's transpose of the old W). */
static void dense_delta(const mlp *m, work *w, int l, const float *dz, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    epilogue e = EPI_PLAIN;
    e.deriv = w->act[l - 1];
    e.deriv_act = m->activation;
    matmul(rows, in, out, dz, out, 1, m->wt[l], in, w->delta[l - 1], in, &e);
}

/* Layer l with dZ (dL/d pre-activation) in dz: the gradient for the layer below, then
 * this layer's weight and bias gradients into the thread's buffer. */
static void dense_backward(const mlp *m, work *w, int l, const float *dz, int rows, int accum) {
    int in = m->size[l - 1], out = m->size[l];
    if (l > 1) dense_delta(m, w, l, dz, rows);
    if (accum == ACCUM_OWNER) return;   /* its sums are formed after the barrier (update_owned) */
    /* gW = act[l-1]^T . dz */
    matmul(in, out, rows, w->act[l - 1], 1, in, dz, out, w->grad + w_offset(m, l), w_ld(out), &EPI_SHARED_SUMS);
    /* gb = column sums of dz */
    float *restrict db = w->grad + b_offset(m, l);
    for (int j = 0; j < out; j++) db[j] = 0.0f;
    for (int i = 0; i < rows; i++) {
        const float *restrict d = dz + (long)i * out;
        for (int j = 0; j < out; j++) db[j] += d[j];
    }
}

// ----------------------------------------------------------------------------
// communication: combining the threads' gradients (critical, reduction)

/* critical: the thread adds its whole gradient into the global sum, one thread at a
 * time; the first to arrive in a step copies instead (no zeroing pass). The order in
 * which threads enter is up to the runtime, so with T >= 3 the float sums (and the
 * results) can differ from run to run. The time from arriving at the construct to
 * leaving it is this variant's sync time. */
static void accumulate_critical(mlp *m, const work *w, thread_stats *st) {
    double t0 = timer_now(), waiting = trace_begin();
#pragma omp critical(partrain_gradient)
    {
        trace_end(TRACE_WAIT, "critical", waiting);
        float *restrict g = m->grad;
        const float *restrict mine = w->grad;
        TRACE(TRACE_COMM, "gradient sum") {
            if (m->arrivals++ == 0) memcpy(g, mine, sizeof(float) * (size_t)m->params_alloc);
            else for (long p = 0; p < m->params_alloc; p++) g[p] += mine[p];
        }
    }
    st->critical += timer_now() - t0;
}

// ----------------------------------------------------------------------------
// update
//
// critical/reduction: thread t applies the summed gradient to its own slice of the
//   parameters (rows of each W, columns of each b; reduction sums the slice over the
//   threads' buffers in thread order: sum_update() in common/maths.h) and transposes its
//   rows of W[l] into W[l]^T for the next backward.
// loop: the fused update of serial, W += scale * act^T . dZ, by column panels.

/* g: the ng gradient buffers to add, in order (reduction: the threads that had rows;
 * critical: the one global sum). */
static void update_slice(mlp *m, float *const *g, int ng, float scale, int t, int T) {
    for (int l = 1; l <= m->n_layers; l++) {
        int in = m->size[l - 1], out = m->size[l];
        long i0, i1, j0, j1;
        split_units(in, t, T, 16, &i0, &i1);
        split_units(out, t, T, 16, &j0, &j1);
        long w0 = w_offset(m, l) + i0 * w_ld(out), w1 = w_offset(m, l) + i1 * w_ld(out);
        long b0 = b_offset(m, l) + j0, b1 = b_offset(m, l) + j1;
        sum_update(m->params, g, ng, w0, w1, scale);
        sum_update(m->params, g, ng, b0, b1, scale);
        if (l >= 2 && i1 > i0) transpose_ld(m->W[l] + i0 * w_ld(out), w_ld(out), (int)(i1 - i0), out, m->wt[l] + i0, in);
    }
}

/* owner: thread t's slice of the parameters (update_slice's) updated from the gradient
 * sums it forms itself from the `active` threads' rows (slice_gradient_block in
 * common/owner.h: one chain over thread 0's rows, then 1's, ..., block by block in t's
 * own tile, ending in the update epilogue), so the bits are serial's; then its rows of
 * W[l]^T, as update_slice. */
static void update_owned(mlp *m, const work *ws, int batch_rows, int active, float scale, int t, int T) {
    int L = m->n_layers, n[MAX_THREADS];
    const float *a[MAX_THREADS], *d[MAX_THREADS];
    float *restrict tile = ws[t].grad;
    epilogue update = EPI_PLAIN;
    update.alpha = scale;
    update.accumulate = 1;
    update.shared_c = 1;   /* the slice of W the other threads read in their forward */
    for (int u = 0; u < active; u++) {
        long lo, hi;
        split_units(batch_rows, u, T, 1, &lo, &hi);
        n[u] = (int)(hi - lo);
    }
    for (int l = 1; l <= L; l++) {
        int in = m->size[l - 1], out = m->size[l], block = slice_block_rows(out);
        long i0, i1, j0, j1;
        split_units(in, t, T, 16, &i0, &i1);
        split_units(out, t, T, 16, &j0, &j1);
        for (int u = 0; u < active; u++) {
            a[u] = ws[u].act[l - 1];
            d[u] = l == L ? ws[u].act[L] : ws[u].delta[l];
        }
        for (long r0 = i0; r0 < i1; r0 += block) {
            int rows = (int)(i1 - r0 < block ? i1 - r0 : block);
            slice_gradient_block(m->W[l] + r0 * w_ld(out), w_ld(out), &update, tile, rows, out, r0, in, a, d, n, active);
        }
        slice_bias_sums(tile, j0, j1, out, d, n, active);
        for (long j = j0; j < j1; j++) m->b[l][j] = fmaf(scale, tile[j - j0], m->b[l][j]);
        if (l >= 2 && i1 > i0) transpose_ld(m->W[l] + i0 * w_ld(out), w_ld(out), (int)(i1 - i0), out, m->wt[l] + i0, in);
    }
}

/* loop: every layer's W[l] += scale * act[l-1]^T . dZ[l] (x is act[0]), called by every
 * thread of the team. Tiles shared out column panel first (see dense_forward_team);
 * each element is summed over the whole batch in serial's order, and the thread that
 * updated a tile refreshes that tile of W[l]^T for the next step's backward. b[l]: column
 * j summed over the rows by one thread, in serial's order. No barrier in between: the
 * layers' updates are independent. K (the batch) in blocks of KC when m->partial exists
 * (batches over KC rows, e.g. --batch full): as in dense_forward_team, every thread
 * gets the same tiles in every block, so it continues its own partial sums (kept in
 * m->partial, since the epilogue reads W's old values) without a barrier; the last
 * block applies the update. Unblocked, each tile would stream the whole batch's rows
 * through the cache once per tile (the difference: docs/NOTES.md). */
static void dense_update_team(mlp *m, const work *w, const float *x, int rows, float scale) {
    int L = m->n_layers;
    epilogue u = EPI_PLAIN;
    u.alpha = scale;
    u.accumulate = 1;
    for (int l = 1; l <= L; l++) {
        int in = m->size[l - 1], out = m->size[l];
        const float *a = l == 1 ? x : w->act[l - 1];
        const float *dz = l == L ? w->act[L] : w->delta[l];
        float *wt = m->wt[l];
        for (int k0 = 0; k0 < rows; k0 += KC) {
            int kc = rows - k0 <= KC || !m->partial ? rows - k0 : KC, last = k0 + kc == rows;
            const float *ak = a + (long)k0 * in, *dzk = dz + (long)k0 * out;
#pragma omp for collapse(2) schedule(static) nowait
            for (int j = 0; j < out; j += NR)
                for (int i = 0; i < in; i += MR) {
                    int wd = panel_width(m, l, j);
                    float *pw = panel_at(m, l, j);
                    float *pp = m->partial ? m->partial + (pw - m->params) : NULL;
                    const float *from = k0 ? pp : NULL;
                    if (!last) {
                        matmul_tile_partial(i, 0, in, wd, kc, ak, 1, in, dzk + j, out, pp, wd, from);
                        continue;
                    }
                    matmul_tile(EPI_UPDATE, i, 0, in, wd, kc, ak, 1, in, dzk + j, out, pw, wd, &u, from, wd);
                    if (wt) transpose_tile(pw, in, wd, i, j, wt);
                }
        }
        float *restrict b = m->b[l];
#pragma omp for schedule(static) nowait
        for (int j = 0; j < out; j++) {
            float db = 0.0f;
            for (int i = 0; i < rows; i++) db += dz[(long)i * out + j];
            b[j] = fmaf(scale, db, b[j]);
        }
    }
}

/* Data-parallel step (critical, reduction, owner), called by every thread: thread t trains on
 * its rows of the batch into its own gradient, then the gradients are combined and the
 * parameters updated. A thread without rows (batch < T) still does its part of the
 * update and every barrier. */
static void train_step_data(mlp *m, work *ws, thread_stats *st, const dataset *d, const uint32_t *idx,
                            int rows, float lr, int accum, int t, int T) {
    int L = m->n_layers;
    work *w = &ws[t];
    long lo, hi;
    split_units(rows, t, T, 1, &lo, &hi);
    int n = (int)(hi - lo);
    if (n > 0) {
        TRACE(TRACE_DATA, "batch") gather_batch(d, idx + lo, n, w->act[0], w->y);
        mlp_forward(m, w, n);
        TRACE(TRACE_COMPUTE, "loss") st->loss += softmax_xent(w->act[L], w->y, n, m->size[L], &st->correct);
        TRACE(TRACE_COMPUTE, trace_layer("backward", L)) dense_backward(m, w, L, w->act[L], n, accum);
        for (int l = L - 1; l >= 1; l--)
            TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_backward(m, w, l, w->delta[l], n, accum);
    }
    float scale = -lr / (float)rows;
    int active = rows < T ? rows : T;      /* threads 0..active-1 had rows */
    if (accum == ACCUM_CRITICAL) {
        if (n > 0) accumulate_critical(m, w, st);
        team_barrier(st);
        float *g[1] = { m->grad };
        TRACE(TRACE_UPDATE, "update") update_slice(m, g, 1, scale, t, T);
        if (t == 0) m->arrivals = 0;       /* read by the next step's critical, after the barrier */
    } else if (accum == ACCUM_OWNER) {
        team_barrier(st);                  /* every thread's activations and dZ are complete */
        TRACE(TRACE_UPDATE, "update") update_owned(m, ws, rows, active, scale, t, T);
    } else {
        team_barrier(st);                  /* every thread's gradient is complete */
        float *g[MAX_THREADS];
        for (int u = 0; u < active; u++) g[u] = ws[u].grad;
        TRACE(TRACE_UPDATE, "update") update_slice(m, g, active, scale, t, T);
    }
    team_barrier(st);                      /* W and W^T updated before the next forward */
}

/* loop: the input rows idx[0..rows) into x, y, shared out by rows */
static void gather_team(const dataset *d, const uint32_t *idx, int rows, float *x, unsigned char *y, int t, int T) {
    long lo, hi;
    split_units(rows, t, T, 1, &lo, &hi);
    gather_batch(d, idx + lo, (int)(hi - lo), x + (size_t)lo * d->features, y + lo);
}

/* loop: ask for the rows that gather_team() will copy for thread t, a phase early */
static void prefetch_team(const dataset *d, const uint32_t *idx, int rows, int t, int T) {
    long lo, hi;
    split_units(rows, t, T, 1, &lo, &hi);
    prefetch_batch(d, idx + lo, (int)(hi - lo));
}

/* Loop-level step, called by every thread; one copy of the model and the activations,
 * the batch's input already in x, y. Three phases, three barriers:
 *   1. layer 1 forward, tiles by column panels (dense_forward_team);
 *   2. thread t's rows (a contiguous slice, sizes differ by at most one) through layers
 *      2..L, the softmax and back down to dZ of layer 1: every product here works row by
 *      row, so no barrier is needed between the layers (the next batch's rows are
 *      prefetched first);
 *   3. every weight update by column panels (dense_update_team), and the next batch's
 *      rows gathered into the other input buffer (next_rows = 0: none).
 * Per step only activations cross between the cores (the batch's input and hidden
 * activations, 0.3 MB at batch 64), never a gradient. */
static void train_step_loop(mlp *m, work *w, thread_stats *st, const float *x, const unsigned char *y,
                            int rows, float lr, int t, int T, const dataset *d, const uint32_t *next_idx,
                            int next_rows, float *next_x, unsigned char *next_y) {
    int L = m->n_layers;
    TRACE(TRACE_COMPUTE, "forward L1") dense_forward_team(m, w, x, rows);
    team_barrier(st);
    if (next_rows > 0) TRACE(TRACE_DATA, "prefetch") prefetch_team(d, next_idx, next_rows, t, T);
    long lo, hi;
    split_units(rows, t, T, 1, &lo, &hi);
    int n = (int)(hi - lo);
    if (n > 0) {
        work v = *w;                       /* a view of rows lo..hi of the shared buffers */
        for (int l = 1; l <= L; l++) {
            v.act[l] = w->act[l] + lo * m->size[l];
            v.delta[l] = w->delta[l] + lo * m->size[l];
        }
        for (int l = 2; l <= L; l++) TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, &v, l, n);
        TRACE(TRACE_COMPUTE, "loss") st->loss += softmax_xent(v.act[L], y + lo, n, m->size[L], &st->correct);
        TRACE(TRACE_COMPUTE, trace_layer("backward", L)) dense_delta(m, &v, L, v.act[L], n);
        for (int l = L - 1; l >= 2; l--) TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_delta(m, &v, l, v.delta[l], n);
    }
    team_barrier(st);
    TRACE(TRACE_UPDATE, "update") dense_update_team(m, w, x, rows, -lr / (float)rows);
    if (next_rows > 0) TRACE(TRACE_DATA, "batch") gather_team(d, next_idx, next_rows, next_x, next_y, t, T);
    team_barrier(st);
}

/* model: b[j] += scale * (dz[0][j] + dz[1][j] + ... ) for columns j in [j0, j1) of a
 * rows x ld matrix dz, summed in row order as serial does; db: scratch of j1 - j0 floats */
static void bias_update(float *restrict b, float *restrict db, const float *dz, long ld, int rows,
                        long j0, long j1, float scale) {
    for (long j = j0; j < j1; j++) db[j - j0] = 0.0f;
    for (int i = 0; i < rows; i++) {
        const float *restrict d = dz + (long)i * ld;
        for (long j = j0; j < j1; j++) db[j - j0] += d[j];
    }
    for (long j = j0; j < j1; j++) b[j] = fmaf(scale, db[j - j0], b[j]);
}

/* model: W[l] += scale * act[l-1]^T . dz and b[l] += scale * column sums of dz for the
 * whole layer, in the calling thread (serial's update; model mode's replicated layers),
 * refreshing W[l]^T for the next backward. */
static void dense_update_whole(const mlp *m, const work *w, int l, const float *dz, int rows, float scale) {
    int in = m->size[l - 1], out = m->size[l];
    epilogue u = EPI_PLAIN;
    u.alpha = scale;
    u.accumulate = 1;
    for (int j = 0, wd; j < out; j += wd) {
        wd = panel_width(m, l, j);
        float *pw = panel_at(m, l, j);
        matmul(in, wd, rows, w->act[l - 1], 1, in, dz + j, out, pw, wd, &u);
        if (m->wt[l]) transpose(pw, in, wd, m->wt[l] + (long)j * in, in);
    }
    bias_update(m->b[l], w->db, dz, out, rows, 0, out, scale);
}

/* model: the hidden units of layer 1 that thread t owns, [*lo, *hi): whole kernel
 * panels, so its columns of W[1], rows of W[2] and columns of W[2]^T never share a
 * cache line with another thread's. Threads past the last panel own none. */
static void model_units(const mlp *m, int t, int T, long *lo, long *hi) {
    split_units(m->size[1], t, T, NR, lo, hi);
}

/* Model-parallel step (model), called by every thread with its own view v of the model
 * (mlp_replica) and its own buffers ws[t]. Thread t owns hidden units [c0, c1) of layer 1.
 *   1. act[1][:, c0:c1] = activation(x . W[1][:, c0:c1] + b[1][c0:c1])  (its panels of W[1])
 *   2. part_t = act[1][:, c0:c1] . W[2][c0:c1, :]: its share of layer 2's pre-activation
 *   3. gathers the whole next batch into its own other input buffer; barrier (the step's
 *      only one)
 *   4. act[2] = activation(part_0 + part_1 + ... + b[2]), in thread order, then layers
 *      3..L, the softmax and their backward and updates: every thread the same, on the
 *      same numbers, in the same order, so the replicas stay identical (a few percent of
 *      the arithmetic at the default sizes, cheaper than two more barriers)
 *   5. its rows of W[2] and b[2]'s replica: dZ2 -> delta[1][:, c0:c1] (from W[2]^T, the
 *      old W), then W[2][c0:c1, :] += scale * act[1][:, c0:c1]^T . dZ2
 *   6. its columns of W[1] and b[1] from x and delta[1][:, c0:c1]
 * Per step one thread reads from the others only their partial products (rows x size[2]
 * floats each), in two buffers (step parity). Each element of every product is computed
 * over its whole K in serial's order except layer 2's pre-activation, which is summed in T
 * pieces: T = 1 is serial bit for bit. Every thread converts the whole batch itself, into
 * its own x (with one shared x, each thread gathering its rows, every forward and backward
 * of layer 1 read the other rows from the other cores: slower than the conversion saved). */
static void train_step_model(const mlp *v, work *ws, thread_stats *st, const float *x, const unsigned char *y,
                             int rows, float lr, int parity, int t, int T, const dataset *d,
                             const uint32_t *next_idx, int next_rows, float *next_x, unsigned char *next_y) {
    int L = v->n_layers, in = v->size[0], n1 = v->size[1], n2 = v->size[2];
    int sigmoid = v->activation == ACT_SIGMOID;
    work *w = &ws[t];
    long c0, c1;
    model_units(v, t, T, &c0, &c1);
    int own = (int)(c1 - c0);
    float scale = -lr / (float)rows;
    float *h1 = w->act[1], *part = w->part[parity];

    /* the next batch's rows are scattered over the training set: ask for them now, copy
     * them after the forward pass (3) */
    if (next_rows > 0) TRACE(TRACE_DATA, "prefetch") prefetch_batch(d, next_idx, next_rows);

    /* 1, 2: forward through this thread's hidden units */
    if (own > 0) TRACE(TRACE_COMPUTE, "forward L1") {
        epilogue e = EPI_PLAIN;
        if (!sigmoid) e.act = v->activation;
        for (long j = c0, wd; j < c1; j += wd) {
            wd = panel_width(v, 1, (int)j);
            e.bias = v->b[1] + j;
            matmul(rows, (int)wd, in, x, in, 1, panel_at(v, 1, (int)j), wd, h1 + j, n1, &e);
            if (sigmoid) for (int r = 0; r < rows; r++) sigmoid_inplace(h1 + (long)r * n1 + j, wd);
        }
        for (int j = 0, wd; j < n2; j += wd) {
            wd = panel_width(v, 2, j);
            matmul(rows, wd, own, h1 + c0, n1, 1, panel_at(v, 2, j) + c0 * wd, wd, part + j, n2, &EPI_PLAIN);
        }
    }
    /* 3 */
    if (next_rows > 0) TRACE(TRACE_DATA, "batch") gather_batch(d, next_idx, next_rows, next_x, next_y);
    team_barrier(st);

    /* 4: layer 2's pre-activation from the partials, then the top of the network */
    int panels = (n1 + NR - 1) / NR;
    int owners = T < panels ? T : panels;  /* threads that own units (model_units): 0..owners-1 */
    float *z2 = w->act[2];                 /* logits when L = 2 */
    int act2 = L > 2 && !sigmoid ? v->activation : ACT_NONE;
    const float *restrict b2 = v->b[2];
    TRACE(TRACE_COMPUTE, "forward L2") for (int i = 0; i < rows; i++) {
        float *restrict zi = z2 + (long)i * n2;
        const float *restrict p0 = ws[0].part[parity] + (long)i * n2;
        for (int j = 0; j < n2; j++) zi[j] = p0[j];
        for (int u = 1; u < owners; u++) {
            const float *restrict pu = ws[u].part[parity] + (long)i * n2;
            for (int j = 0; j < n2; j++) zi[j] += pu[j];
        }
        for (int j = 0; j < n2; j++) {
            float z = zi[j] + b2[j];
            if (act2 == ACT_RELU) z = z > 0.0f ? z : 0.0f;
            else if (act2 == ACT_LEAKY_RELU) z = z > 0.0f ? z : LEAKY_RELU_SLOPE * z;
            zi[j] = z;
        }
        if (L > 2 && sigmoid) sigmoid_inplace(zi, n2);
    }
    for (int l = 3; l <= L; l++) TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(v, w, l, rows);
    long correct = 0;
    double loss;
    TRACE(TRACE_COMPUTE, "loss") loss = softmax_xent(w->act[L], y, rows, v->size[L], &correct);
    if (t == 0) { st->loss += loss; st->correct += correct; }   /* every thread computed the same */
    for (int l = L; l >= 3; l--) TRACE(TRACE_COMPUTE, trace_layer("backward", l)) {
        const float *dz = l == L ? w->act[L] : w->delta[l];
        dense_delta(v, w, l, dz, rows);
        dense_update_whole(v, w, l, dz, rows, scale);
    }

    /* 5: layer 2, this thread's rows of W[2] (and its replica of b[2]) */
    const float *dz2 = L == 2 ? w->act[L] : w->delta[2];
    epilogue u = EPI_PLAIN;
    u.alpha = scale;
    u.accumulate = 1;
    TRACE(TRACE_COMPUTE, "backward L2") if (own > 0) {
        epilogue e = EPI_PLAIN;
        e.deriv = h1 + c0;
        e.deriv_act = v->activation;
        matmul(rows, own, n2, dz2, n2, 1, v->wt[2] + c0, n1, w->delta[1] + c0, n1, &e);
        for (int j = 0, wd; j < n2; j += wd) {
            wd = panel_width(v, 2, j);
            float *pw = panel_at(v, 2, j) + c0 * wd;
            matmul(own, wd, rows, h1 + c0, 1, n1, dz2 + j, n2, pw, wd, &u);
            transpose(pw, own, wd, v->wt[2] + (long)j * n1 + c0, n1);
        }
    }
    TRACE(TRACE_COMPUTE, "backward L2") bias_update(v->b[2], w->db, dz2, n2, rows, 0, n2, scale);

    /* 6: layer 1, this thread's columns */
    if (own > 0) TRACE(TRACE_COMPUTE, "backward L1") {
        for (long j = c0, wd; j < c1; j += wd) {
            wd = panel_width(v, 1, (int)j);
            matmul(in, (int)wd, rows, x, 1, in, w->delta[1] + j, n1, panel_at(v, 1, (int)j), wd, &u);
        }
        bias_update(v->b[1], w->db, w->delta[1], n1, rows, c0, c1, scale);
    }
}

// ----------------------------------------------------------------------------
// data movement and evaluation

/* Percent of test samples classified correctly; predictions optional. Each block of
 * EVAL_BATCH test rows is split like a training batch: critical/reduction, each thread
 * forwards its slice with its own buffers (no barrier); loop, each thread its rows into
 * the shared input, layer 1 by the team, then each thread its rows. A row's prediction
 * does not depend on who computes it. */
static double evaluate(const mlp *m, work *ws, thread_stats *st, int T, int accum, const dataset *d,
                       unsigned char *predictions) {
    int L = m->n_layers, classes = m->size[L];
    for (int t = 0; t < T; t++) st[t].correct = 0;
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num();
        thread_stats *s = &st[t];
        for (long start = 0; start < d->n; start += EVAL_BATCH) {
            int rows = (int)(d->n - start < EVAL_BATCH ? d->n - start : EVAL_BATCH);
            long lo, hi;
            split_units(rows, t, T, 1, &lo, &hi);
            int n = (int)(hi - lo);
            work v;
            if (accum == ACCUM_LOOP) {
                float *x = ws[0].act[0];   /* the block's input, each thread converting its rows */
                dataset_rows(d, NULL, start + lo, n, x + lo * d->features);
                team_barrier(s);
                dense_forward_team(m, &ws[0], x, rows);
                team_barrier(s);
                v = ws[0];                 /* rows lo..hi of the shared buffers */
                for (int l = 1; l <= L; l++) v.act[l] = ws[0].act[l] + lo * m->size[l];
                for (int l = 2; l <= L && n > 0; l++) dense_forward(m, &v, l, n);
            } else if (n > 0) {
                v = ws[t];
                dataset_rows(d, NULL, start + lo, n, v.act[0]);
                mlp_forward(m, &v, n);
            }
            for (int i = 0; i < n; i++) {
                int p = argmax10(v.act[L] + (long)i * classes, classes);
                s->correct += p == d->y[start + lo + i];
                if (predictions) predictions[start + lo + i] = (unsigned char)p;
            }
            if (accum == ACCUM_LOOP) team_barrier(s);   /* act[1] is rewritten by the next block */
        }
    }
    long correct = 0;
    for (int t = 0; t < T; t++) correct += st[t].correct;
    return 100.0 * (double)correct / (double)d->n;
}

// ----------------------------------------------------------------------------
// main

#ifndef TESTING
int main(int argc, char **argv) {
    openmp_options oo;
    parse_options(&oo, argc, argv);
    train_options *o = &oo.common;
    int T = oo.threads, accum = oo.accum;
    char err[IDX_ERR_LEN];

    /* outputs: checked before the work, not after it */
    if (results_check_output(o->csv, "--csv", err, sizeof err) || checkpoint_check_flags(o, err, sizeof err) ||
        schedule_check_flags(o, err, sizeof err) || trace_check_output(o, NULL, err, sizeof err))
        options_die(PROGRAM, "%s", err);
    if (trace_open(o, T, 0, 6 * MAX_LAYERS + 8, err, sizeof err)) { fprintf(stderr, PROGRAM ": %s\n", err); return 2; }

    /* data */
    dataset train, test;
    data_plan plan;
    plan_data(PROGRAM, o, &plan);
    char msg[256];
    if (mem_short(mem_dataset_bytes(plan.train_n + plan.test_n, plan.side, plan.file_side) +
                  openmp_bytes(o, plan.side * plan.side, accum, T), 1, "data, model and per-thread buffers",
                  msg, sizeof msg))
        { fprintf(stderr, PROGRAM ": %s\n", msg); return 2; }
    load_data(PROGRAM, o, &plan, &train, &test);
    long train_n = train.n, test_n = test.n;

    /* threads: exactly T, never fewer (a team smaller than asked would mis-split the work) */
    const char *wait_policy = getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "";
    int cores = omp_get_num_procs();
    if (T > cores && !*wait_policy)
        fprintf(stderr, PROGRAM ": warning: %d threads on %d cores with OMP_WAIT_POLICY unset: "
                "spinning threads slow the others down; set OMP_WAIT_POLICY=passive\n", T, cores);
    omp_set_dynamic(0);
    int team = 0;
#pragma omp parallel num_threads(T)
    {
#pragma omp single
        team = omp_get_num_threads();
    }
    if (team != T) {
        fprintf(stderr, PROGRAM ": the OpenMP runtime gave %d threads instead of %d (OMP_THREAD_LIMIT?)\n", team, T);
        return 2;
    }

    /* model and buffers: critical/reduction, one work per thread for its slice of a batch
     * (and of an evaluation block); loop, one shared work for the whole batch */
    mlp m;
    int data_parallel = accum == ACCUM_CRITICAL || accum == ACCUM_REDUCTION || accum == ACCUM_OWNER;
    int paneled = accum == ACCUM_LOOP || accum == ACCUM_MODEL;
    long big = o->batch > EVAL_BATCH ? o->batch : EVAL_BATCH;
    int max_rows = (int)(data_parallel ? (big + T - 1) / T : big);
    int n_work = accum == ACCUM_LOOP ? 1 : T;
    if (accum == ACCUM_MODEL && o->n_hidden < 1) options_die(PROGRAM, "--accum model needs at least one hidden layer");
    mlp *views = accum == ACCUM_MODEL ? calloc((size_t)T, sizeof *views) : NULL;
    work *ws = calloc((size_t)n_work, sizeof *ws);
    thread_stats *st = aligned_alloc(64, sizeof(thread_stats) * (size_t)T);
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_n);
    unsigned char *pred = malloc((size_t)test_n);
    double *loss_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *acc_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *epoch_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *sync_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *barrier_sec = malloc(sizeof(double) * (size_t)o->epochs);
    int fail = !ws || !st || !order || !pred || !loss_curve || !acc_curve || !epoch_sec || !sync_sec || !barrier_sec ||
               mlp_init(&m, train.features, o, accum == ACCUM_CRITICAL, paneled);
    for (int i = 0; i < n_work && !fail; i++)
        fail = work_init(&ws[i], &m, max_rows, data_parallel ? (accum == ACCUM_OWNER ? owner_tile_floats(m.size, m.n_layers) : m.params_alloc) : 0,
                         paneled) ||
               (accum == ACCUM_MODEL && (work_init_model(&ws[i], &m, (int)o->batch) || mlp_replica(&views[i], &m, i)));
    if (accum == ACCUM_MODEL && !views) fail = 1;
    if (!fail && accum == ACCUM_LOOP && o->batch > KC) fail = !(m.partial = alloc_floats(m.params_alloc));
    if (fail) {
        fprintf(stderr, PROGRAM ": out of memory\n");
        return 1;
    }
    memset(st, 0, sizeof(thread_stats) * (size_t)T);
    const char *variant = ACCUM[accum].name;

    /* checkpoint: --resume goes on after the epochs the file holds */
    checkpoint ck;
    checkpoint_init(&ck, PROGRAM, variant, 1, T, o, train.side, train_n, test_n, NULL, m.params, m.params_alloc,
                    (double *[]){ loss_curve, acc_curve, epoch_sec, sync_sec, barrier_sec }, 5);
    if (o->resume && (checkpoint_load(o->resume, &ck, o->epochs, err, sizeof err) ||
                      target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err)))
        { fprintf(stderr, PROGRAM ": %s\n", err); return 2; }
    if (o->resume) mlp_loaded(&m, views, T);
    printf("openmp: %s MLP %d", options_activation_name(o->activation), m.size[0]);
    for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
    printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld, lr %g, seed %llu, accum %s, "
           "%d threads on %d cores, OMP_WAIT_POLICY %s\n",
           m.n_params, o->data_dir, train_n, test_n, train.side, train.side, o->batch, o->lr,
           (unsigned long long)o->seed, variant, T, cores, *wait_policy ? wait_policy : "unset");
    if (o->resume) printf("openmp: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);

    /* training: one parallel region per epoch */
    double t_start = timer_now() - ck.seconds;
    trace_start();
    for (int epoch = ck.epochs_done + 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        memset(st, 0, sizeof(thread_stats) * (size_t)T);
        long batch = o->batch;
        long spe = steps_per_epoch(o, train_n);   /* lr_at(o, epoch, step, spe): the step's rate */
        double t0 = timer_now();
#pragma omp parallel num_threads(T)
        {
            int t = omp_get_thread_num();
            if (accum == ACCUM_LOOP) {
                /* two input buffers: batch s in buf[s % 2], the next one gathered meanwhile */
                work *w = &ws[0];
                float *xb[2] = { w->act[0], w->x2 };
                unsigned char *yb[2] = { w->y, w->y2 };
                gather_team(&train, order, (int)(batch < train_n ? batch : train_n), xb[0], yb[0], t, T);
                team_barrier(&st[t]);
                int s = 0;
                for (long start = 0; start < train_n; start += batch, s ^= 1) {
                    int rows = (int)(train_n - start < batch ? train_n - start : batch);
                    float lr = lr_at(o, epoch, start / batch, spe);
                    long next = start + batch;
                    int next_rows = (int)(next >= train_n ? 0 : train_n - next < batch ? train_n - next : batch);
                    double t_step = trace_step_begin_team(epoch);
                    train_step_loop(&m, w, &st[t], xb[s], yb[s], rows, lr, t, T, &train, order + (next_rows ? next : 0), next_rows,
                                    xb[s ^ 1], yb[s ^ 1]);
                    trace_step_end(t_step);
                }
            } else if (accum == ACCUM_MODEL) {
                /* each thread's two input buffers: batch s in xb[s % 2], the next one gathered meanwhile */
                work *w = &ws[t];
                float *xb[2] = { w->act[0], w->x2 };
                unsigned char *yb[2] = { w->y, w->y2 };
                gather_batch(&train, order, (int)(batch < train_n ? batch : train_n), xb[0], yb[0]);
                int s = 0;
                for (long start = 0; start < train_n; start += batch, s++) {
                    int rows = (int)(train_n - start < batch ? train_n - start : batch);
                    float lr = lr_at(o, epoch, start / batch, spe);
                    long next = start + batch;
                    int next_rows = (int)(next >= train_n ? 0 : train_n - next < batch ? train_n - next : batch);
                    double t_step = trace_step_begin_team(epoch);
                    train_step_model(&views[t], ws, &st[t], xb[s & 1], yb[s & 1], rows, lr, s & 1, t, T, &train,
                                     order + (next_rows ? next : 0), next_rows, xb[!(s & 1)], yb[!(s & 1)]);
                    trace_step_end(t_step);
                }
            } else {
                for (long start = 0; start < train_n; start += batch) {
                    int rows = (int)(train_n - start < batch ? train_n - start : batch);
                    float lr = lr_at(o, epoch, start / batch, spe);
                    double t_step = trace_step_begin_team(epoch);
                    train_step_data(&m, ws, &st[t], &train, order + start, rows, lr, accum, t, T);
                    trace_step_end(t_step);
                }
            }
        }
        epoch_sec[epoch - 1] = timer_now() - t0;
        double loss_sum = 0.0;
        long correct = 0;
        sync_sec[epoch - 1] = barrier_sec[epoch - 1] = 0.0;
        for (int t = 0; t < T; t++) {        /* in thread order: the same sum every run */
            loss_sum += st[t].loss;
            correct += st[t].correct;
            sync_sec[epoch - 1] += accum == ACCUM_CRITICAL ? st[t].critical : st[t].barrier;
            barrier_sec[epoch - 1] += st[t].barrier;
        }
        loss_curve[epoch - 1] = loss_sum / (double)train_n;
        trace_epoch_level(epoch);
        TRACE(TRACE_EVAL, "eval") acc_curve[epoch - 1] = evaluate(&m, ws, st, T, accum, &test, pred);
        if (results_epoch(PROGRAM, 1, o->quiet, epoch, o->epochs, loss_curve[epoch - 1],
                          100.0 * (double)correct / (double)train_n, acc_curve[epoch - 1], epoch_sec[epoch - 1],
                          train_n, NULL))
            return 1;
        int stop = target_reached(o, epoch, acc_curve[epoch - 1]);
        TRACE_IF(checkpoint_due(o, epoch), TRACE_CHECKPOINT, "checkpoint")
            t_start += checkpoint_after_epoch(&ck, PROGRAM, o, epoch, timer_now() - t_start);
        if (stop) break;
    }
    double total = timer_now() - t_start;

    /* results */
    double sync_median = results_epoch_median(sync_sec, o->epochs);
    double barrier_median = results_epoch_median(barrier_sec, o->epochs);
    result_row row;
    results_fill(&row, PROGRAM, variant, 1, T, o, train.side, train_n, test_n, dense_flops_per_sample(m.size, m.n_layers),
                 total, loss_curve, acc_curve, epoch_sec);
    row.sync_seconds = sync_median;
    if (o->predict) {
        if (ck.epochs_done == o->epochs) evaluate(&m, ws, st, T, accum, &test, pred);   /* nothing left to train */
        print_predictions(&test, pred, o->predict);
    }
    char sync_what[96];
    if (accum == ACCUM_CRITICAL)
        snprintf(sync_what, sizeof sync_what, "sync critical %.3f s (+ barriers %.3f s) per epoch (all threads)",
                 sync_median, barrier_median);
    else
        snprintf(sync_what, sizeof sync_what, "sync barriers %.3f s per epoch (all threads)", barrier_median);
    if (results_finish(&row, o->csv, NULL, sync_what, err, sizeof err) || trace_finish(PROGRAM, variant, o, err, sizeof err)) {
        fprintf(stderr, PROGRAM ": %s\n", err);
        return 1;
    }

    for (int i = 0; i < n_work; i++) work_free(&ws[i], &m);
    for (int i = 0; views && i < T; i++) mlp_replica_free(&views[i], &m);
    free(views);
    mlp_free(&m);
    dataset_free(&train); dataset_free(&test);
    free(ws); free(st); free(order); free(pred); free(loss_curve); free(acc_curve); free(epoch_sec);
    free(sync_sec); free(barrier_sec);
    return 0;
}
#endif
