/*
 * common/mpi_util.h — the MPI plumbing every MPI trainer has verbatim (header-only):
 * this process's rank, checked MPI calls, set-up errors every rank agrees on, the
 * shards of a data set, option errors printed once, and MPI finalized on any exit.
 * The including file defines PROGRAM and includes <mpi.h> and options.h first.
 * Errors: every MPI call goes through mpi_check() with MPI_ERRORS_RETURN set on
 * MPI_COMM_WORLD, so a failing call prints one line naming the rank and the call and
 * the whole job ends (MPI_Abort): no rank waits forever in a collective.
 * Also the two-level (hierarchical) allreduce of `--sync hierarchical` and bench/comm:
 * hier_init() builds the node and leader communicators, hier_allreduce() sums over them.
 */
#ifndef PARTRAIN_MPI_UTIL_H
#define PARTRAIN_MPI_UTIL_H

#include <fcntl.h>
#include <string.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "checkpoint.h"
#include "idx.h"
#include "memcheck.h"
#include "timer.h"

static int rank = 0, nranks = 1;   /* this process in MPI_COMM_WORLD */

/* A failed MPI call: one line naming the rank, the call and MPI's message, then MPI_Abort */
static inline void mpi_check(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error code %d", rc);
    fprintf(stderr, PROGRAM ": rank %d: %s failed: %s\n", rank, call, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Set-up errors (data files, memory): if any rank failed, the lowest failing rank prints
 * its one-line message and every rank exits with status `status`. */
static inline void agree_or_die(int failed, const char *msg, int status) {
    int mine = failed ? rank : nranks, lowest = nranks;
    mpi_check(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (lowest == nranks) return;
    if (rank == lowest) fprintf(stderr, PROGRAM ": %s\n", msg);
    exit(status);
}

/* An error every rank detects alike (a flag against the data): rank 0 prints it as
 * options_die() would, every rank exits 2. */
static void die_all(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, unused));
static void die_all(const char *fmt, ...) {
    char msg[IDX_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rank == 0) fprintf(stderr, PROGRAM ": %s (see --help)\n", msg);   /* options_die()'s form; every rank agrees */
    exit(2);
}

/* part k's contiguous range [*lo, *lo + *count) of n items over `parts` parts: sizes
 * differ by at most one */
static inline void shard(long n, int k, int parts, long *lo, long *count) {
    long base = n / parts, rem = n % parts;
    *lo = k * base + (k < rem ? k : rem);
    *count = base + (k < rem ? 1 : 0);
}

/* Ranks other than 0 parse the flags with stderr muted: the flags are the same on every
 * rank, so rank 0 alone prints options_die()'s one-line error; every rank exits with
 * status 2. Returns the saved stderr for unmute_stderr() (-1: nothing muted). */
static int muted_stderr = -1;   /* the real stderr while muted (finalize_at_exit writes there) */
static inline int mute_stderr_off_root(void) {
    if (rank == 0) return -1;
    fflush(stderr);
    int saved = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) { dup2(devnull, 2); close(devnull); }
    return muted_stderr = saved;
}
static inline void unmute_stderr(int saved) {
    if (saved >= 0) { fflush(stderr); dup2(saved, 2); close(saved); }
    muted_stderr = -1;
}

/* Every rank must run the same command line (mpirun's MPMD form, `A : B`, can give ranks
 * other ones): the flags that shape the training, and `own` (the trainer's own, e.g. its
 * --sync), compared over the ranks right after parsing (--test may differ: it only sizes
 * each rank's test shard, and tests/test_watchdog.sh unbalances the ranks with it); different ones: one line from
 * rank 0, every rank exits 2, instead of ranks that wait for each other forever. */
static inline void flags_agree(const train_options *o, long own) {
    long v[] = { o->epochs, o->batch, o->batch_full, o->train_n, o->image_size, o->n_hidden,
                 o->activation, (long)(o->lr * 1e12), (long)(o->seed >> 1), o->checkpoint_every, own,
                 o->hidden[0], o->hidden[1], o->hidden[2], o->hidden[3], o->hidden[4], o->hidden[5], o->hidden[6],
                 o->hidden[7], o->lr_scaling, o->lr_base_batch, o->warmup_epochs, (long)(o->target_accuracy * 1e6) };
    unsigned long long h = 0xcbf29ce484222325ull, lo, hi;
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) h = (h ^ (unsigned long long)v[k]) * 0x100000001b3ull;
    mpi_check(MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (lo != hi) die_all("the ranks were given different flags (mpirun's 'A : B' form?): every rank must run the same command line");
}

/* How many ranks of this run share this rank's node (and so its memory). */
static inline int ranks_on_this_node(void) {
    int local = 1;
    MPI_Comm node;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    mpi_check(MPI_Comm_size(node, &local), "MPI_Comm_size");
    mpi_check(MPI_Comm_free(&node), "MPI_Comm_free");
    return local;
}

/* ---- the hierarchical allreduce (--sync hierarchical; bench/comm's op hierarchical)
 * Sum a float buffer over every rank in three steps: MPI_Reduce to the node's first rank
 * within each node (shared memory), MPI_Allreduce among those leaders (one rank per node:
 * the only traffic between nodes, once per node instead of once per rank), MPI_Bcast
 * within each node. The nodes: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); the test hook
 * PARTRAIN_RANKS_PER_NODE=K instead makes pseudo-nodes of K consecutive world ranks
 * (MPI_Comm_split by rank / K), so that one machine can test several nodes.
 * Sum order: MPI's (a reduction's order is the implementation's choice, fixed for a
 * given communicator size in OpenMPI's default algorithms): reruns with the same ranks
 * and nodes give the same bits, other P or K do not (docs/mpi.md). */
typedef struct {
    MPI_Comm node;       /* the ranks of this rank's node (node rank 0: its leader) */
    MPI_Comm leaders;    /* the leaders of every node; MPI_COMM_NULL on the other ranks */
    int node_rank, node_size;
    int nodes;           /* how many nodes the run spans */
    int max_node_size;   /* ranks on the fullest node */
    int pseudo;          /* PARTRAIN_RANKS_PER_NODE's K (0: the real nodes) */
} hier_comms;

/* Collective over MPI_COMM_WORLD. A bad PARTRAIN_RANKS_PER_NODE: one line, exit 2 (every
 * rank sees the same environment from mpirun). */
static void __attribute__((unused)) hier_init(hier_comms *h) {
    memset(h, 0, sizeof *h);
    h->leaders = MPI_COMM_NULL;
    const char *k = getenv("PARTRAIN_RANKS_PER_NODE");
    if (k && *k) {
        char *end = NULL;
        long v = strtol(k, &end, 10);
        if (*end || v < 1 || v > 1000000)
            die_all("PARTRAIN_RANKS_PER_NODE='%s': expected a positive number of ranks per pseudo-node", k);
        h->pseudo = (int)v;
        mpi_check(MPI_Comm_split(MPI_COMM_WORLD, rank / h->pseudo, rank, &h->node), "MPI_Comm_split");
    } else {
        mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &h->node),
                  "MPI_Comm_split_type");
    }
    mpi_check(MPI_Comm_set_errhandler(h->node, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(h->node, &h->node_rank), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(h->node, &h->node_size), "MPI_Comm_size");
    mpi_check(MPI_Comm_split(MPI_COMM_WORLD, h->node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &h->leaders), "MPI_Comm_split");
    if (h->leaders != MPI_COMM_NULL)
        mpi_check(MPI_Comm_set_errhandler(h->leaders, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    int leader = h->node_rank == 0;
    mpi_check(MPI_Allreduce(&leader, &h->nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(&h->node_size, &h->max_node_size, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
}

static void __attribute__((unused)) hier_free(hier_comms *h) {
    if (h->node_size == 0) return;   /* hier_init() was not run */
    if (h->leaders != MPI_COMM_NULL) mpi_check(MPI_Comm_free(&h->leaders), "MPI_Comm_free");
    mpi_check(MPI_Comm_free(&h->node), "MPI_Comm_free");
    h->node_size = 0;
}

/* buf[0..n) = its sum over every rank, in place, on every rank. Each call is checked here
 * (a failure names the step and ends the job), so this returns MPI_SUCCESS: the trainers
 * time it with their COMM(fn, args) like a plain MPI call. */
static int __attribute__((unused)) hier_allreduce(float *buf, int n, const hier_comms *h) {
    mpi_check(MPI_Reduce(h->node_rank == 0 ? MPI_IN_PLACE : buf, buf, n, MPI_FLOAT, MPI_SUM, 0, h->node),
              "MPI_Reduce (within the node)");
    if (h->leaders != MPI_COMM_NULL && h->nodes > 1)
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, h->leaders), "MPI_Allreduce (node leaders)");
    mpi_check(MPI_Bcast(buf, n, MPI_FLOAT, 0, h->node), "MPI_Bcast (within the node)");
    return MPI_SUCCESS;
}

/* The data of a data-parallel run, checked alike on every rank: the whole training set
 * (the shuffle is global, so every rank touches every sample) and this rank's contiguous
 * shard of the test set (empty when there are more ranks than test samples). Resolves
 * --batch full, and --batch-per-rank B (0: not given) into a global batch of P * B.
 * Flags that do not fit the data: one line from rank 0, every rank exits 2. */
typedef struct {
    dataset train, test;
    long train_n, test_n;          /* samples used (--train, --test or the files') */
    long test_lo, test_count;      /* this rank's test shard */
} sharded_data;
static void __attribute__((unused)) load_sharded_data(train_options *o, long batch_per_rank,
                                                      double (*model_bytes)(const train_options *o, int features),
                                                      sharded_data *d) {
    char err[IDX_ERR_LEN] = "";
    memset(d, 0, sizeof *d);
    long train_avail = 0, test_avail = 0;
    int bad = dataset_count(o->data_dir, "train", &train_avail, err, sizeof err) ||
              dataset_count(o->data_dir, "t10k", &test_avail, err, sizeof err);
    agree_or_die(bad, err, 2);
    if (o->train_n > train_avail) die_all("--train %ld: %s holds only %ld training samples", o->train_n, o->data_dir, train_avail);
    if (o->test_n > test_avail) die_all("--test %ld: %s holds only %ld test samples", o->test_n, o->data_dir, test_avail);
    long train_n = d->train_n = o->train_n ? o->train_n : train_avail;
    d->test_n = o->test_n ? o->test_n : test_avail;
    if (nranks > train_n)
        die_all("%d ranks but only %ld training samples: every rank needs at least one (fewer ranks or a larger --train)", nranks, train_n);
    if (batch_per_rank) {
        o->batch = batch_per_rank * nranks;
        if (o->batch > train_n)
            die_all("--batch-per-rank %ld: %d ranks x %ld = %ld rows is larger than the %ld training samples",
                    batch_per_rank, nranks, batch_per_rank, o->batch, train_n);
    }
    if (o->batch_full) o->batch = train_n;
    if (o->batch > train_n) die_all("--batch %ld is larger than the %ld training samples", o->batch, train_n);
    if (o->batch < nranks)
        die_all("--batch %ld is smaller than the %d ranks: every rank needs at least one row of each mini-batch", o->batch, nranks);
    shard(d->test_n, rank, nranks, &d->test_lo, &d->test_count);
    /* the files' image sides, and whether the ranks of this node fit in its memory */
    int train_side = 0, test_side = 0;
    bad = dataset_side(o->data_dir, "train", &train_side, err, sizeof err) ||
          dataset_side(o->data_dir, "t10k", &test_side, err, sizeof err) ||
          (!o->image_size && dataset_check_sides(o->data_dir, train_side, test_side, err, sizeof err));
    agree_or_die(bad, err, 2);
    int side = o->image_size ? o->image_size : train_side, local = ranks_on_this_node();
    double need = mem_dataset_bytes(train_n + d->test_count, side) + (model_bytes ? model_bytes(o, side * side) : 0);
    bad = mem_short(need, local, "data, model and buffers", err, sizeof err);
    agree_or_die(bad, err, 2);
    bad = dataset_load(o->data_dir, "train", 0, train_n, o->image_size, &d->train, err, sizeof err);
    if (!bad && d->test_count > 0)
        bad = dataset_load(o->data_dir, "t10k", d->test_lo, d->test_count, o->image_size, &d->test, err, sizeof err);
    agree_or_die(bad, err, 2);
    /* every rank must have loaded the same training set (the same files on every node):
     * its size, image side and bytes, compared over the ranks */
    unsigned long long mine[3] = { (unsigned long long)d->train.n, (unsigned long long)d->train.side, 0xcbf29ce484222325ull };
    const unsigned char *p = (const unsigned char *)d->train.x;
    for (size_t i = 0; i < sizeof(float) * (size_t)d->train.n * (size_t)d->train.features; i++)
        mine[2] = (mine[2] ^ p[i]) * 0x100000001b3ull;
    for (long i = 0; i < d->train.n; i++) mine[2] = (mine[2] ^ d->train.y[i]) * 0x100000001b3ull;
    unsigned long long lo[3], hi[3];
    mpi_check(MPI_Allreduce(mine, lo, 3, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(mine, hi, 3, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (lo[0] != hi[0] || lo[1] != hi[1] || lo[2] != hi[2])
        die_all("the ranks loaded different training sets from %s/train-images (%llu..%llu samples, %llux%llu..%llux%llu "
                "images%s): every rank must see the same files", o->data_dir, lo[0], hi[0], lo[1], lo[1], hi[1], hi[1],
                lo[0] == hi[0] && lo[1] == hi[1] ? ", different contents" : "");
}

/* Whether every rank holds the same bytes (the model replicas after training): FNV-1a
 * of the bytes, its minimum and maximum over the ranks. When they differ, rank 0 says so
 * in one line (the run then writes no result). */
static inline int replicas_identical(const void *bytes, size_t n) {
    const unsigned char *p = (const unsigned char *)bytes;
    unsigned long long h = 0xcbf29ce484222325ull, hmin, hmax;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    mpi_check(MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (hmin != hmax && rank == 0)
        fprintf(stderr, PROGRAM ": the model replicas differ between ranks after training; no result written\n");
    return hmin == hmax;
}

/* --resume: rank 0 reads and checks the file (another node's ranks may not see it); if it
 * is bad, every rank exits 2; else rank 0 sends the state to every rank (the parameters
 * too when with_params: the replicas of data parallelism). */
static inline void resume_on_every_rank(checkpoint *c, const train_options *o, int with_params) {
    if (!o->resume) return;
    char err[IDX_ERR_LEN] = "";
    agree_or_die(rank == 0 && checkpoint_load(o->resume, c, o->epochs, err, sizeof err), err, 2);
    double state[2] = { (double)c->epochs_done, c->seconds };
    mpi_check(MPI_Bcast(state, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    c->epochs_done = (int)state[0];
    c->seconds = state[1];
    if (with_params) mpi_check(MPI_Bcast(c->params, (int)c->n_floats, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    for (int k = 0; k < c->n_series; k++)
        mpi_check(MPI_Bcast(c->series[k], c->epochs_done, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

/* After an epoch: rank 0 writes the checkpoint when one is due (the replicas are equal)
 * while the others wait, so that no epoch's time holds the write. Returns its seconds. */
static inline double checkpoint_after_epoch_root(const checkpoint *c, const train_options *o, int epoch, double seconds) {
    if (!checkpoint_due(o, epoch)) return 0.0;
    double t0 = timer_now();
    if (rank == 0) checkpoint_after_epoch(c, PROGRAM, o, epoch, seconds);
    mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return timer_now() - t0;
}

/* exit() anywhere (bad flags on every rank, --help) still finalizes MPI, so mpirun sees
 * a clean exit with our status instead of a process "exiting improperly". But a rank that
 * alone refused its flags (mpirun's MPMD form, `A : B`, gives ranks other command lines)
 * must not wait in MPI_Finalize while the others wait in a collective: the ranks that
 * refused flags meet in a barrier first; when the others do not come within 2 s, this
 * rank says why and leaves without MPI_Finalize, and mpirun ends the job. */
static inline void finalize_at_exit(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return;
    if (options_error[0] && nranks > 1) {
        MPI_Request req;
        int done = 0;
        double end = timer_now() + 2.0;
        if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS)
            while (!done && timer_now() < end && MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
                nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
        if (!done) {
            if (muted_stderr >= 0)   /* its message went to /dev/null with the other ranks' */
                dprintf(muted_stderr, PROGRAM ": rank %d: %s; the other ranks accepted their flags: every rank must "
                        "run the same command line\n", rank, options_error);
            else
                fprintf(stderr, PROGRAM ": rank %d: the other ranks accepted their flags: every rank must run the "
                        "same command line\n", rank);
            _exit(2);
        }
    }
    MPI_Finalize();
}

/* The start of every single-threaded MPI program: MPI_Init (exit 1 with one line when it
 * fails), MPI_Finalize at exit (finalize_at_exit), errors returned rather than fatal so
 * that mpi_check() can name the call, and rank, nranks. */
static void __attribute__((unused)) mpi_start(int *argc, char ***argv) {
    if (MPI_Init(argc, argv) != MPI_SUCCESS) { fprintf(stderr, PROGRAM ": MPI_Init failed\n"); exit(1); }
    atexit(finalize_at_exit);
    mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
}

#endif
