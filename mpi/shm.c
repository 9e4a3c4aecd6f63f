/*
 * mpi/shm.c — MPI+MPI: P MPI ranks, one copy of the model per node in an MPI-3
 * shared-memory window.
 *
 * Strategy: the ranks of a node (the nodes of MPI_Comm_split_type, or pseudo-nodes of K
 * consecutive ranks with PARTRAIN_RANKS_PER_NODE=K) hold ONE copy of the parameters, and
 * each rank its activations and deltas, in one MPI_Win_allocate_shared window. Every rank
 * walks the same global sample order; each global mini-batch of B rows is cut into P
 * contiguous parts, as in mpi/mpi. Each rank's backward computes only its deltas; node
 * barrier; node rank t forms the gradient sums of its slice of the parameters (openmp
 * reduction's slices, common/owner.h) from the activations and deltas of the ranks that
 * had rows, one chain over rank 0's rows, then rank 1's, ..., ending in serial's update
 * of the slice in place; node barrier; every forward reads the shared parameters.
 * Communicated: within a node nothing is copied through MPI and no gradient crosses
 * between cores: each rank reads the others' activations and deltas and the P-1 slices
 * of the parameters they updated. Across nodes the slices are summed into a node sum
 * buffer in the window (the model's floats, without W's row padding) and the node
 * leaders MPI_Allreduce it (the hierarchical scheme:
 * it works for nodes of unequal size, e.g. 3 + 1, where a per-slice allreduce among
 * same-local-rank ranks would need the same slicing on every node) before the update:
 * 4 node barriers a step. One node: P ranks give serial's parameters bit for bit (the
 * batch's rows in order, one chain per parameter), as openmp --accum owner (this scheme
 * with threads) does at any T; the per-epoch totals are summed in rank order.
 * Memory model: the window must be MPI_WIN_UNIFIED (checked; public and private copies
 * are the same memory), and every rank holds one passive-target epoch on it for the whole
 * run (MPI_Win_lock_all(MPI_MODE_NOCHECK): no lock is taken, it only makes MPI_Win_sync
 * legal). Every hand-over of data between ranks goes through node_sync(): MPI_Win_sync (a
 * memory barrier: this rank's stores are complete and visible), the node MPI_Barrier
 * (orders the ranks), MPI_Win_sync (later loads see the others' stores), the pattern
 * MPI-3.1 section 11.7 gives for load/store through shared windows. Between two
 * node_syncs a float is written by at most one rank and read by none other, or only
 * read: a rank's activations and deltas are written by it in forward/backward and read
 * by the others between the first and the last barrier of the step; the parameters are
 * read in forward/backward and written (each slice by its owner) only between those
 * barriers.
 * CSV: program mpi, variant shm (the MPI family's rows, beside mpi/mpi's --sync modes).
 * Per epoch, outside the timed training: as mpi/mpi (common/mpi_run.h). Threads: one per
 * rank (MPI_Init). Errors: common/mpi_util.h.
 *
 * Compile: make mpi   (mpicc -std=c11 -O3 -march=native -Icommon mpi/shm.c common/{idx,options,results,checkpoint,watchdog}.c -lz -lm -pthread)
 * Run:     scripts/mpirun.sh 4 mpi/shm --data data/fashion --batch 512
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
#include "mpi_util.h"   /* rank, nranks, mpi_check(), agree_or_die(), shard(), hier_init() */
#include "options.h"
#include "owner.h"      /* the owner-computes sums of a slice */
#include "phase.h"      /* compute and comm seconds */
#include "prng.h"
#include "program.h"
#include "results.h"
#include "sharded_data.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"
#include "trace_mpi.h"  /* --trace: TRACE(cat, name) marks, the ranks' events gathered */
#include "watchdog.h"   /* --timeout-step: the stuck-rank watchdog */

#define PROGRAM "shm"
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */

// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

