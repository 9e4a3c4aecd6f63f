/*
 * mpi/pipeline.c — model-parallel trainer: the MLP's layers split across P MPI ranks,
 * GPipe-style pipelining of micro-batches.
 *
 * Strategy: stage s (rank s) holds only its contiguous range of layers (--split, by
 * default the split whose heaviest stage has the fewest FLOPs). Each mini-batch is cut
 * into --microbatches M micro-batches. Forward: a stage receives a micro-batch's
 * activations from the stage before, runs its layers and sends the result on at once,
 * so the stages work on different micro-batches at the same time (fill). Backward, in
 * reverse order: a stage receives dL/dZ of its last layer, accumulates its gradient sums
 * over the micro-batches and sends dL/dZ of the layer below on (drain). After the last
 * micro-batch every stage applies serial's update to its own layers. Only the sums over
 * micro-batches add rounding: M = 1 is serial bit for bit at any P (docs/mpi.md).
 * Communicated: per micro-batch and stage boundary, the activations forward and the
 * gradient backward (rows x width floats), MPI_Isend/MPI_Irecv; no collective in training.
 * Bubble: per stage 1 - compute seconds / epoch seconds, printed beside GPipe's
 * (P-1)/(M+P-1); sync_seconds = idle seconds per epoch summed over the stages.
 * Data: stage 0 uses the images, the last stage the labels.
 * Threads: one per rank (MPI_Init). Errors: as mpi/mpi (common/mpi_util.h).
 *
 * Compile: make mpi   (mpicc -std=c11 -O3 -march=native -Icommon mpi/pipeline.c common/{idx,options,results,checkpoint,watchdog}.c -lz -lm -pthread)
 * Run:     scripts/mpirun.sh 3 mpi/pipeline --data data/fashion --batch 512 --microbatches 8
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

#include "checkpoint.h"
#include "checkpoint_mpi.h"
#include "data.h"
#include "gemm.h"       /* matmul(), transpose(): the one matrix kernel */
#include "idx.h"
#include "maths.h"
#include "options.h"
#include "prng.h"
#include "results.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"
#include "trace_mpi.h"  /* --trace: TRACE(cat, name) marks, the ranks' events gathered */


#define PROGRAM "pipeline"
#include "mpi_util.h"   /* rank, nranks, mpi_check(), agree_or_die(), shard(), ... */
#include "watchdog.h"   /* --timeout-step: the stuck-rank watchdog */
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */


// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

typedef struct {
    train_options common;
    int microbatches;           /* --microbatches M */
    int split[MAX_LAYERS];      /* --split: last layer of stages 0..P-2 */
    int n_split;                /* entries given (0: balanced default) */
} pipeline_options;

static void usage(void) {
    printf("Usage: scripts/mpirun.sh P mpi/pipeline [options]   (or mpirun -np P mpi/pipeline ...)\n"
           "Trains an MLP on MNIST-style IDX data with its layers split across P MPI ranks\n"
           "(pipeline model parallelism, GPipe schedule). P <= number of layers.\n\n");
    options_usage_common();
    printf("Pipeline:\n"
           "  --microbatches M      micro-batches per mini-batch [4]\n"
           "  --split A,B,...       the last layer of each stage but the last (P-1 increasing\n"
           "                        numbers in 1..L-1; e.g. 1 for P = 2: layer 1 | layers 2..L)\n"
           "                        [the split with the smallest largest-stage FLOPs]\n");
    watchdog_usage();
    options_usage_exit_status();
}

static void parse_split(pipeline_options *o, const char *value) {
    const char *p = value;
    o->n_split = 0;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < 1 || v > MAX_LAYERS)
            options_die(PROGRAM, "--split: expected layer numbers like 1,2, got '%s'", value);
        if (o->n_split == MAX_LAYERS - 1) options_die(PROGRAM, "--split: too many boundaries in '%s'", value);
        o->split[o->n_split++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) options_die(PROGRAM, "--split: trailing ',' in '%s'", value);
    }
    if (!o->n_split) options_die(PROGRAM, "--split: expected layer numbers like 1,2, got ''");
}

/* Ranks other than 0 parse with stderr muted: the flags are the same on every rank, so
 * rank 0 alone prints options_die()'s one-line error; every rank exits with status 2
 * (and finalizes MPI from the atexit handler). */
