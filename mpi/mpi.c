/*
 * mpi/mpi.c — data-parallel trainer: P MPI ranks, one replica of the model each.
 *
 * Strategy: every rank holds the whole MLP (same seed, same initial weights) and walks
 * the same global sample order. Each global mini-batch of B rows is cut into P
 * contiguous parts; rank r computes serial's gradient sums on its part only, the sums
 * are combined over the ranks, and every replica applies serial's update
 * W = fmaf(-lr/B, g, W). So P ranks train serial's model step for step: P = 1 bit for
 * bit, P > 1 up to the rounding of the split sums (docs/mpi.md).
 * Communicated per step (--sync), the float gradient sums (the size of the model):
 *   allreduce     one MPI_Allreduce over all gradients; every rank updates.
 *   reduce-bcast  MPI_Reduce to rank 0, rank 0 updates, MPI_Bcast of the parameters.
 *   overlap       one MPI_Iallreduce per layer, started in backward as soon as that
 *                 layer's gradient exists, MPI_Waitall before the update.
 *   hierarchical  MPI_Reduce within each node, MPI_Allreduce among one leader per node,
 *                 MPI_Bcast within the node (common/mpi_util.h's hier_allreduce());
 *                 every rank updates. PARTRAIN_RANKS_PER_NODE=K: pseudo-nodes of K ranks.
 * MPI+MPI (one model per node in a shared-memory window) is mpi/shm.c.
 * Per epoch, outside the timed training: loss, correct counts and seconds in MPI are
 * reduced to rank 0, which alone prints and writes the CSV. Every rank loads the whole
 * training set (the shuffle is global) and its own shard of the test set.
 * Threads: one per rank (MPI_Init). Errors: common/mpi_util.h (every call checked, a
 * failure ends the job with one line naming the rank and the call; bad flags or data:
 * one line from rank 0, every rank exits 2).
 *
 * Compile: make mpi   (mpicc -std=c11 -O3 -march=native -Icommon mpi/mpi.c common/{idx,options,results,checkpoint,watchdog}.c -lz -lm -pthread)
 * Run:     scripts/mpirun.sh 4 mpi/mpi --data data/fashion --batch 512 --sync allreduce
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "checkpoint.h"
#include "checkpoint_mpi.h"
#include "data.h"
#include "gemm.h"       /* matmul(), transpose(): the one matrix kernel */
#include "idx.h"
#include "maths.h"
#include "mpi_run.h"    /* the epoch's totals over the ranks, the end of the run */
#include "mpi_util.h"   /* rank, nranks, mpi_check(), agree_or_die(), shard(), hier_allreduce() */
#include "options.h"
#include "phase.h"      /* compute and comm seconds */
#include "prng.h"
#include "program.h"
#include "results.h"
#include "sharded_data.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"
#include "trace_mpi.h"  /* --trace: TRACE(cat, name) marks, the ranks' events gathered */
#include "watchdog.h"   /* --timeout-step: the stuck-rank watchdog */

#define PROGRAM "mpi"
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */


// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

/* the variants: X(id, CSV name, --sync value, help) */
#define SYNC_MODES(X) \
    X(SYNC_ALLREDUCE,    "allreduce",    "allreduce",    "MPI_Allreduce of all gradients, every rank updates") \
    X(SYNC_REDUCE_BCAST, "reduce-bcast", "reduce-bcast", "MPI_Reduce to rank 0, rank 0 updates, MPI_Bcast") \
    X(SYNC_OVERLAP,      "overlap",      "overlap",      "MPI_Iallreduce per layer during backward") \
    X(SYNC_HIERARCHICAL, "hierarchical", "hierarchical", "MPI_Reduce in each node, MPI_Allreduce of node leaders, MPI_Bcast")
enum sync_kind { SYNC_MODES(VARIANT_ENUM) N_SYNC };
static const variant SYNC[] = { SYNC_MODES(VARIANT_ROW) };