/* the one variant: X(id, CSV name, --sync value, help) */
#define SYNC_MODES(X) \
    X(SYNC_SHM, "shm", "shm", "one model per node in an MPI-3 shared window, each rank sums and updates a slice")
enum sync_kind { SYNC_MODES(VARIANT_ENUM) N_SYNC };
static const variant SYNC[] = { SYNC_MODES(VARIANT_ROW) };

typedef struct {
    train_options common;
    long batch_per_rank;        /* --batch-per-rank B (0: not given; --batch is global) */
    int batch_given;            /* --batch was on the command line */
    const char *dump_params;    /* --dump-params FILE (testing) */
} shm_options;

static void usage(void) {
    printf("Usage: scripts/mpirun.sh P mpi/shm [options]   (or mpirun -np P mpi/shm ...)\n"
           "Trains an MLP on MNIST-style IDX data over P MPI ranks, one copy of the model per node\n"
           "in an MPI-3 shared-memory window.\n\n");
    options_usage_common();
    printf("MPI+MPI:\n"
           "  --sync shm            the one exchange (accepted for mpi/mpi's command lines):\n");
    variant_usage(SYNC, N_SYNC);
    printf("  --batch-per-rank B    B rows per rank per step, i.e. a global batch of P*B\n"
           "  --dump-params FILE    after training, rank 0 writes the parameters (W1 b1 W2 ...,\n"
           "                        raw float32) to FILE (for the equivalence tests)\n"
           "Nodes: the ranks that share memory; PARTRAIN_RANKS_PER_NODE=K: pseudo-nodes of K ranks.\n");
    watchdog_usage();
    options_usage_exit_status();
}