static void parse_options(pipeline_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->microbatches = 4;
    o->n_split = 0;
    int saved = mute_stderr_off_root();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { if (rank == 0) usage(); exit(0); }
        if (!strcmp(argv[i], "--list-variants")) {   /* the variant is gpipe-mM for any --microbatches M */
            if (rank == 0) printf("gpipe-m1\t--microbatches 1\tthe whole mini-batch at once: serial's sums, no overlap\n"
                                  "gpipe-m4\t--microbatches 4\tGPipe: 4 micro-batches flow through the stages (the default)\n");
            exit(0);
        }
        if (!strcmp(argv[i], "--microbatches")) {
            o->microbatches = (int)options_long(PROGRAM, "--microbatches", options_value(PROGRAM, argc, argv, &i), 1, 1000000);
            continue;
        }
        if (!strcmp(argv[i], "--split")) { parse_split(o, options_value(PROGRAM, argc, argv, &i)); continue; }
        if (watchdog_parse(PROGRAM, argc, argv, &i)) continue;
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) continue;
        options_die(PROGRAM, "unknown option '%s'", argv[i]);
    }
    unmute_stderr(saved);
}

// ----------------------------------------------------------------------------
// model: this stage's layers first..last of the network's 1..L, one contiguous
// parameter buffer with per-layer views, and gradient sums laid out like it
//
// Layer l maps size[l-1] inputs to size[l] outputs: W[l] is size[l-1] x size[l]
// row-major, its rows w_ld(size[l]) floats apart (common/maths.h), so the forward product
// is act[l-1] . W[l]; b[l] has size[l] entries. The gradient has the same layout.
// Buffers hold a whole mini-batch; micro-batch k uses its rows [lo_k, lo_k + n_k).

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer, of the whole network */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    int first, last;              /* this stage's layers */
    long n_params;                /* trainable parameters of the whole network */
    long params_alloc;            /* floats in params (this stage), with alignment padding */
    float *params;                /* this stage's W and b: W[first] b[first] ... */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    float *grad;                  /* gradient sums over the micro-batches, laid out like params */
    float *gW[MAX_LAYERS + 1], *gb[MAX_LAYERS + 1];
    /* work buffers, sized for max_rows samples */
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[first-1] = input rows (images or received), ..., act[last];
                                     act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of layer l: first-1 (sent back), hidden layers inside,
                                     last (received from the next stage) */
    float *wt[MAX_LAYERS + 1];    /* W[l] transposed, once per mini-batch, for the backward product */
} mlp;

static int mlp_init(mlp *m, int inputs, const train_options *o, int max_rows, int first, int last) {
    memset(m, 0, sizeof *m);
    m->n_layers = o->n_hidden + 1;
    m->size[0] = inputs;
    for (int l = 1; l <= o->n_hidden; l++) m->size[l] = o->hidden[l - 1];
    m->size[m->n_layers] = IDX_CLASSES;
    m->activation = o->activation;
    m->first = first;
    m->last = last;
    m->max_rows = max_rows;
    for (int l = 1; l <= m->n_layers; l++) m->n_params += (long)m->size[l - 1] * m->size[l] + m->size[l];
    for (int l = first; l <= last; l++)
        m->params_alloc += PAD16((long)m->size[l - 1] * w_ld(m->size[l])) + PAD16(m->size[l]);
    m->params = alloc_floats(m->params_alloc);
    m->grad = alloc_floats(m->params_alloc);
    if (!m->params || !m->grad) return -1;
    memset(m->params, 0, sizeof(float) * (size_t)m->params_alloc);   /* padding stays zero */
    memset(m->grad, 0, sizeof(float) * (size_t)m->params_alloc);
    float *p = m->params, *g = m->grad;
    for (int l = first; l <= last; l++) {
        long nw = PAD16((long)m->size[l - 1] * w_ld(m->size[l])), nb = PAD16(m->size[l]);
        m->W[l] = p; m->gW[l] = g; p += nw; g += nw;
        m->b[l] = p; m->gb[l] = g; p += nb; g += nb;
        prng_init_dense_ld(m->W[l], w_ld(m->size[l]), m->size[l - 1], m->size[l], l, l == m->n_layers, o->seed);
        memset(m->b[l], 0, sizeof(float) * (size_t)m->size[l]);
        if (l > 1 && !(m->wt[l] = alloc_floats((long)m->size[l - 1] * m->size[l]))) return -1;
    }
    for (int l = first - 1; l <= last; l++)
        if (!(m->act[l] = alloc_floats((long)max_rows * m->size[l]))) return -1;
    for (int l = first > 1 ? first - 1 : 1; l <= last && l < m->n_layers; l++)
        if (!(m->delta[l] = alloc_floats((long)max_rows * m->size[l]))) return -1;
    return 0;
}