typedef struct {
    train_options common;
    int sync;                   /* --sync allreduce|reduce-bcast|overlap|hierarchical */
    long batch_per_rank;        /* --batch-per-rank B (0: not given; --batch is global) */
    int batch_given;            /* --batch was on the command line */
    const char *dump_params;    /* --dump-params FILE (testing) */
} mpi_options;

static void usage(void) {
    printf("Usage: scripts/mpirun.sh P mpi/mpi [options]   (or mpirun -np P mpi/mpi ...)\n"
           "Trains an MLP on MNIST-style IDX data, data-parallel over P MPI ranks.\n\n");
    options_usage_common();
    printf("MPI:\n"
           "  --sync MODE           gradient exchange per step [allreduce]:\n");
    variant_usage(SYNC, N_SYNC);
    printf("  --batch-per-rank B    B rows per rank per step, i.e. a global batch of P*B\n"
           "                        (instead of --batch; fewer updates per epoch as P grows)\n"
           "  --dump-params FILE    after training, rank 0 writes the parameters (W1 b1 W2 ...,\n"
           "                        raw float32) to FILE (for the equivalence tests)\n");
    watchdog_usage();
    options_usage_exit_status();
}

/* Ranks other than 0 parse with stderr muted: the flags are the same on every rank, so
 * rank 0 alone prints options_die()'s one-line error; every rank exits with status 2
 * (and finalizes MPI from the atexit handler). */
static void parse_options(mpi_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->sync = SYNC_ALLREDUCE;
    o->batch_per_rank = 0;
    o->batch_given = 0;
    o->dump_params = NULL;
    int saved = mute_stderr_off_root();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { if (rank == 0) usage(); exit(0); }
        if (!strcmp(argv[i], "--list-variants")) { if (rank == 0) variant_list("--sync", SYNC, N_SYNC); exit(0); }
        if (!strcmp(argv[i], "--sync")) {
            o->sync = variant_parse(PROGRAM, "--sync", options_value(PROGRAM, argc, argv, &i), SYNC, N_SYNC);
            continue;
        }
        if (!strcmp(argv[i], "--batch-per-rank")) {
            o->batch_per_rank = options_long(PROGRAM, "--batch-per-rank", options_value(PROGRAM, argc, argv, &i), 1, 100000000);
            continue;
        }
        if (!strcmp(argv[i], "--dump-params")) { o->dump_params = options_value(PROGRAM, argc, argv, &i); continue; }
        if (watchdog_parse(PROGRAM, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--batch")) o->batch_given = 1;
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) continue;
        options_die(PROGRAM, "unknown option '%s'", argv[i]);
    }
    if (o->batch_per_rank && o->batch_given)
        options_die(PROGRAM, "--batch and --batch-per-rank: give one of them, not both");
    unmute_stderr(saved);
}

// ----------------------------------------------------------------------------
// model: one contiguous parameter buffer with per-layer views, and a gradient buffer
// laid out exactly like it (so one MPI call covers every layer, or one contiguous
// segment per layer)
//
// Layer l (1..L) maps size[l-1] inputs to size[l] outputs: W[l] is size[l-1] x size[l]
// row-major, its rows w_ld(size[l]) floats apart (common/maths.h), so the forward product
// is act[l-1] . W[l]; b[l] has size[l] entries. The gradient's rows are size[l] apart:
// the padding is not sent.

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params, with padding that aligns each view */
    float *params;                /* all W and b, layer by layer: W1 b1 W2 b2 ... */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    long grad_alloc;              /* floats in grad: params' layout without the row padding */
    float *grad;                  /* gradient sums, each view padded to 16 floats (padding stays 0) */
    float *gW[MAX_LAYERS + 1], *gb[MAX_LAYERS + 1];
    /* work buffers, sized for max_rows samples */
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[0] = input batch, act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of hidden layer l */
    float *wt;                    /* transposed weights for the backward product */
} mlp;

/* floats of layer l's segment (gW then gb, with their padding) in grad: up to the next
 * layer's, or to grad's end (grad_layout) */