/* Ranks other than 0 parse with stderr muted (common/mpi_util.h). */
static void parse_options(shm_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->batch_per_rank = 0;
    o->batch_given = 0;
    o->dump_params = NULL;
    int saved = mute_stderr_off_root();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { if (rank == 0) usage(); exit(0); }
        if (!strcmp(argv[i], "--list-variants")) { if (rank == 0) variant_list("--sync", SYNC, N_SYNC); exit(0); }
        if (!strcmp(argv[i], "--sync")) {
            variant_parse(PROGRAM, "--sync", options_value(PROGRAM, argc, argv, &i), SYNC, N_SYNC);
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
// model: the node's one parameter buffer (in the window, with per-layer views) and this
// rank's activations and deltas (in its segment of the window: the others read them)
//
// Layer l (1..L) maps size[l-1] inputs to size[l] outputs: W[l] is size[l-1] x size[l]
// row-major, its rows w_ld(size[l]) floats apart (common/maths.h), so the forward product
// is act[l-1] . W[l]; b[l] has size[l] entries.

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params, with padding that aligns each view */
    float *params;                /* all W and b, layer by layer: W1 b1 W2 b2 ... (the window's) */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    /* work buffers, sized for max_rows samples (the window's) */
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[0] = input batch, act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of hidden layer l */
    float *wt;                    /* transposed weights for the backward product */
} mlp;

/* The shape: sizes, n_params and params_alloc (what the window's parameters must hold). */
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
        m->params_alloc += PAD16((long)m->size[l - 1] * w_ld(m->size[l])) + PAD16(m->size[l]);
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

/* After mlp_shape and shm_init: the per-layer views of the window's parameters, the
 * initial parameters when init_params (only the node leader writes the node's one copy),
 * this rank's work buffers in its segment. */
static int mlp_init(mlp *m, const train_options *o, float *params, float *work, int init_params) {
    long widest = 0;
    for (int l = 1; l <= m->n_layers; l++) {
        long w = (long)m->size[l - 1] * m->size[l];
        if (w > widest) widest = w;
    }
    m->params = params;
    m->wt = alloc_floats(widest);
    if (!m->wt) return -1;
    work_views(m, work, m->act, m->delta);
    if (init_params) memset(m->params, 0, sizeof(float) * (size_t)m->params_alloc);   /* padding stays zero */
    float *p = m->params;
    for (int l = 1; l <= m->n_layers; l++) {
        int in = m->size[l - 1], out = m->size[l];
        m->W[l] = p; p += PAD16((long)in * w_ld(out));
        m->b[l] = p; p += PAD16(out);
        if (init_params) prng_init_dense_ld(m->W[l], w_ld(out), in, out, l, l == m->n_layers, o->seed);
    }
    return 0;
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
// backward: only the deltas of this rank's rows (the gradient sums are the owners',
// after the step's first node barrier)

/* delta[l-1] = (dz . W^T) * act'(act[l-1]) for layer l > 1 with dZ in dz */
static void dense_backward(mlp *m, int l, const float *dz, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    transpose_ld(m->W[l], w_ld(out), in, out, m->wt, in);
    epilogue e = EPI_PLAIN;
    e.deriv = m->act[l - 1];
    e.deriv_act = m->activation;
    matmul(rows, in, out, dz, out, 1, m->wt, in, m->delta[l - 1], in, &e);
}

// ----------------------------------------------------------------------------
// communication and update: the node's shared window (memory model: the file's header);
// every MPI call is checked and timed (common/phase.h's comm phase)

static hier_comms hier;          /* the node and leader communicators */

/* COMM(MPI_Barrier, (args)): call, check, count the seconds as the comm phase */
#define COMM(fn, args) do { \
        phase_begin(PHASE_COMM); \
        TRACE(trace_mpi_cat(#fn), #fn) mpi_check(fn args, #fn); \
        phase_end(PHASE_COMM); \
    } while (0)

static struct {
    MPI_Win win;
    int on;              /* the window exists (and is locked) */
    float **act, **dz;   /* node rank k's act[l] and dZ of layer l: [k * (L + 1) + l] */
    int *world;          /* node rank k's world rank */
    int *active, *rows;  /* scratch: the node ranks that had rows this step, and how many */
    const float **a, **d;   /* scratch: their act[l-1] and dZ of layer l */
    float *sum;          /* nodes > 1: the node's summed gradient, in the leader's segment, without W's
                          * row padding (only the model's floats cross nodes): layer l's weight
                          * gradient at sum_w[l], rows size[l] floats apart, its bias at sum_b[l] */
    long sum_alloc, sum_w[MAX_LAYERS + 1], sum_b[MAX_LAYERS + 1];
    float *tile;         /* a block of rows of one layer's gradient sum, summed over ranks */
} shm;

/* Hands the node's stores over to every rank of the node: MPI_Win_sync, MPI_Barrier,
 * MPI_Win_sync (counted as communication). */
static void node_sync(void) {
    TRACE(TRACE_WAIT, "win_sync") {
        COMM(MPI_Win_sync, (shm.win));
        COMM(MPI_Barrier, (hier.node));
        COMM(MPI_Win_sync, (shm.win));
    }
}

/* A rank's part of the window on a 64-byte boundary. OpenMPI puts the parts after a
 * header (8 bytes past a cache line here), and then every vector load of the kernel
 * spans two lines (all of AVX-512's, half of AVX2's; docs/NOTES.md 48). The mapping
 * starts on a page in every process, so each rank rounds up to the same byte of the
 * shared memory. */
static float *window_aligned(float *p) {
    return p + (64 - (uintptr_t)p % 64) % 64 / sizeof(float);
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
            die_all("PARTRAIN_RANKS_PER_NODE=%d: a pseudo-node spans hosts, and mpi/shm shares memory within one", hier.pseudo);
    }
    long n = m->params_alloc, nw = work_floats(m), P = hier.node_size, L = m->n_layers;
    int leader = hier.node_rank == 0;
    shm.sum_alloc = hier.nodes > 1 ? grad_layout(m->size, L, shm.sum_w, shm.sum_b) : 0;
    /* + 16 floats: room to start this rank's part on a cache line (window_aligned) */
    long mine = nw + (leader ? n + shm.sum_alloc : 0) + 16;
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
        fprintf(stderr, "%s: rank %d: mpi/shm needs a window in MPI's unified memory model\n", program_name, rank);
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
        p = window_aligned(p);
        if (k == 0) { lead = p; p += n + shm.sum_alloc; }
        if (k == hier.node_rank) *work = p;
        work_views(m, p, shm.act + k * (L + 1), delta);
        for (int l = 1; l <= L; l++) shm.dz[k * (L + 1) + l] = l == L ? shm.act[k * (L + 1) + L] : delta[l];
    }
    shm.sum = hier.nodes > 1 ? lead + n : NULL;
    *params = lead;
    if (leader && shm.sum) memset(shm.sum, 0, sizeof(float) * (size_t)shm.sum_alloc);
}

static void shm_free(void) {
    if (!shm.on) return;
    mpi_check(MPI_Win_unlock_all(shm.win), "MPI_Win_unlock_all");
    mpi_check(MPI_Win_free(&shm.win), "MPI_Win_free");
    free(shm.act); free(shm.dz); free(shm.world); free(shm.active); free(shm.rows); free(shm.a); free(shm.d); free(shm.tile);
    shm.on = 0;
}

/* --resume: rank 0 (a leader) loaded the parameters into its node's window;
 * the other leaders get them, then every node's ranks may read them. */
static void shm_resumed(const mlp *m) {
    if (hier.leaders != MPI_COMM_NULL && hier.nodes > 1)
        mpi_check(MPI_Bcast(m->params, (int)m->params_alloc, MPI_FLOAT, 0, hier.leaders), "MPI_Bcast");
    node_sync();
}

/* What the slice's bias sums become: one node, serial's update of the parameters in place;
 * nodes > 1, the node sum (updated from after the leaders' allreduce). */
static void shm_finish(float *restrict param, float *restrict node_sum, const float *restrict s, long n, float scale) {
    if (node_sum) memcpy(node_sum, s, sizeof(float) * (size_t)n);
    else for (long i = 0; i < n; i++) param[i] = fmaf(scale, s[i], param[i]);
}

/* The step's exchange and update, after every rank's backward has left its activations and deltas in the
 * window: node rank t owns a slice of the parameters (openmp reduction's: rows of each W,
 * columns of each b, in units of 16 floats) and forms its gradient sums itself, from the
 * buffers of the node's ranks that had rows: one chain of fmaf per element over node rank
 * 0's rows, going on over rank 1's, ... (common/owner.h), the last ending in the update
 * epilogue into W (or, nodes > 1, the plain sums into the node sum). One node: the
 * batch's rows in order, serial's chain and bits. A block of rows of the slice at a time,
 * so the sums never leave this core's L1 and no gradient crosses between cores: each
 * rank reads the others' activations and deltas (a few hundred KB) instead of their
 * gradients (the model's size). Across nodes through the node sum. */
static void exchange_and_update(mlp *m, float scale, int batch_rows) {
    int t = hier.node_rank, T = hier.node_size, L = m->n_layers, ng = 0, *active = shm.active;
    epilogue update = EPI_PLAIN;
    update.alpha = scale;
    update.accumulate = 1;
    update.shared_c = 1;   /* the slice of W the other ranks read in their forward */
    for (int k = 0; k < T; k++) {
        long lo, count;
        shard(batch_rows, shm.world[k], nranks, &lo, &count);
        if (count > 0) { active[ng] = k; shm.rows[ng] = (int)count; ng++; }
    }
    node_sync();                                   /* every rank's activations and deltas are complete */
    for (int l = 1; l <= L; l++) TRACE(TRACE_UPDATE, trace_layer("update", l)) {
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
            if (shm.sum)
                slice_gradient_block(shm.sum + shm.sum_w[l] + r0 * out, out, &EPI_PLAIN, shm.tile, rows, out, r0, in,
                                     shm.a, shm.d, shm.rows, ng);
            else
                slice_gradient_block(m->params + w + r0 * w_ld(out), w_ld(out), &update, shm.tile, rows, out, r0, in,
                                     shm.a, shm.d, shm.rows, ng);
        }
        slice_bias_sums(shm.tile, j0, j1, out, shm.d, shm.rows, ng);   /* gb[l], its columns j0..j1 */
        shm_finish(m->params + b + j0, shm.sum ? shm.sum + shm.sum_b[l] + j0 : NULL, shm.tile, j1 - j0, scale);
    }
    if (shm.sum) {
        node_sync();                               /* the node sum is complete */
        if (hier.leaders != MPI_COMM_NULL)
            COMM(MPI_Allreduce, (MPI_IN_PLACE, shm.sum, (int)shm.sum_alloc, MPI_FLOAT, MPI_SUM, hier.leaders));
        node_sync();                               /* every node's sum is in the node sum */
        for (int l = 1; l <= L; l++) TRACE(TRACE_UPDATE, "update") {
            long i0, i1, j0, j1;
            split_units(m->size[l - 1], t, T, 16, &i0, &i1);
            split_units(m->size[l], t, T, 16, &j0, &j1);
            float *bias_sum[1] = { shm.sum + shm.sum_b[l] };
            sgd_update_rows(m->W[l], shm.sum + shm.sum_w[l], m->size[l], i0, i1, scale);
            sum_update(m->b[l], bias_sum, 1, j0, j1, scale);
        }
    }
    node_sync();                                   /* the parameters are updated before any forward,
                                                      and no rank's buffers are read any more */
}