static void mlp_free(mlp *m) {
    free(m->params); free(m->grad);
    for (int l = 0; l <= m->n_layers; l++) { free(m->act[l]); free(m->delta[l]); free(m->wt[l]); }
}

/* model FLOP per training sample: forward 2*in*out per layer, weight gradients the
 * same, input gradients for every layer but the first (elementwise work not counted) */
static double layer_flops(const mlp *m, int l) {
    double io = (double)m->size[l - 1] * m->size[l];
    return 4 * io + (l > 1 ? 2 * io : 0);
}
static double mlp_flops_per_sample(const mlp *m) {
    double f = 0;
    for (int l = 1; l <= m->n_layers; l++) f += layer_flops(m, l);
    return f;
}

// ----------------------------------------------------------------------------
// forward (rows [off, off + rows) of the mini-batch buffers)

/* act[l] = activation(act[l-1] . W[l] + b[l]); the last layer leaves logits. */
static void dense_forward(mlp *m, int l, long off, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    int hidden = l < m->n_layers;
    float *x = m->act[l - 1] + off * in, *y = m->act[l] + off * out;
    epilogue e = EPI_PLAIN;
    e.bias = m->b[l];
    if (hidden && m->activation != ACT_SIGMOID) e.act = m->activation;
    matmul(rows, out, in, x, in, 1, m->W[l], w_ld(out), y, out, &e);
    if (hidden && m->activation == ACT_SIGMOID) sigmoid_inplace(y, (long)rows * out);
}

/* this stage's layers */
static void stage_forward(mlp *m, long off, int rows) {
    for (int l = m->first; l <= m->last; l++) TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, l, off, rows);
}

// ----------------------------------------------------------------------------
// backward: gradient sums accumulated over the micro-batches (nothing updated yet)

/* Layer l on rows [off, off + rows) with dZ (dL/d pre-activation) in dz: gW[l] +=
 * act[l-1]^T . dz (serial's product; the epilogue adds with alpha 1, so on zeroed sums
 * the first micro-batch stores exactly serial's value), gb[l] += column sums of dz, and
 * the gradient for the layer below into delta[l-1]. */
static void dense_backward(mlp *m, int l, const float *dz, long off, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    const float *a = m->act[l - 1] + off * in;
    if (l > 1) {
        /* delta[l-1] = (dz . W^T) * act'(act[l-1]) */
        epilogue e = EPI_PLAIN;
        e.deriv = a;
        e.deriv_act = m->activation;
        matmul(rows, in, out, dz, out, 1, m->wt[l], in, m->delta[l - 1] + off * in, in, &e);
    }
    /* gW[l] += act[l-1]^T . dz */
    epilogue u = EPI_PLAIN;
    u.accumulate = 1;
    matmul(in, out, rows, a, 1, in, dz, out, m->gW[l], w_ld(out), &u);
    /* gb[l] += column sums of dz */
    float *restrict db = m->gb[l];
    for (int i = 0; i < rows; i++) {
        const float *restrict d = dz + (long)i * out;
        for (int j = 0; j < out; j++) db[j] += d[j];
    }
}

/* this stage's layers, last to first; dz = dL/dZ of layer `last` for these rows */
static void stage_backward(mlp *m, const float *dz, long off, int rows) {
    for (int l = m->last; l >= m->first; l--) {
        TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_backward(m, l, dz, off, rows);
        if (l > m->first) dz = m->delta[l - 1] + off * m->size[l - 1];
    }
}

// ----------------------------------------------------------------------------
// communication: the GPipe schedule; every MPI call is checked and timed

static double comm_seconds;      /* inside MPI calls, since the last reset */
static double busy_seconds;      /* computing (forward, loss, backward, update), since the last reset */
static MPI_Request *recv_req, *send_req;   /* M receives; 2M sends (forward, backward) */

/* COMM(MPI_Send, (args)): call, check, add the seconds to comm_seconds */
#define COMM(fn, args) do { double t_ = timer_now(); TRACE(trace_mpi_cat(#fn), #fn) mpi_check(fn args, #fn); \
                            comm_seconds += timer_now() - t_; } while (0)

static void sgd_update(mlp *m, float scale);

/* One mini-batch of `rows` rows through the pipeline (stage 0: the images are in act[0];
 * last stage: the labels in y). Forward of every micro-batch, then backward from the last
 * micro-batch to the first, then the update. Returns the summed loss (last stage; 0 on
 * the others). */