static long layer_floats(const mlp *m, int l) {
    return (l < m->n_layers ? m->gW[l + 1] : m->grad + m->grad_alloc) - m->gW[l];
}

static int mlp_init(mlp *m, int inputs, const train_options *o, int max_rows) {
    memset(m, 0, sizeof *m);
    m->n_layers = o->n_hidden + 1;
    m->size[0] = inputs;
    for (int l = 1; l <= o->n_hidden; l++) m->size[l] = o->hidden[l - 1];
    m->size[m->n_layers] = IDX_CLASSES;
    m->activation = o->activation;
    m->max_rows = max_rows;
    long widest = 0;
    for (int l = 1; l <= m->n_layers; l++) {
        m->n_params += (long)m->size[l - 1] * m->size[l] + m->size[l];
        m->params_alloc += PAD16((long)m->size[l - 1] * w_ld(m->size[l])) + PAD16(m->size[l]);
        long w = (long)m->size[l - 1] * m->size[l];
        if (w > widest) widest = w;
    }
    long gw[MAX_LAYERS + 1], gb[MAX_LAYERS + 1];
    m->grad_alloc = grad_layout(m->size, m->n_layers, gw, gb);
    m->params = zeroed_floats(m->params_alloc);   /* padding stays zero */
    m->grad = zeroed_floats(m->grad_alloc);
    m->wt = alloc_floats(widest);
    if (!m->params || !m->grad || !m->wt) return -1;
    float *p = m->params;
    for (int l = 1; l <= m->n_layers; l++) {
        int in = m->size[l - 1], out = m->size[l];
        m->W[l] = p; p += PAD16((long)in * w_ld(out));
        m->b[l] = p; p += PAD16(out);
        m->gW[l] = m->grad + gw[l];
        m->gb[l] = m->grad + gb[l];
        prng_init_dense_ld(m->W[l], w_ld(out), in, out, l, l == m->n_layers, o->seed);
    }
    for (int l = 0; l <= m->n_layers; l++) {
        m->act[l] = alloc_floats((long)max_rows * m->size[l]);
        m->delta[l] = alloc_floats((long)max_rows * m->size[l]);
        if (!m->act[l] || !m->delta[l]) return -1;
    }
    return 0;
}

static void mlp_free(mlp *m) {
    free(m->params); free(m->grad); free(m->wt);
    for (int l = 0; l <= m->n_layers; l++) { free(m->act[l]); free(m->delta[l]); }
}


// ----------------------------------------------------------------------------
// forward

/* act[l] = activation(act[l-1] . W[l] + b[l]); the last layer leaves logits. */
static void dense_forward(mlp *m, int l, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    int hidden = l < m->n_layers;
    epilogue e = EPI_PLAIN;
    e.bias = m->b[l];
    if (hidden && m->activation != ACT_SIGMOID) e.act = m->activation;
    matmul(rows, out, in, m->act[l - 1], in, 1, m->W[l], w_ld(out), m->act[l], out, &e);
    if (hidden && m->activation == ACT_SIGMOID) sigmoid_inplace(m->act[l], (long)rows * out);
}

static void mlp_forward(mlp *m, int rows) {
    for (int l = 1; l <= m->n_layers; l++) TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, l, rows);
}

// ----------------------------------------------------------------------------
// backward: the plain gradient sums of this rank's rows into grad (nothing updated yet)

static void grad_ready(mlp *m, int l);   /* communication: layer l's gradient is complete */
static void comm_progress(void);         /* communication: let started transfers advance */

/* Layer l with dZ (dL/d pre-activation) in dz: first its gradient sums
 * gW[l] = act[l-1]^T . dz and gb[l] = column sums of dz (serial's product and loop, with
 * the plain epilogue where serial fuses the update), then the gradient for the layer
 * below, which needs W[l]: unchanged until every layer's gradient has been exchanged.
 * rows may be 0 (this rank's part of a short last batch): the sums are then zero. */