/* One SGD step on this rank's `rows` rows (already in act[0]) of a global batch of
 * batch_rows rows; returns this rank's summed loss. */
static double train_step(mlp *m, const unsigned char *y, int rows, int batch_rows, float lr, long *correct) {
    int L = m->n_layers;
    phase_begin(PHASE_COMPUTE);
    mlp_forward(m, rows);
    double loss;
    TRACE(TRACE_COMPUTE, "loss") loss = softmax_xent(m->act[L], y, rows, m->size[L], correct);
    for (int l = L; l > 1; l--)
        TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_backward(m, l, l == L ? m->act[L] : m->delta[l], rows);
    phase_end(PHASE_COMPUTE);
    float scale = -lr / (float)batch_rows;
    exchange_and_update(m, scale, batch_rows);
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
    shm_options so;
    parse_options(&so, argc, argv);
    train_options *o = &so.common;
    flags_agree(o, SYNC_SHM);
    char err[IDX_ERR_LEN] = "";
    hier_init(&hier);

    /* outputs (rank 0 writes them): checked before the work, not after it */
    agree_or_die(rank == 0 && (results_check_output(o->csv, "--csv", err, sizeof err) ||
                               results_check_output(so.dump_params, "--dump-params", err, sizeof err) ||
                               checkpoint_check_flags(o, err, sizeof err) ||
                               trace_check_output(o, (const char *[]){ so.dump_params, NULL }, err, sizeof err)), err, 2);
    agree_or_die(trace_open(o, 1, rank, 4 * MAX_LAYERS + 16, err, sizeof err), err, 2);

    /* data: every rank checks the files; the sizes decide the same errors on every rank */
    sharded_data data;
    load_sharded_data(o, so.batch_per_rank, rank_model_bytes, &data);
    dataset train = data.train, test = data.test;
    long train_n = data.train_n, test_n = data.test_n;

    /* model: the node's window; rank r holds at most ceil(B / P) rows of a batch */
    mlp m;
    long rank_rows = (o->batch + nranks - 1) / nranks;
    int max_rows = (int)(rank_rows > EVAL_BATCH ? rank_rows : EVAL_BATCH);
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_n);
    unsigned char *batch_y = malloc((size_t)max_rows);
    double *curves = malloc(sizeof(double) * 4 * (size_t)o->epochs);
    mlp_shape(&m, train.features, o, max_rows);
    if (m.params_alloc > INT_MAX) die_all("--hidden: %ld parameters are more than one MPI message can count", m.params_alloc);
    float *shared_params = NULL, *shared_work = NULL;   /* this rank's views of the window */
    shm_init(&m, &shared_params, &shared_work);
    int bad = mlp_init(&m, o, shared_params, shared_work, hier.node_rank == 0) || !order || !batch_y || !curves;
    agree_or_die(bad, "out of memory", 1);
    double *loss_curve = curves, *acc_curve = curves + o->epochs, *epoch_sec = curves + 2 * o->epochs,
           *comm_sec = curves + 3 * o->epochs;
    const char *variant = SYNC[SYNC_SHM].name;

    /* checkpoint: --resume goes on after the epochs the file holds (one copy per node) */
    checkpoint ck;
    checkpoint_init(&ck, PROGRAM, variant, nranks, 1, o, train.side, train_n, test_n, NULL, m.params, m.params_alloc,
                    (double *[]){ loss_curve, acc_curve, epoch_sec, comm_sec }, 4);
    resume_on_every_rank(&ck, o, 0);
    agree_or_die(target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err), err, 2);
    shm_resumed(&m);   /* (and the leader's initial values) */
    if (rank == 0) {
        printf("shm: %s MLP %d", options_activation_name(o->activation), m.size[0]);
        for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
        printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld (%ld..%ld per rank%s), lr %g, seed %llu,"
               " %d ranks\n", m.n_params, o->data_dir, train_n, test_n, train.side, train.side, o->batch,
               o->batch / nranks, rank_rows, so.batch_per_rank ? ", --batch-per-rank" : "", o->lr,
               (unsigned long long)o->seed, nranks);
        printf("shm: %d node%s, up to %d rank%s each sharing one copy of the model%s%s\n", hier.nodes,
               hier.nodes == 1 ? "" : "s", hier.max_node_size, hier.max_node_size == 1 ? "" : "s",
               hier.nodes > 1 ? ", node leaders allreduce the node sums" : "",
               hier.pseudo ? " (pseudo-nodes: PARTRAIN_RANKS_PER_NODE)" : "");
        if (o->resume) printf("shm: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);
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
        if (end_epoch(&log, epoch, loss_sum, correct, test_correct, seconds)) { shm_free(); return 1; }   /* every rank alike */
        int stop = target_reached(o, epoch, acc_curve[epoch - 1]);   /* the same sums on every rank */
        watchdog_beat();   /* a checkpoint being written is progress */
        TRACE_IF(checkpoint_due(o, epoch), TRACE_CHECKPOINT, "checkpoint")
            t_start += checkpoint_after_epoch_root(&ck, o, epoch, timer_now() - t_start);
        if (stop) break;
    }
    double total = timer_now() - t_start;

    /* every node's copy must be bit-identical (every node applied the same sums) */
    if (!replicas_identical(m.params, sizeof(float) * (size_t)m.params_alloc)) { shm_free(); return 1; }

    /* results: rank 0 alone */
    run_end end = { "mpi", variant, &log, train.side, dense_flops_per_sample(m.size, m.n_layers), total, so.dump_params,
                    m.n_layers, m.size, m.W, m.b, &m, evaluate };
    int status = finish_run(&end);
    if (trace_finish_mpi("mpi", variant, o)) status = 1;

    free(m.wt);       /* (the window's buffers: shm_free) */
    shm_free();
    hier_free(&hier);
    dataset_free(&train);
    if (data.test_count > 0) dataset_free(&test);
    free(order); free(batch_y); free(curves);
    return status;
}
#endif