static double gpipe_step(mlp *m, const unsigned char *y, int rows, int microbatches, float lr, long *correct) {
    int M = microbatches < rows ? microbatches : rows;
    int L = m->n_layers, first = m->first, last = m->last;
    int in = m->size[first - 1], out = m->size[last];
    int prev = rank - 1, next = rank + 1, has_prev = rank > 0, has_next = rank < nranks - 1;
    double loss = 0.0, t;
    long lo, n;
    for (int k = 0; k < 2 * M; k++) send_req[k] = MPI_REQUEST_NULL;

    /* forward (fill): receives for every micro-batch posted at once */
    if (has_prev)
        for (int k = 0; k < M; k++) {
            shard(rows, k, M, &lo, &n);
            COMM(MPI_Irecv, (m->act[first - 1] + lo * in, (int)(n * in), MPI_FLOAT, prev, k, MPI_COMM_WORLD, &recv_req[k]));
        }
    for (int k = 0; k < M; k++) {
        shard(rows, k, M, &lo, &n);
        if (has_prev) TRACE(TRACE_WAIT, "pipeline idle") COMM(MPI_Wait, (&recv_req[k], MPI_STATUS_IGNORE));
        t = timer_now();
        stage_forward(m, lo, (int)n);
        if (!has_next)
            TRACE(TRACE_COMPUTE, "loss") loss += softmax_xent(m->act[L] + lo * m->size[L], y + lo, (int)n, m->size[L], correct);
        busy_seconds += timer_now() - t;
        if (has_next)
            COMM(MPI_Isend, (m->act[last] + lo * out, (int)(n * out), MPI_FLOAT, next, k, MPI_COMM_WORLD, &send_req[k]));
    }

    /* backward (drain), last micro-batch first; gradient sums start at zero */
    t = timer_now();
    TRACE(TRACE_COMPUTE, "zero gradient, transpose W") {
        memset(m->grad, 0, sizeof(float) * (size_t)m->params_alloc);
        for (int l = first; l <= last; l++)
            if (l > 1) transpose_ld(m->W[l], w_ld(m->size[l]), m->size[l - 1], m->size[l], m->wt[l], m->size[l - 1]);
    }
    busy_seconds += timer_now() - t;
    if (has_next)
        for (int k = 0; k < M; k++) {
            shard(rows, k, M, &lo, &n);
            COMM(MPI_Irecv, (m->delta[last] + lo * out, (int)(n * out), MPI_FLOAT, next, k, MPI_COMM_WORLD, &recv_req[k]));
        }
    for (int k = M - 1; k >= 0; k--) {
        shard(rows, k, M, &lo, &n);
        if (has_next) TRACE(TRACE_WAIT, "pipeline idle") COMM(MPI_Wait, (&recv_req[k], MPI_STATUS_IGNORE));
        t = timer_now();
        stage_backward(m, has_next ? m->delta[last] + lo * out : m->act[L] + lo * m->size[L], lo, (int)n);
        busy_seconds += timer_now() - t;
        if (has_prev)
            COMM(MPI_Isend, (m->delta[first - 1] + lo * in, (int)(n * in), MPI_FLOAT, prev, k, MPI_COMM_WORLD, &send_req[M + k]));
    }
    COMM(MPI_Waitall, (2 * M, send_req, MPI_STATUSES_IGNORE));

    /* update, once per mini-batch: serial's W = fmaf(-lr/B, g, W) */
    t = timer_now();
    sgd_update(m, -lr / (float)rows);
    busy_seconds += timer_now() - t;
    return loss;
}

// ----------------------------------------------------------------------------
// update

static void sgd_update(mlp *m, float scale) {
    float *restrict p = m->params;
    const float *restrict g = m->grad;
    TRACE(TRACE_UPDATE, "update") for (long i = 0; i < m->params_alloc; i++) p[i] = fmaf(scale, g[i], p[i]);
}

// ----------------------------------------------------------------------------
// data movement and evaluation

static void gather_labels(const dataset *d, const uint32_t *idx, int rows, unsigned char *y) {
    for (int r = 0; r < rows; r++) y[r] = d->y[idx[r]];
}

#define TAG_EVAL 1000000   /* above every micro-batch tag */

/* Correct predictions on the first n samples of the test set, pushed through the stages
 * EVAL_BATCH rows at a time with blocking Send/Recv (not timed): stage 0 reads the
 * images of d, the last stage the labels and counts (0 on the other stages).
 * predictions (last stage) optional. */