static void dense_backward(mlp *m, int l, const float *dz, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    /* gW[l] = act[l-1]^T . dz */
    matmul(in, out, rows, m->act[l - 1], 1, in, dz, out, m->gW[l], out, &EPI_PLAIN);
    /* gb[l] = column sums of dz */
    float *restrict db = m->gb[l];
    for (int j = 0; j < out; j++) db[j] = 0.0f;
    for (int i = 0; i < rows; i++) {
        const float *restrict d = dz + (long)i * out;
        for (int j = 0; j < out; j++) db[j] += d[j];
    }
    grad_ready(m, l);
    if (l > 1) {
        /* delta[l-1] = (dz . W^T) * act'(act[l-1]) */
        transpose_ld(m->W[l], w_ld(out), in, out, m->wt, in);
        epilogue e = EPI_PLAIN;
        e.deriv = m->act[l - 1];
        e.deriv_act = m->activation;
        matmul(rows, in, out, dz, out, 1, m->wt, in, m->delta[l - 1], in, &e);
        comm_progress();
    }
}

// ----------------------------------------------------------------------------
// communication: every MPI call is checked and timed (common/phase.h's comm phase)

static int sync_mode;            /* --sync */
static MPI_Request pending[MAX_LAYERS];   /* overlap: one Iallreduce per layer in flight */
static int n_pending;
static hier_comms hier;          /* hierarchical: the node and leader communicators */

