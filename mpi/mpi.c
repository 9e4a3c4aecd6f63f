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
 *   shm           MPI-3 shared memory (MPI+MPI): the ranks of a node (the same nodes and
 *                 pseudo-nodes as hierarchical) hold ONE copy of the parameters, and each
 *                 rank its activations and deltas, in one MPI_Win_allocate_shared window.
 *                 Each rank's backward computes only its deltas; node barrier; node rank t
 *                 forms the gradient sums of its slice of the parameters (openmp
 *                 reduction's slices) from the activations and deltas of the ranks that
 *                 had rows, rank u's part over u's rows, added in node-rank order, and
 *                 applies serial's update to it in place; node barrier; every forward
 *                 reads the shared parameters. Within a node nothing is copied through
 *                 MPI and no gradient crosses between cores: each rank reads the others'
 *                 activations and deltas and the P-1 slices of the parameters they
 *                 updated. Across nodes the slices are summed into a node
 *                 sum buffer in the window and the node leaders MPI_Allreduce it (the
 *                 hierarchical scheme: it works for nodes of unequal size, e.g. 3 + 1,
 *                 where a per-slice allreduce among same-local-rank ranks would need the
 *                 same slicing on every node) before the update: 4 node barriers a step.
 *                 One node: P ranks give the parameters of openmp --accum reduction and
 *                 of --accum owner (shm's scheme with threads) --threads P bit for bit
 *                 (the same row split, the same sums in the same order; the per-epoch
 *                 totals are summed in rank order for that too).
 * Memory model of shm: the window must be MPI_WIN_UNIFIED (checked; public and private
 * copies are the same memory), and every rank holds one passive-target epoch on it for
 * the whole run (MPI_Win_lock_all(MPI_MODE_NOCHECK): no lock is taken, it only makes
 * MPI_Win_sync legal). Every hand-over of data between ranks goes through node_sync():
 * MPI_Win_sync (a memory barrier: this rank's stores are complete and visible), the node
 * MPI_Barrier (orders the ranks), MPI_Win_sync (later loads see the others' stores), the
 * pattern MPI-3.1 section 11.7 gives for load/store through shared windows. Between two
 * node_syncs a float is written by at most one rank and read by none other, or only
 * read: a rank's activations and deltas are written by it in forward/backward and read by
 * the others between the first and the last barrier of the step; the parameters are read
 * in forward/backward and written (each slice by its owner) only between those barriers.
 * Per epoch, outside the timed training: loss, correct counts and seconds in MPI are
 * reduced to rank 0, which alone prints and writes the CSV. Every rank loads the whole
 * training set (the shuffle is global) and its own shard of the test set.
 * Threads: one per rank (MPI_Init). Errors: common/mpi_util.h (every call checked, a
 * failure ends the job with one line naming the rank and the call; bad flags or data:
 * one line from rank 0, every rank exits 2).
 *
 * Compile: make mpi   (mpicc -std=c11 -O3 -march=native mpi/mpi.c common/{idx,options,results}.c -lz -lm)
 * Run:     scripts/mpirun.sh 4 mpi/mpi --data data/fashion --batch 512 --sync allreduce
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
#include "gemm.h"       /* matmul(), transpose(): the one matrix kernel */
#include "idx.h"
#include "mlp.h"
#include "options.h"
#include "prng.h"
#include "results.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"


#define PROGRAM "mpi"
#include "mpi_util.h"   /* rank, nranks, mpi_check(), agree_or_die(), shard(), ... */
#include "watchdog.h"   /* --timeout-step: the stuck-rank watchdog */
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */


// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

/* the variants: X(id, CSV name, --sync value, help) */
#define SYNC_MODES(X) \
    X(SYNC_ALLREDUCE,    "allreduce",    "allreduce",    "MPI_Allreduce of all gradients, every rank updates") \
    X(SYNC_REDUCE_BCAST, "reduce-bcast", "reduce-bcast", "MPI_Reduce to rank 0, rank 0 updates, MPI_Bcast") \
    X(SYNC_OVERLAP,      "overlap",      "overlap",      "MPI_Iallreduce per layer during backward") \
    X(SYNC_HIERARCHICAL, "hierarchical", "hierarchical", "MPI_Reduce in each node, MPI_Allreduce of node leaders, MPI_Bcast") \
    X(SYNC_SHM,          "shm",          "shm",          "one model per node in an MPI-3 shared window, each rank sums and updates a slice")
enum sync_kind { SYNC_MODES(VARIANT_ENUM) N_SYNC };
static const variant SYNC[] = { SYNC_MODES(VARIANT_ROW) };

typedef struct {
    train_options common;
    int sync;                   /* --sync allreduce|reduce-bcast|overlap|hierarchical|shm */
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
// row-major (so the forward product is act[l-1] . W[l]), b[l] has size[l] entries.

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params, with padding that aligns each view */
    float *params;                /* all W and b, layer by layer: W1 b1 W2 b2 ... */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    float *grad;                  /* gradient sums, same layout as params (padding stays 0) */
    float *gW[MAX_LAYERS + 1], *gb[MAX_LAYERS + 1];
    /* work buffers, sized for max_rows samples */
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[0] = input batch, act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of hidden layer l */
    float *wt;                    /* transposed weights for the backward product */
    int own_params;               /* params were allocated here (not shm's window) */
    int own_work;                 /* act and delta were allocated here (not shm's window) */
} mlp;

/* The shape: sizes, n_params and params_alloc (what a parameter buffer must hold). */
static void mlp_shape(mlp *m, int inputs, const train_options *o, int max_rows) {
    memset(m, 0, sizeof *m);
    m->n_layers = o->n_hidden + 1;
    m->size[0] = inputs;
    for (int l = 1; l <= o->n_hidden; l++) m->size[l] = o->hidden[l - 1];
    m->size[m->n_layers] = IDX_CLASSES;
    m->activation = o->activation;
    m->max_rows = max_rows;
    for (int l = 1; l <= m->n_layers; l++) {
        m->n_params += (long)m->size[l - 1] * m->size[l] + m->size[l];
        m->params_alloc += PAD16((long)m->size[l - 1] * m->size[l]) + PAD16(m->size[l]);
    }
}

/* Floats of the work buffers act[0..L] and delta[0..L] (max_rows rows each), laid out in
 * that order, each padded to 16 floats; work_views() cuts them out of one block. */
static long work_floats(const mlp *m) {
    long n = 0;
    for (int l = 0; l <= m->n_layers; l++) n += 2 * PAD16((long)m->max_rows * m->size[l]);
    return n;
}
static void work_views(const mlp *m, float *work, float **act, float **delta) {
    for (int l = 0; l <= m->n_layers; l++) {
        long n = PAD16((long)m->max_rows * m->size[l]);
        act[l] = work; work += n;
        delta[l] = work; work += n;
    }
}

/* After mlp_shape: the parameters (params: NULL to allocate them here; else shm's window)
 * with their per-layer views, the initial parameters when init_params (shm: only the node
 * leader writes the node's one copy), the gradient, the work buffers (work: NULL to
 * allocate them here; else this rank's block of shm's window). */
static int mlp_init(mlp *m, const train_options *o, float *params, float *work, int init_params) {
    long widest = 0;
    for (int l = 1; l <= m->n_layers; l++) {
        long w = (long)m->size[l - 1] * m->size[l];
        if (w > widest) widest = w;
    }
    m->own_params = !params;
    m->own_work = !work;
    m->params = params ? params : alloc_floats(m->params_alloc);
    m->grad = alloc_floats(m->params_alloc);
    m->wt = alloc_floats(widest);
    float *block = work ? work : alloc_floats(work_floats(m));
    if (!m->params || !m->grad || !m->wt || !block) return -1;
    work_views(m, block, m->act, m->delta);
    if (init_params) memset(m->params, 0, sizeof(float) * (size_t)m->params_alloc);   /* padding stays zero */
    memset(m->grad, 0, sizeof(float) * (size_t)m->params_alloc);
    float *p = m->params, *g = m->grad;
    for (int l = 1; l <= m->n_layers; l++) {
        long nw = PAD16((long)m->size[l - 1] * m->size[l]), nb = PAD16(m->size[l]);
        m->W[l] = p; m->gW[l] = g; p += nw; g += nw;
        m->b[l] = p; m->gb[l] = g; p += nb; g += nb;
        if (!init_params) continue;
        prng_init_dense(m->W[l], m->size[l - 1], m->size[l], l, l == m->n_layers, o->seed);
        memset(m->b[l], 0, sizeof(float) * (size_t)m->size[l]);
    }
    return 0;
}

static void mlp_free(mlp *m) {
    if (m->own_params) free(m->params);
    if (m->own_work) free(m->act[0]);   /* the block starts with act[0] */
    free(m->grad);
    free(m->wt);
}

/* floats of layer l's segment (W then b, with their padding) in params and grad */
static long layer_floats(const mlp *m, int l) {
    return PAD16((long)m->size[l - 1] * m->size[l]) + PAD16(m->size[l]);
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
    matmul(rows, out, in, m->act[l - 1], in, 1, m->W[l], out, m->act[l], out, &e);
    if (hidden && m->activation == ACT_SIGMOID) sigmoid_inplace(m->act[l], (long)rows * out);
}

static void mlp_forward(mlp *m, int rows) {
    for (int l = 1; l <= m->n_layers; l++) dense_forward(m, l, rows);
}

// ----------------------------------------------------------------------------
// backward: the plain gradient sums of this rank's rows into grad (nothing updated yet)

static void grad_ready(mlp *m, int l);   /* communication: layer l's gradient is complete */
/* seconds in the weight-gradient products (they touch only this rank's own buffers, so
 * they time the core, not the sharing: bench/mpi-bench.sh's core bound) */
static double gw_seconds;
static double gw_samples;         /* the rows they were over (shm: this rank's share of them) */
static int sync_mode;             /* --sync */
static void comm_progress(void);         /* communication: let started transfers advance */

/* Layer l with dZ (dL/d pre-activation) in dz: first its gradient sums
 * gW[l] = act[l-1]^T . dz and gb[l] = column sums of dz (serial's product and loop, with
 * the plain epilogue where serial fuses the update), then the gradient for the layer
 * below, which needs W[l]: unchanged until every layer's gradient has been exchanged.
 * rows may be 0 (this rank's part of a short last batch): the sums are then zero. */
static void dense_backward(mlp *m, int l, const float *dz, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    if (sync_mode != SYNC_SHM) {   /* shm: the node's ranks form the sums after the step's barrier */
        /* gW[l] = act[l-1]^T . dz */
        double t0 = timer_now();
        matmul(in, out, rows, m->act[l - 1], 1, in, dz, out, m->gW[l], out, &EPI_PLAIN);
        gw_seconds += timer_now() - t0;
        /* gb[l] = column sums of dz */
        float *restrict db = m->gb[l];
        for (int j = 0; j < out; j++) db[j] = 0.0f;
        for (int i = 0; i < rows; i++) {
            const float *restrict d = dz + (long)i * out;
            for (int j = 0; j < out; j++) db[j] += d[j];
        }
        grad_ready(m, l);
    }
    if (l > 1) {
        /* delta[l-1] = (dz . W^T) * act'(act[l-1]) */
        transpose(m->W[l], in, out, m->wt, in);
        epilogue e = EPI_PLAIN;
        e.deriv = m->act[l - 1];
        e.deriv_act = m->activation;
        matmul(rows, in, out, dz, out, 1, m->wt, in, m->delta[l - 1], in, &e);
        comm_progress();
    }
}

// ----------------------------------------------------------------------------
// communication: every MPI call is checked and timed

static double comm_seconds;      /* inside MPI calls during training, since the last reset */
static MPI_Request pending[MAX_LAYERS];   /* overlap: one Iallreduce per layer in flight */
static int n_pending;
static hier_comms hier;          /* hierarchical, shm: the node and leader communicators */

/* COMM(MPI_Allreduce, (args)): call, check, add the seconds to comm_seconds */
#define COMM(fn, args) do { double t_ = timer_now(); mpi_check(fn args, #fn); \
                            comm_seconds += timer_now() - t_; } while (0)

/* ---- --sync shm: the node's shared window (memory model: the file's header) */
static struct {
    MPI_Win win;
    int on;              /* the window exists (and is locked) */
    float **act, **dz;   /* node rank k's act[l] and dZ of layer l: [k * (L + 1) + l] */
    int *world;          /* node rank k's world rank */
    int *active, *rows;  /* scratch: the node ranks that had rows this step, and how many */
    const float **a, **d;   /* scratch: their act[l-1] and dZ of layer l */
    float *sum;          /* nodes > 1: the node's summed gradient, in the leader's segment */
    float *tile;         /* a block of rows of one layer's gradient sum, summed over ranks */
    double share;        /* this rank's fraction of the weights (gW us/sample's rows) */
} shm;

/* Hands the node's stores over to every rank of the node: MPI_Win_sync, MPI_Barrier,
 * MPI_Win_sync (counted as communication). */
static void node_sync(void) {
    COMM(MPI_Win_sync, (shm.win));
    COMM(MPI_Barrier, (hier.node));
    COMM(MPI_Win_sync, (shm.win));
}

/* Collective over MPI_COMM_WORLD, after hier_init and mlp_shape: the window. Every
 * rank's segment holds its work buffers (activations and deltas: the others read them
 * after the step's first barrier); the leader's also the parameters and (nodes > 1) the
 * node sum. Non-contiguous segments: each one page-aligned and placed where its owner
 * first touches it. *params and *work: this rank's views. */
static void shm_init(const mlp *m, float **params, float **work) {
    /* pseudo-nodes (PARTRAIN_RANKS_PER_NODE) must lie within one host's shared memory */
    if (hier.pseudo) {
        MPI_Comm host;
        int host_size = 0, split = 0, any = 0;
        mpi_check(MPI_Comm_split_type(hier.node, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
        mpi_check(MPI_Comm_size(host, &host_size), "MPI_Comm_size");
        mpi_check(MPI_Comm_free(&host), "MPI_Comm_free");
        split = host_size != hier.node_size;
        mpi_check(MPI_Allreduce(&split, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        if (any)
            die_all("PARTRAIN_RANKS_PER_NODE=%d: a pseudo-node spans hosts, and --sync shm shares memory within one", hier.pseudo);
    }
    long n = m->params_alloc, nw = work_floats(m), P = hier.node_size, L = m->n_layers;
    int leader = hier.node_rank == 0;
    long mine = nw + (leader ? n * (1 + (hier.nodes > 1)) : 0);
    MPI_Info info;
    float *base = NULL;
    mpi_check(MPI_Info_create(&info), "MPI_Info_create");
    mpi_check(MPI_Info_set(info, "alloc_shared_noncontig", "true"), "MPI_Info_set");
    mpi_check(MPI_Win_allocate_shared((MPI_Aint)(sizeof(float) * (size_t)mine), (int)sizeof(float), info, hier.node,
                                      &base, &shm.win), "MPI_Win_allocate_shared");
    mpi_check(MPI_Info_free(&info), "MPI_Info_free");
    mpi_check(MPI_Win_set_errhandler(shm.win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
    int *model = NULL, flag = 0;
    mpi_check(MPI_Win_get_attr(shm.win, MPI_WIN_MODEL, &model, &flag), "MPI_Win_get_attr");
    if (!flag || *model != MPI_WIN_UNIFIED) {   /* every rank of the node sees the same attribute */
        fprintf(stderr, PROGRAM ": rank %d: --sync shm needs a window in MPI's unified memory model\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, shm.win), "MPI_Win_lock_all");
    shm.on = 1;
    long tile = 0;
    for (int l = 1; l <= L; l++) {
        long t = (long)slice_block_rows(m->size[l]) * m->size[l];
        if (t > tile) tile = t;
    }
    shm.act = malloc(sizeof(float *) * (size_t)(P * (L + 1)));
    shm.dz = malloc(sizeof(float *) * (size_t)(P * (L + 1)));
    shm.world = malloc(sizeof(int) * (size_t)P);
    shm.active = malloc(sizeof(int) * (size_t)P);
    shm.rows = malloc(sizeof(int) * (size_t)P);
    shm.a = malloc(sizeof(float *) * (size_t)P);
    shm.d = malloc(sizeof(float *) * (size_t)P);
    shm.tile = alloc_floats(tile);
    agree_or_die(!shm.act || !shm.dz || !shm.world || !shm.active || !shm.rows || !shm.a || !shm.d || !shm.tile, "out of memory", 1);
    mpi_check(MPI_Allgather(&rank, 1, MPI_INT, shm.world, 1, MPI_INT, hier.node), "MPI_Allgather");
    float *lead = NULL;
    for (int k = 0; k < P; k++) {
        MPI_Aint size = 0;
        int disp = 0;
        float *p = NULL, *delta[MAX_LAYERS + 1];
        mpi_check(MPI_Win_shared_query(shm.win, k, &size, &disp, &p), "MPI_Win_shared_query");
        if (k == 0) { lead = p; p += n * (1 + (hier.nodes > 1)); }
        if (k == hier.node_rank) *work = p;
        work_views(m, p, shm.act + k * (L + 1), delta);
        for (int l = 1; l <= L; l++) shm.dz[k * (L + 1) + l] = l == L ? shm.act[k * (L + 1) + L] : delta[l];
    }
    shm.sum = hier.nodes > 1 ? lead + n : NULL;
    *params = lead;
    if (leader && shm.sum) memset(shm.sum, 0, sizeof(float) * (size_t)n);
    long weights = 0, slice = 0;
    for (int l = 1; l <= L; l++) {
        long i0, i1;
        split_units(m->size[l - 1], hier.node_rank, (int)P, 16, &i0, &i1);
        weights += (long)m->size[l - 1] * m->size[l];
        slice += (i1 - i0) * m->size[l];
    }
    shm.share = (double)slice / (double)weights;
}

static void shm_free(void) {
    if (!shm.on) return;
    mpi_check(MPI_Win_unlock_all(shm.win), "MPI_Win_unlock_all");
    mpi_check(MPI_Win_free(&shm.win), "MPI_Win_free");
    free(shm.act); free(shm.dz); free(shm.world); free(shm.active); free(shm.rows); free(shm.a); free(shm.d); free(shm.tile);
    shm.on = 0;
}

/* --resume with shm: rank 0 (a leader) loaded the parameters into its node's window;
 * the other leaders get them, then every node's ranks may read them. */
static void shm_resumed(const mlp *m) {
    if (hier.leaders != MPI_COMM_NULL && hier.nodes > 1)
        mpi_check(MPI_Bcast(m->params, (int)m->params_alloc, MPI_FLOAT, 0, hier.leaders), "MPI_Bcast");
    node_sync();
}

/* What the slice's sums become: one node, serial's update of the parameters in place;
 * nodes > 1, the node sum (updated from after the leaders' allreduce). */
static void shm_finish(float *restrict param, float *restrict node_sum, const float *restrict s, long n, float scale) {
    if (node_sum) memcpy(node_sum, s, sizeof(float) * (size_t)n);
    else for (long i = 0; i < n; i++) param[i] = fmaf(scale, s[i], param[i]);
}

/* shm's step, after every rank's backward has left its activations and deltas in the
 * window: node rank t owns a slice of the parameters (openmp reduction's: rows of each W,
 * columns of each b, in units of 16 floats) and forms its gradient sums itself, from the
 * buffers of the node's ranks that had rows: rank u's sums over its own rows with the
 * same kernel call per element as openmp reduction's thread u (the same chain of fmaf
 * over the same rows), added in node-rank order. A block of rows of the slice at a time,
 * so the sums never leave this core's L1 and no gradient crosses between cores: each
 * rank reads the others' activations and deltas (a few hundred KB) instead of their
 * gradients (the model's size). Across nodes through the node sum. */
static void shm_exchange_update(mlp *m, float scale, int batch_rows) {
    int t = hier.node_rank, T = hier.node_size, L = m->n_layers, ng = 0, *active = shm.active;
    long node_rows = 0;
    for (int k = 0; k < T; k++) {
        long lo, count;
        shard(batch_rows, shm.world[k], nranks, &lo, &count);
        if (count > 0) { active[ng] = k; shm.rows[ng] = (int)count; ng++; node_rows += count; }
    }
    node_sync();                                   /* every rank's activations and deltas are complete */
    for (int l = 1; l <= L; l++) {
        int in = m->size[l - 1], out = m->size[l], block = slice_block_rows(out);
        long i0, i1, j0, j1, w = m->W[l] - m->params, b = m->b[l] - m->params;
        split_units(in, t, T, 16, &i0, &i1);
        split_units(out, t, T, 16, &j0, &j1);
        for (int u = 0; u < ng; u++) {
            shm.a[u] = shm.act[active[u] * (L + 1) + l - 1];
            shm.d[u] = shm.dz[active[u] * (L + 1) + l];
        }
        for (long r0 = i0; r0 < i1; r0 += block) {   /* gW[l], its rows r0.. */
            int rows = (int)(i1 - r0 < block ? i1 - r0 : block);
            double t0 = timer_now();
            slice_gradient_block(shm.tile, rows, out, r0, in, shm.a, shm.d, shm.rows, ng);
            gw_seconds += timer_now() - t0;
            long at = w + r0 * out;
            shm_finish(m->params + at, shm.sum ? shm.sum + at : NULL, shm.tile, (long)rows * out, scale);
        }
        slice_bias_sums(shm.tile, j0, j1, out, shm.d, shm.rows, ng);   /* gb[l], its columns j0..j1 */
        shm_finish(m->params + b + j0, shm.sum ? shm.sum + b + j0 : NULL, shm.tile, j1 - j0, scale);
    }
    gw_samples += (double)node_rows * shm.share;
    if (shm.sum) {
        node_sync();                               /* the node sum is complete */
        if (hier.leaders != MPI_COMM_NULL)
            COMM(MPI_Allreduce, (MPI_IN_PLACE, shm.sum, (int)m->params_alloc, MPI_FLOAT, MPI_SUM, hier.leaders));
        node_sync();                               /* every node's sum is in the node sum */
        for (int l = 1; l <= L; l++) {
            long i0, i1, j0, j1, w = m->W[l] - m->params, b = m->b[l] - m->params;
            split_units(m->size[l - 1], t, T, 16, &i0, &i1);
            split_units(m->size[l], t, T, 16, &j0, &j1);
            float *one[1] = { shm.sum };
            sum_update(m->params, one, 1, w + i0 * m->size[l], w + i1 * m->size[l], scale);
            sum_update(m->params, one, 1, b + j0, b + j1, scale);
        }
    }
    node_sync();                                   /* the parameters are updated before any forward,
                                                      and no rank's buffers are read any more */
}

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
    float *restrict p = m->params;
    const float *restrict g = m->grad;
    for (long i = 0; i < m->params_alloc; i++) p[i] = fmaf(scale, g[i], p[i]);
}

/* After backward: sum the gradients over the ranks and apply them (--sync); batch_rows:
 * the global batch's rows (shm: which ranks had some). */
static void exchange_and_update(mlp *m, float scale, int batch_rows) {
    int n = (int)m->params_alloc;
    switch (sync_mode) {
    case SYNC_SHM:
        shm_exchange_update(m, scale, batch_rows);
        break;
    case SYNC_ALLREDUCE:
        COMM(MPI_Allreduce, (MPI_IN_PLACE, m->grad, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        sgd_update(m, scale);
        break;
    case SYNC_REDUCE_BCAST:
        COMM(MPI_Reduce, (rank == 0 ? MPI_IN_PLACE : m->grad, m->grad, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD));
        if (rank == 0) sgd_update(m, scale);
        COMM(MPI_Bcast, (m->params, n, MPI_FLOAT, 0, MPI_COMM_WORLD));
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
    mlp_forward(m, rows);
    double loss = softmax_xent(m->act[L], y, rows, m->size[L], correct);
    dense_backward(m, L, m->act[L], rows);
    for (int l = L - 1; l >= 1; l--) dense_backward(m, l, m->delta[l], rows);
    float scale = -lr / (float)batch_rows;
    exchange_and_update(m, scale, batch_rows);
    return loss;
}

// ----------------------------------------------------------------------------
// data movement and evaluation

/* Correct predictions on the samples of d (this rank's test shard; may be empty);
 * predictions optional. */
static long evaluate(mlp *m, const dataset *d, unsigned char *predictions) {
    int L = m->n_layers, classes = m->size[L];
    long correct = 0;
    for (long start = 0; start < d->n; start += m->max_rows) {
        int rows = (int)(d->n - start < m->max_rows ? d->n - start : m->max_rows);
        watchdog_beat();
        memcpy(m->act[0], d->x + (size_t)start * d->features, sizeof(float) * (size_t)rows * d->features);
        mlp_forward(m, rows);
        for (int i = 0; i < rows; i++) {
            int p = argmax10(m->act[L] + (long)i * classes, classes);
            correct += p == d->y[start + i];
            if (predictions) predictions[start + i] = (unsigned char)p;
        }
    }
    return correct;
}

/* --dump-params: W1 b1 W2 b2 ... as raw float32, without the alignment padding */
static int dump_params(const mlp *m, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "wb");
    if (!f) { snprintf(err, errlen, "--dump-params %s: cannot create the file", path); return -1; }
    int ok = 1;
    for (int l = 1; l <= m->n_layers; l++) {
        size_t nw = (size_t)m->size[l - 1] * (size_t)m->size[l], nb = (size_t)m->size[l];
        ok &= fwrite(m->W[l], sizeof(float), nw, f) == nw && fwrite(m->b[l], sizeof(float), nb, f) == nb;
    }
    if (fclose(f) || !ok) { snprintf(err, errlen, "--dump-params %s: write failed", path); return -1; }
    return 0;
}

// ----------------------------------------------------------------------------
// main

/* what the model and its buffers take on a rank, for the memory check before loading */
static double model_bytes(const train_options *o, int features) {
    long rows = (o->batch + nranks - 1) / nranks;
    return dense_model_bytes(o, features, rows > EVAL_BATCH ? rows : EVAL_BATCH, 1);
}

#ifndef TESTING
int main(int argc, char **argv) {
    mpi_start(&argc, &argv);
    mpi_options mo;
    parse_options(&mo, argc, argv);
    train_options *o = &mo.common;
    flags_agree(o, mo.sync);
    sync_mode = mo.sync;
    char err[IDX_ERR_LEN] = "", variant[64];
    if (sync_mode == SYNC_HIERARCHICAL || sync_mode == SYNC_SHM) hier_init(&hier);

    /* outputs (rank 0 writes them): checked before the work, not after it */
    agree_or_die(rank == 0 && (results_check_output(o->csv, "--csv", err, sizeof err) ||
                               results_check_output(mo.dump_params, "--dump-params", err, sizeof err) ||
                               checkpoint_check_flags(o, err, sizeof err) || schedule_check_flags(o, err, sizeof err)),
                 err, 2);

    /* data: every rank checks the files; the sizes decide the same errors on every rank */
    sharded_data data;
    load_sharded_data(o, mo.batch_per_rank, model_bytes, &data);
    dataset train = data.train, test = data.test;
    long train_n = data.train_n, test_n = data.test_n, test_count = data.test_count;

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
    double *totals = malloc(sizeof(double) * 5 * (size_t)nranks);   /* every rank's epoch totals */
    mlp_shape(&m, train.features, o, max_rows);
    if (m.params_alloc > INT_MAX) die_all("--hidden: %ld parameters are more than one MPI message can count", m.params_alloc);
    float *shared_params = NULL, *shared_work = NULL;   /* shm: this rank's views of the window */
    if (sync_mode == SYNC_SHM) shm_init(&m, &shared_params, &shared_work);
    int bad = mlp_init(&m, o, shared_params, shared_work, sync_mode != SYNC_SHM || hier.node_rank == 0) || !order ||
              !batch_y || !loss_curve || !acc_curve || !epoch_sec || !comm_sec || !totals;
    agree_or_die(bad, "out of memory", 1);
    snprintf(variant, sizeof variant, "%s", SYNC[mo.sync].name);

    /* checkpoint: --resume goes on after the epochs the file holds */
    checkpoint ck;
    checkpoint_init(&ck, PROGRAM, variant, nranks, 1, o, train.side, train_n, test_n, NULL, m.params, m.params_alloc,
                    (double *[]){ loss_curve, acc_curve, epoch_sec, comm_sec }, 4);
    resume_on_every_rank(&ck, o, sync_mode != SYNC_SHM);   /* shm: one copy per node */
    agree_or_die(target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err), err, 2);
    if (sync_mode == SYNC_SHM) shm_resumed(&m);             /* (and the leader's initial values) */
    if (rank == 0) {
        printf("mpi: %s MLP %d", options_activation_name(o->activation), m.size[0]);
        for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
        printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld (%ld..%ld per rank%s), lr %g, seed %llu,"
               " sync %s, %d ranks\n",
               m.n_params, o->data_dir, train_n, test_n, train.side, train.side, o->batch, o->batch / nranks,
               rank_rows, mo.batch_per_rank ? ", --batch-per-rank" : "", o->lr, (unsigned long long)o->seed,
               variant, nranks);
        if (sync_mode == SYNC_HIERARCHICAL)
            printf("mpi: hierarchical: %d node%s, up to %d ranks each%s\n", hier.nodes, hier.nodes == 1 ? "" : "s",
                   hier.max_node_size, hier.pseudo ? " (pseudo-nodes: PARTRAIN_RANKS_PER_NODE)" : "");
        if (sync_mode == SYNC_SHM)
            printf("mpi: shm: %d node%s, up to %d ranks each sharing one copy of the model%s%s\n", hier.nodes,
                   hier.nodes == 1 ? "" : "s", hier.max_node_size,
                   hier.nodes > 1 ? ", node leaders allreduce the node sums" : "",
                   hier.pseudo ? " (pseudo-nodes: PARTRAIN_RANKS_PER_NODE)" : "");
        if (o->resume) printf("mpi: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);
        fflush(stdout);
    }

    /* training */
    watchdog_start();
    double t_start = timer_now() - ck.seconds;
    for (int epoch = ck.epochs_done + 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        comm_seconds = 0.0;
        if (epoch == 2) { gw_seconds = 0.0; gw_samples = 0; }   /* the cores' speed: epochs 2..E */
        double t0 = timer_now(), loss_sum = 0.0;
        long correct = 0;
        for (long start = 0; start < train_n; start += o->batch) {
            int rows = (int)(train_n - start < o->batch ? train_n - start : o->batch);
            long lo, count;   /* this rank's rows of the global batch */
            shard(rows, rank, nranks, &lo, &count);
            watchdog_progress(epoch, start / o->batch + 1);
            gather_batch(&train, order + start + lo, (int)count, m.act[0], batch_y);
            loss_sum += train_step(&m, batch_y, (int)count, rows,
                                   lr_at(o, epoch, start / o->batch, steps_per_epoch(o, train_n)), &correct);
            if (sync_mode != SYNC_SHM) gw_samples += count;   /* (shm: in its exchange) */
        }
        double seconds = timer_now() - t0, comm = comm_seconds;
        long test_correct = evaluate(&m, &test, NULL);
        /* totals over the ranks, summed in rank order (a fixed order, openmp's thread order:
         * the same bits every run); every rank gets them, so all stop together on divergence */
        double mine[5] = { loss_sum, (double)correct, (double)test_correct, comm, seconds }, sum[4] = { 0 }, slowest = 0;
        mpi_check(MPI_Allgather(mine, 5, MPI_DOUBLE, totals, 5, MPI_DOUBLE, MPI_COMM_WORLD), "MPI_Allgather");
        for (int r = 0; r < nranks; r++) {
            for (int k = 0; k < 4; k++) sum[k] += totals[5 * r + k];
            if (totals[5 * r + 4] > slowest) slowest = totals[5 * r + 4];
        }
        epoch_sec[epoch - 1] = slowest;
        comm_sec[epoch - 1] = sum[3] / nranks;
        loss_curve[epoch - 1] = sum[0] / (double)train_n;
        acc_curve[epoch - 1] = 100.0 * sum[2] / (double)test_n;
        char extra[64];
        snprintf(extra, sizeof extra, "comm %.3f s", comm_sec[epoch - 1]);
        if (results_epoch(PROGRAM, rank == 0, o->quiet, epoch, o->epochs, loss_curve[epoch - 1],
                          100.0 * sum[1] / (double)train_n, acc_curve[epoch - 1], epoch_sec[epoch - 1], train_n, extra)) {
            shm_free();   /* every rank stops here together */
            return 1;
        }
        int stop = target_reached(o, epoch, acc_curve[epoch - 1]);   /* the same sums on every rank */
        watchdog_beat();   /* a checkpoint being written is progress */
        t_start += checkpoint_after_epoch_root(&ck, o, epoch, timer_now() - t_start);
        if (stop) break;
    }
    double total = timer_now() - t_start;

    /* the replicas must be bit-identical (every rank applied the same sums) */
    if (!replicas_identical(m.params, sizeof(float) * (size_t)m.params_alloc)) { shm_free(); return 1; }

    /* each rank's weight-gradient microseconds per row (epochs 2..E): how fast its core ran */
    double gw_us = gw_samples ? 1e6 * gw_seconds / (double)gw_samples : -1.0;
    double *gw_all = malloc(sizeof(double) * (size_t)nranks);
    char *gw_text = malloc(16 * (size_t)nranks + 1), *extra = malloc(16 * (size_t)nranks + 128);
    agree_or_die(!gw_all || !gw_text || !extra, "out of memory", 1);
    mpi_check(MPI_Gather(&gw_us, 1, MPI_DOUBLE, gw_all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");
    gw_text[0] = '\0';
    for (int r = 0; r < nranks && rank == 0; r++)
        sprintf(gw_text + strlen(gw_text), "%s%.3f", r ? "," : "", gw_all[r]);

    /* results: rank 0 alone */
    int status = 0;
    if (rank == 0) {
        double comm_median = results_epoch_median(comm_sec, o->epochs);
        result_row row;
        results_fill(&row, PROGRAM, variant, nranks, 1, o, train.side, train_n, test_n,
                     dense_flops_per_sample(m.size, m.n_layers), total, loss_curve, acc_curve, epoch_sec);
        row.comm_seconds = comm_median;
        if (o->predict) {   /* rank 0 shows the first K test images, whichever shard holds them */
            dataset first;
            long k = o->predict < test_n ? o->predict : test_n;
            unsigned char *pred = malloc((size_t)k);
            if (!pred || dataset_load(o->data_dir, "t10k", 0, k, o->image_size, &first, err, sizeof err)) {
                fprintf(stderr, PROGRAM ": %s\n", pred ? err : "out of memory");
                return 1;
            }
            evaluate(&m, &first, pred);
            print_predictions(&first, pred, (int)k);
            dataset_free(&first);
            free(pred);
        }
        if (mo.dump_params && dump_params(&m, mo.dump_params, err, sizeof err)) status = 1;
        else {
            sprintf(extra, "comm %.3f s (%.0f%%) | gW us/sample %s | replicas identical", comm_median,
                    100.0 * comm_median / row.epoch_seconds_median, gw_text);
            if (results_finish(&row, o->csv, NULL, extra, err, sizeof err)) status = 1;
        }
        if (status) fprintf(stderr, PROGRAM ": %s\n", err);
    }

    mlp_free(&m);       /* (not the window's buffers) */
    shm_free();
    hier_free(&hier);
    dataset_free(&train);
    if (test_count > 0) dataset_free(&test);
    free(order); free(batch_y); free(loss_curve); free(acc_curve); free(epoch_sec); free(comm_sec); free(totals);
    free(gw_all); free(gw_text); free(extra);
    return status;
}
#endif