static long evaluate(mlp *m, const dataset *d, long n, unsigned char *predictions) {
    int L = m->n_layers, classes = m->size[L], first = m->first, last = m->last;
    int in = m->size[first - 1], out = m->size[last];
    long correct = 0;
    for (long start = 0; start < n; start += EVAL_BATCH) {
        int rows = (int)(n - start < EVAL_BATCH ? n - start : EVAL_BATCH);
        watchdog_beat();
        if (rank == 0) dataset_rows(d, NULL, start, rows, m->act[0]);
        else COMM(MPI_Recv, (m->act[first - 1], rows * in, MPI_FLOAT, rank - 1, TAG_EVAL, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        stage_forward(m, 0, rows);
        if (rank < nranks - 1) {
            COMM(MPI_Send, (m->act[last], rows * out, MPI_FLOAT, rank + 1, TAG_EVAL, MPI_COMM_WORLD));
            continue;
        }
        for (int i = 0; i < rows; i++) {
            int p = argmax10(m->act[L] + (long)i * classes, classes);
            correct += p == d->y[start + i];
            if (predictions) predictions[start + i] = (unsigned char)p;
        }
    }
    return correct;
}

// ----------------------------------------------------------------------------
// main

/* The stage boundaries (bounds[s] = last layer of stage s < P-1) whose heaviest stage has
 * the fewest FLOPs per sample: every split is tried (L <= 9), the first best one kept. */
static void search_split(const double *cost, int L, int P, int s, int start, int *cur, double worst,
                         double *best_worst, int *best) {
    if (s == P - 1) {
        double c = 0;
        for (int l = start; l <= L; l++) c += cost[l];
        if (c > worst) worst = c;
        if (worst < *best_worst) { *best_worst = worst; memcpy(best, cur, sizeof(int) * (size_t)(P - 1)); }
        return;
    }
    double c = 0;
    for (int end = start; end <= L - (P - 1 - s); end++) {
        c += cost[end];
        cur[s] = end;
        search_split(cost, L, P, s + 1, end + 1, cur, c > worst ? c : worst, best_worst, best);
    }
}

#ifndef TESTING
int main(int argc, char **argv) {
    program_name = PROGRAM;
    mpi_start(&argc, &argv);
    pipeline_options po;
    parse_options(&po, argc, argv);
    train_options *o = &po.common;
    flags_agree(o, po.microbatches);
    char err[IDX_ERR_LEN] = "";

    /* outputs (rank 0 writes them): checked before the work, not after it */
    agree_or_die(rank == 0 && (results_check_output(o->csv, "--csv", err, sizeof err) ||
                               checkpoint_check_flags(o, err, sizeof err) || schedule_check_flags(o, err, sizeof err) ||
                               trace_check_output(o, NULL, err, sizeof err)),
                 err, 2);

    /* data sizes and the flags that depend on them (the same on every rank) */
    long train_avail = 0, test_avail = 0;
    int bad = dataset_count(o->data_dir, "train", &train_avail, err, sizeof err) ||
              dataset_count(o->data_dir, "t10k", &test_avail, err, sizeof err);
    agree_or_die(bad, err, 2);
    if (o->train_n > train_avail) die_all("--train %ld: %s holds only %ld training samples", o->train_n, o->data_dir, train_avail);
    if (o->test_n > test_avail) die_all("--test %ld: %s holds only %ld test samples", o->test_n, o->data_dir, test_avail);
    long train_n = o->train_n ? o->train_n : train_avail;
    long test_n = o->test_n ? o->test_n : test_avail;
    if (o->batch_full) o->batch = train_n;
    if (o->batch > train_n) die_all("--batch %ld is larger than the %ld training samples", o->batch, train_n);
    if (po.microbatches > o->batch)
        die_all("--microbatches %d is larger than the batch of %ld rows", po.microbatches, o->batch);
    agree_or_die(trace_open(o, 1, rank, (4 * MAX_LAYERS + 8) * po.microbatches + 8, err, sizeof err), err, 2);
    int L = o->n_hidden + 1;
    if (nranks > L)
        die_all("%d ranks but the network has only %d layers: at most one stage per layer (more --hidden layers or fewer ranks)", nranks, L);

    /* stage boundaries: --split, or the FLOP-balanced default */
    int bounds[MAX_LAYERS] = {0};
    if (po.n_split) {
        if (po.n_split != nranks - 1)
            die_all("--split: %d ranks need %d boundaries, got %d", nranks, nranks - 1, po.n_split);
        for (int s = 0; s < po.n_split; s++) {
            if (po.split[s] > L - 1 || (s > 0 && po.split[s] <= po.split[s - 1]))
                die_all("--split: boundaries must increase within 1..%d (the last layer of each stage but the last)", L - 1);
            bounds[s] = po.split[s];
        }
    }
    long train_side_features[2] = {0, 0};   /* features, side: known to the stages that load data */
    int first_layer = 1, last_layer = L;
    dataset train = {0}, test = {0};
    int loads = rank == 0 || rank == nranks - 1;   /* stage 0: images; last stage: labels */
    /* before loading: the files' image sides, and whether this node's stages fit in its
     * memory (a loading stage holds the data; no stage holds more than the whole net's
     * parameters, gradients and a batch's activations) */
    int train_side = 0, test_side = 0;
    bad = dataset_side(o->data_dir, "train", &train_side, err, sizeof err) ||
          dataset_side(o->data_dir, "t10k", &test_side, err, sizeof err) ||
          (!o->image_size && dataset_check_sides(o->data_dir, train_side, test_side, err, sizeof err));
    agree_or_die(bad, err, 2);
    int in_side = o->image_size ? o->image_size : train_side;
    double need = (loads ? mem_dataset_bytes(train_n + test_n, in_side, train_side) : 0) +
                  dense_model_bytes(o, in_side * in_side, o->batch > EVAL_BATCH ? o->batch : EVAL_BATCH, 1) +
                  gemm_pack_bytes_dense(o, in_side * in_side, o->batch > EVAL_BATCH ? o->batch : EVAL_BATCH);
    agree_or_die(mem_short(need, ranks_on_this_node(), "data, model and buffers", err, sizeof err), err, 2);
    if (loads) {
        bad = dataset_load(o->data_dir, "train", 0, train_n, o->image_size, &train, err, sizeof err) ||
              dataset_load(o->data_dir, "t10k", 0, test_n, o->image_size, &test, err, sizeof err) ||
              dataset_check_sides(o->data_dir, train.side, test.side, err, sizeof err);
        if (!bad) { train_side_features[0] = train.features; train_side_features[1] = train.side; }
    }
    agree_or_die(bad, err, 2);
    /* stage 0's images and the last stage's labels must come from the same files */
    unsigned long long seen[3] = { (unsigned long long)train.n, (unsigned long long)train.side, 0xcbf29ce484222325ull };
    for (long i = 0; loads && i < train.n; i++) seen[2] = (seen[2] ^ train.y[i]) * 0x100000001b3ull;
    unsigned long long first_stage[3] = { seen[0], seen[1], seen[2] };
    mpi_check(MPI_Bcast(first_stage, 3, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
    bad = rank == nranks - 1 && memcmp(first_stage, seen, sizeof seen) != 0;
    snprintf(err, sizeof err, "stage 0 and stage %d loaded different training sets from %s/train-images: "
             "every rank must see the same files", nranks - 1, o->data_dir);
    agree_or_die(bad, err, 2);
    mpi_check(MPI_Bcast(train_side_features, 2, MPI_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
    int features = (int)train_side_features[0], side = (int)train_side_features[1];
    if (!po.n_split && nranks > 1) {
        double cost[MAX_LAYERS + 1], best_worst = INFINITY;
        int size_prev = features, cur[MAX_LAYERS];
        for (int l = 1; l <= L; l++) {
            int out = l < L ? o->hidden[l - 1] : IDX_CLASSES;
            cost[l] = (double)size_prev * out * (l > 1 ? 6 : 4);   /* = layer_flops() */
            size_prev = out;
        }
        search_split(cost, L, nranks, 0, 1, cur, 0.0, &best_worst, bounds);
    }
    first_layer = rank == 0 ? 1 : bounds[rank - 1] + 1;
    last_layer = rank == nranks - 1 ? L : bounds[rank];

    /* model: this stage's layers, buffers for a whole mini-batch */
    mlp m;
    int max_rows = (int)(o->batch > EVAL_BATCH ? o->batch : EVAL_BATCH);
    long widest = features;
    for (int l = 0; l < o->n_hidden; l++) if (o->hidden[l] > widest) widest = o->hidden[l];
    if ((long)max_rows * widest > INT_MAX)
        die_all("--batch %ld: a mini-batch of %ld x %ld floats is more than one MPI message can count", o->batch, (long)max_rows, widest);
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_n);
    unsigned char *batch_y = malloc((size_t)max_rows);
    double *loss_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *acc_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *epoch_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *comm_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *idle_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *stage_busy = malloc(sizeof(double) * (size_t)nranks);
    recv_req = malloc(sizeof(MPI_Request) * (size_t)po.microbatches);
    send_req = malloc(sizeof(MPI_Request) * 2 * (size_t)po.microbatches);
    bad = mlp_init(&m, features, o, max_rows, first_layer, last_layer) || !order || !batch_y || !loss_curve ||
          !acc_curve || !epoch_sec || !comm_sec || !idle_sec || !stage_busy || !recv_req || !send_req;
    agree_or_die(bad, "out of memory", 1);
    char variant[64], split_text[64] = "";
    for (int s = 0, used = 0; s < nranks - 1; s++)
        used += snprintf(split_text + used, sizeof split_text - (size_t)used, s ? "_%d" : "%d", bounds[s]);
    snprintf(variant, sizeof variant, po.n_split ? "gpipe-m%d-split%s" : "gpipe-m%d", po.microbatches, split_text);
    double bubble_theory = (double)(nranks - 1) / (double)(po.microbatches + nranks - 1);

    /* checkpoint: the stages' parameters gathered to rank 0 in stage order are the whole
     * net's W1 b1 W2 b2 ... (serial's layout); --resume scatters them back */
    int stage_floats = (int)m.params_alloc, *counts = malloc(sizeof(int) * (size_t)nranks), *displs = malloc(sizeof(int) * (size_t)nranks);
    agree_or_die(!counts || !displs, "out of memory", 1);
    mpi_check(MPI_Allgather(&stage_floats, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    long whole_n = 0;
    for (int s = 0; s < nranks; s++) { displs[s] = (int)whole_n; whole_n += counts[s]; }
    if (whole_n > INT_MAX) die_all("--hidden: %ld parameters are more than one MPI message can count", whole_n);
    float *whole = rank == 0 && (o->checkpoint || o->resume) ? alloc_floats(whole_n) : NULL;
    agree_or_die(rank == 0 && (o->checkpoint || o->resume) && !whole, "out of memory", 1);
    checkpoint ck;
    checkpoint_init(&ck, PROGRAM, variant, nranks, 1, o, side, train_n, test_n, NULL, whole, whole_n,
                    (double *[]){ loss_curve, acc_curve, epoch_sec, comm_sec, idle_sec }, 5);
    resume_on_every_rank(&ck, o, 0);
    agree_or_die(target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err), err, 2);
    if (o->resume)
        mpi_check(MPI_Scatterv(whole, counts, displs, MPI_FLOAT, m.params, stage_floats, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Scatterv");
    if (rank == 0) {
        printf("pipeline: %s MLP %d", options_activation_name(o->activation), m.size[0]);
        for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
        printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld in %d micro-batches, lr %g, seed %llu, %d stage%s:",
               m.n_params, o->data_dir, train_n, test_n, side, side, o->batch, po.microbatches, o->lr,
               (unsigned long long)o->seed, nranks, nranks > 1 ? "s" : "");
        for (int s = 0; s < nranks; s++) {
            int f = s == 0 ? 1 : bounds[s - 1] + 1, t = s == nranks - 1 ? L : bounds[s];
            if (f == t) printf("%s layer %d", s ? " |" : "", f);
            else printf("%s layers %d-%d", s ? " |" : "", f, t);
        }
        printf("\n");
        if (o->resume) printf("pipeline: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);
        fflush(stdout);
    }

    /* training */
    watchdog_start();
    trace_start_mpi();
    double t_start = timer_now() - ck.seconds, my_busy = 0.0, counted_seconds = 0.0;
    for (int epoch = ck.epochs_done + 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        comm_seconds = busy_seconds = 0.0;
        double t0 = timer_now(), loss_sum = 0.0;
        long correct = 0;
        for (long start = 0; start < train_n; start += o->batch) {
            double t_step = trace_step_begin(epoch);
            int rows = (int)(train_n - start < o->batch ? train_n - start : o->batch);
            watchdog_progress(epoch, start / o->batch + 1);
            TRACE(TRACE_DATA, "batch") {
                if (rank == 0) gather_batch(&train, order + start, rows, m.act[0], batch_y);
                if (rank == nranks - 1) gather_labels(&train, order + start, rows, batch_y);
            }
            loss_sum += gpipe_step(&m, batch_y, rows, po.microbatches,
                                   lr_at(o, epoch, start / o->batch, steps_per_epoch(o, train_n)), &correct);
            trace_step_end(t_step);
        }
        double seconds = timer_now() - t0, comm = comm_seconds, busy = busy_seconds;
        long test_correct;
        trace_epoch_level(epoch);
        TRACE(TRACE_EVAL, "eval") test_correct = evaluate(&m, &test, test_n, NULL);
        /* totals over the stages (every rank gets them, so all stop together on divergence) */
        double mine[5] = { loss_sum, (double)correct, (double)test_correct, comm, busy }, sum[5], slowest;
        mpi_check(MPI_Allreduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        mpi_check(MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        epoch_sec[epoch - 1] = slowest;
        comm_sec[epoch - 1] = sum[3] / nranks;
        idle_sec[epoch - 1] = nranks * slowest - sum[4];
        if (epoch > ck.epochs_done + 1 || o->epochs == ck.epochs_done + 1) { my_busy += busy; counted_seconds += slowest; }
        loss_curve[epoch - 1] = sum[0] / (double)train_n;
        acc_curve[epoch - 1] = 100.0 * sum[2] / (double)test_n;
        char extra[64];
        snprintf(extra, sizeof extra, "comm %.3f s  bubble %.2f", comm_sec[epoch - 1], idle_sec[epoch - 1] / (nranks * slowest));
        if (results_epoch(PROGRAM, rank == 0, o->quiet, epoch, o->epochs, loss_curve[epoch - 1],
                          100.0 * sum[1] / (double)train_n, acc_curve[epoch - 1], epoch_sec[epoch - 1], train_n, extra))
            return 1;
        int stop = target_reached(o, epoch, acc_curve[epoch - 1]);   /* the same sums on every rank */
        if (stop && counted_seconds == 0) { my_busy = busy; counted_seconds = slowest; }   /* its only epoch */
        if (checkpoint_due(o, epoch)) TRACE(TRACE_CHECKPOINT, "checkpoint") {
            double t_ck = timer_now();
            watchdog_beat();   /* a checkpoint being written is progress */
            mpi_check(MPI_Gatherv(m.params, stage_floats, MPI_FLOAT, whole, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Gatherv");
            checkpoint_after_epoch_root(&ck, o, epoch, t_ck - t_start);
            t_start += timer_now() - t_ck;
        }
        if (stop) break;
    }
    double total = timer_now() - t_start;
    mpi_check(MPI_Gather(&my_busy, 1, MPI_DOUBLE, stage_busy, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");

    /* --predict: the first K test images through the pipeline; the last stage's
     * predictions go to rank 0, which has the images */
    long k_pred = o->predict < test_n ? o->predict : test_n;
    unsigned char *pred = NULL;
    if (k_pred > 0) {
        pred = malloc((size_t)k_pred);
        agree_or_die(!pred, "out of memory", 1);
        evaluate(&m, &test, k_pred, pred);
        if (nranks > 1 && rank == nranks - 1)
            COMM(MPI_Send, (pred, (int)k_pred, MPI_UNSIGNED_CHAR, 0, TAG_EVAL + 1, MPI_COMM_WORLD));
        if (nranks > 1 && rank == 0)
            COMM(MPI_Recv, (pred, (int)k_pred, MPI_UNSIGNED_CHAR, nranks - 1, TAG_EVAL + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }

    /* results: rank 0 alone */
    int status = 0;
    if (rank == 0) {
        double comm_median = results_epoch_median(comm_sec, o->epochs);
        double idle_median = results_epoch_median(idle_sec, o->epochs);
        double bubble_mean = 0.0;
        printf("pipeline: measured bubble (idle fraction of the epoch) per stage:");
        for (int s = 0; s < nranks; s++) {
            double b = counted_seconds > 0 ? 1.0 - stage_busy[s] / counted_seconds : 0.0;
            bubble_mean += b / nranks;
            printf(" %d: %.3f", s, b);
        }
        printf("; mean %.3f vs GPipe's (P-1)/(M+P-1) = %.3f for equally heavy stages\n", bubble_mean, bubble_theory);
        result_row row;
        results_fill(&row, PROGRAM, variant, nranks, 1, o, side, train_n, test_n, mlp_flops_per_sample(&m),
                     total, loss_curve, acc_curve, epoch_sec);
        row.comm_seconds = comm_median;
        row.sync_seconds = idle_median;
        if (pred) print_predictions(&test, pred, (int)k_pred);
        char extra[96];
        snprintf(extra, sizeof extra, "comm %.3f s | bubble %.2f (theory %.2f)", comm_median, bubble_mean, bubble_theory);
        if (results_finish(&row, o->csv, NULL, extra, err, sizeof err)) {
            fprintf(stderr, PROGRAM ": %s\n", err);
            status = 1;
        }
    }

    if (trace_finish_mpi(PROGRAM, variant, o)) status = 1;
    mlp_free(&m);
    if (loads) { dataset_free(&train); dataset_free(&test); }
    free(order); free(batch_y); free(loss_curve); free(acc_curve); free(epoch_sec); free(comm_sec);
    free(idle_sec); free(stage_busy); free(recv_req); free(send_req); free(pred); free(counts); free(displs); free(whole);
    return status;
}
#endif