/* COMM(MPI_Allreduce, (args)): call, check, count the seconds as the comm phase */
#define COMM(fn, args) do { \
        phase_begin(PHASE_COMM); \
        TRACE(trace_mpi_cat(#fn), #fn) mpi_check(fn args, #fn); \
        phase_end(PHASE_COMM); \
    } while (0)

static void grad_ready(mlp *m, int l) {
    if (sync_mode != SYNC_OVERLAP) return;
    COMM(MPI_Iallreduce, (MPI_IN_PLACE, m->gW[l], (int)layer_floats(m, l), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD, &pending[n_pending]));
    n_pending++;
}

/* OpenMPI progresses non-blocking collectives only inside MPI calls (no progress thread
 * by default), so the overlapped variant pokes them between products. */
static void comm_progress(void) {
    if (sync_mode != SYNC_OVERLAP || n_pending == 0) return;
    int done = 0;
    COMM(MPI_Testall, (n_pending, pending, &done, MPI_STATUSES_IGNORE));
}

// ----------------------------------------------------------------------------
// update: serial's formula, W = fmaf(-lr/B, g, W) with B the global batch

static void sgd_update(mlp *m, float scale) {
    TRACE(TRACE_UPDATE, "update") for (int l = 1; l <= m->n_layers; l++) {
        int out = m->size[l];
        sgd_update_rows(m->W[l], m->gW[l], out, 0, m->size[l - 1], scale);
        for (int j = 0; j < out; j++) m->b[l][j] = fmaf(scale, m->gb[l][j], m->b[l][j]);
    }
}

/* After backward: sum the gradients over the ranks and apply them (--sync). */
static void exchange_and_update(mlp *m, float scale) {
    int n = (int)m->grad_alloc;
    switch (sync_mode) {
    case SYNC_ALLREDUCE:
        COMM(MPI_Allreduce, (MPI_IN_PLACE, m->grad, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        sgd_update(m, scale);
        break;
    case SYNC_REDUCE_BCAST:
        COMM(MPI_Reduce, (rank == 0 ? MPI_IN_PLACE : m->grad, m->grad, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD));
        if (rank == 0) sgd_update(m, scale);
        COMM(MPI_Bcast, (m->params, (int)m->params_alloc, MPI_FLOAT, 0, MPI_COMM_WORLD));
        break;
    case SYNC_HIERARCHICAL:
        COMM(hier_allreduce, (m->grad, n, &hier));
        sgd_update(m, scale);
        break;
    default: /* SYNC_OVERLAP: the per-layer sums were started in backward */
        COMM(MPI_Waitall, (n_pending, pending, MPI_STATUSES_IGNORE));
        n_pending = 0;
        sgd_update(m, scale);
        break;
    }
}

/* One SGD step on this rank's `rows` rows (already in act[0]) of a global batch of
 * batch_rows rows; returns this rank's summed loss. */
static double train_step(mlp *m, const unsigned char *y, int rows, int batch_rows, float lr, long *correct) {
    int L = m->n_layers;
    phase_begin(PHASE_COMPUTE);
    mlp_forward(m, rows);
    double loss;
    TRACE(TRACE_COMPUTE, "loss") loss = softmax_xent(m->act[L], y, rows, m->size[L], correct);
    TRACE(TRACE_COMPUTE, trace_layer("backward", L)) dense_backward(m, L, m->act[L], rows);
    for (int l = L - 1; l >= 1; l--) TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_backward(m, l, m->delta[l], rows);
    phase_end(PHASE_COMPUTE);
    float scale = -lr / (float)batch_rows;
    exchange_and_update(m, scale);
    return loss;
}

// ----------------------------------------------------------------------------
// data movement and evaluation

/* Correct predictions on the samples of d (this rank's test shard; may be empty);
 * predictions optional. */
static long evaluate(void *model, const dataset *d, unsigned char *predictions) {
    mlp *m = model;
    int L = m->n_layers, classes = m->size[L];
    long correct = 0;
    for (long start = 0; start < d->n; start += m->max_rows) {
        int rows = (int)(d->n - start < m->max_rows ? d->n - start : m->max_rows);
        watchdog_beat();
        dataset_rows(d, NULL, start, rows, m->act[0]);
        mlp_forward(m, rows);
        correct += count_correct(m->act[L], rows, classes, d->y + start, predictions ? predictions + start : NULL);
    }
    return correct;
}

// ----------------------------------------------------------------------------
// main

#ifndef TESTING
int main(int argc, char **argv) {
    program_name = PROGRAM;
    mpi_start(&argc, &argv);
    mpi_options mo;
    parse_options(&mo, argc, argv);
    train_options *o = &mo.common;
    flags_agree(o, mo.sync);
    sync_mode = mo.sync;
    char err[IDX_ERR_LEN] = "";
    if (sync_mode == SYNC_HIERARCHICAL) hier_init(&hier);

    /* outputs (rank 0 writes them): checked before the work, not after it */
    agree_or_die(rank == 0 && (results_check_output(o->csv, "--csv", err, sizeof err) ||
                               results_check_output(mo.dump_params, "--dump-params", err, sizeof err) ||
                               checkpoint_check_flags(o, err, sizeof err) || schedule_check_flags(o, err, sizeof err) ||
                               trace_check_output(o, (const char *[]){ mo.dump_params, NULL }, err, sizeof err)),
                 err, 2);
    agree_or_die(trace_open(o, 1, rank, 4 * MAX_LAYERS + 8, err, sizeof err), err, 2);

    /* data: every rank checks the files; the sizes decide the same errors on every rank */
    sharded_data data;
    load_sharded_data(o, mo.batch_per_rank, rank_model_bytes, &data);
    dataset train = data.train, test = data.test;
    long train_n = data.train_n, test_n = data.test_n;

    /* model: rank r holds at most ceil(B / P) rows of a batch */
    mlp m;
    long rank_rows = (o->batch + nranks - 1) / nranks;
    int max_rows = (int)(rank_rows > EVAL_BATCH ? rank_rows : EVAL_BATCH);
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_n);
    unsigned char *batch_y = malloc((size_t)max_rows);
    double *loss_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *acc_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *epoch_sec = malloc(sizeof(double) * (size_t)o->epochs);
    double *comm_sec = malloc(sizeof(double) * (size_t)o->epochs);
    int bad = mlp_init(&m, train.features, o, max_rows) || !order || !batch_y || !loss_curve || !acc_curve ||
              !epoch_sec || !comm_sec;
    agree_or_die(bad, "out of memory", 1);
    if (m.params_alloc > INT_MAX) die_all("--hidden: %ld parameters are more than one MPI message can count", m.params_alloc);
    const char *variant = SYNC[mo.sync].name;

    /* checkpoint: --resume goes on after the epochs the file holds */
    checkpoint ck;
    checkpoint_init(&ck, PROGRAM, variant, nranks, 1, o, train.side, train_n, test_n, NULL, m.params, m.params_alloc,
                    (double *[]){ loss_curve, acc_curve, epoch_sec, comm_sec }, 4);
    resume_on_every_rank(&ck, o, 1);
    agree_or_die(target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err), err, 2);
    if (rank == 0) {
        printf("mpi: %s MLP %d", options_activation_name(o->activation), m.size[0]);
        for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
        printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld (%ld..%ld per rank%s), lr %g, seed %llu,"
               " sync %s, %d ranks\n",
               m.n_params, o->data_dir, train_n, test_n, train.side, train.side, o->batch, o->batch / nranks,
               rank_rows, mo.batch_per_rank ? ", --batch-per-rank" : "", o->lr, (unsigned long long)o->seed,
               variant, nranks);
        if (sync_mode == SYNC_HIERARCHICAL)
            printf("mpi: hierarchical: %d node%s, up to %d rank%s each%s\n", hier.nodes, hier.nodes == 1 ? "" : "s",
                   hier.max_node_size, hier.max_node_size == 1 ? "" : "s",
                   hier.pseudo ? " (pseudo-nodes: PARTRAIN_RANKS_PER_NODE)" : "");
        if (o->resume) printf("mpi: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);
        fflush(stdout);
    }

    /* training */
    run_log log = { o, train_n, test_n, loss_curve, acc_curve, epoch_sec, comm_sec, 0, 0 };
    watchdog_start();
    trace_start_mpi();
    double t_start = timer_now() - ck.seconds;
    for (int epoch = ck.epochs_done + 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        phase_reset();
        double t0 = timer_now(), loss_sum = 0.0;
        long correct = 0;
        for (long start = 0; start < train_n; start += o->batch) {
            double t_step = trace_step_begin(epoch);
            int rows = (int)(train_n - start < o->batch ? train_n - start : o->batch), count;
            watchdog_progress(epoch, start / o->batch + 1);
            TRACE(TRACE_DATA, "batch") count = gather_rank_rows(&train, order, start, rows, m.act[0], batch_y);   /* this rank's rows */
            long next = start + o->batch;   /* the next batch's rows, fetched while this step computes */
            if (next < train_n)
                TRACE(TRACE_DATA, "prefetch") prefetch_rank_rows(&train, order, next,
                                                                 (int)(train_n - next < o->batch ? train_n - next : o->batch));
            float lr = lr_at(o, epoch, start / o->batch, steps_per_epoch(o, train_n));
            loss_sum += train_step(&m, batch_y, count, rows, lr, &correct);
            trace_step_end(t_step);
        }
        double seconds = timer_now() - t0;
        long test_correct;
        trace_epoch_level(epoch);
        TRACE(TRACE_EVAL, "eval") test_correct = evaluate(&m, &test, NULL);
        if (end_epoch(&log, epoch, loss_sum, correct, test_correct, seconds)) return 1;   /* every rank alike */
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
    run_end end = { PROGRAM, variant, &log, train.side, dense_flops_per_sample(m.size, m.n_layers), total, mo.dump_params,
                    m.n_layers, m.size, m.W, m.b, &m, evaluate };
    int status = finish_run(&end);
    if (trace_finish_mpi(PROGRAM, variant, o)) status = 1;

    mlp_free(&m);
    hier_free(&hier);
    dataset_free(&train);
    if (data.test_count > 0) dataset_free(&test);
    free(order); free(batch_y); free(loss_curve); free(acc_curve); free(epoch_sec); free(comm_sec);
    return status;
}
#endif
