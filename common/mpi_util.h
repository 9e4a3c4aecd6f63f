/*
 * common/mpi_util.h — the MPI plumbing every MPI trainer has verbatim (header-only):
 * this process's rank, checked MPI calls, set-up errors every rank agrees on, option
 * errors printed once, and MPI finalized on any exit (the sharded loader is
 * common/sharded_data.h, checkpoints over the ranks common/checkpoint_mpi.h).
 * Messages start with common/program.h's program_name.
 * Errors: every MPI call goes through mpi_check() with MPI_ERRORS_RETURN set on
 * MPI_COMM_WORLD, so a failing call prints one line naming the rank and the call and
 * the whole job ends (MPI_Abort): no rank waits forever in a collective.
 * Also the two-level (hierarchical) allreduce of `--sync hierarchical` and bench/comm:
 * hier_init() builds the node and leader communicators, hier_allreduce() sums over them.
 */
#ifndef PARTRAIN_MPI_UTIL_H
#define PARTRAIN_MPI_UTIL_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* POSIX calls under -std=c11, when this is the first include */
#endif

#include <fcntl.h>
#include <string.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <unistd.h>

#include <mpi.h>

#include "idx.h"       /* IDX_ERR_LEN */
#include "options.h"
#include "program.h"
#include "timer.h"

static int rank = 0, nranks = 1;   /* this process in MPI_COMM_WORLD */

/* A failed MPI call: one line naming the rank, the call and MPI's message, then MPI_Abort */
static inline void mpi_check(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error code %d", rc);
    fprintf(stderr, "%s: rank %d: %s failed: %s\n", program_name, rank, call, msg);
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
    if (rank == lowest) fprintf(stderr, "%s: %s\n", program_name, msg);
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
    if (rank == 0) fprintf(stderr, "%s: %s (see --help)\n", program_name, msg);   /* options_die()'s form; every rank agrees */
    exit(2);
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
        fprintf(stderr, "%s: the model replicas differ between ranks after training; no result written\n", program_name);
    return hmin == hmax;
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
                poll(NULL, 0, 1);   /* 1 ms */
        if (!done) {
            if (muted_stderr >= 0) {   /* its message went to /dev/null with the other ranks' */
                char line[1024];
                int n = snprintf(line, sizeof line, "%s: rank %d: %s; the other ranks accepted their flags: every "
                                 "rank must run the same command line\n", program_name, rank, options_error);
                if (n > 0 && write(muted_stderr, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1) < 0) { /* nowhere else to say it */ }
            } else
                fprintf(stderr, "%s: rank %d: the other ranks accepted their flags: every rank must run the "
                        "same command line\n", program_name, rank);
            _exit(2);
        }
    }
    MPI_Finalize();
}

/* The start of every single-threaded MPI program: MPI_Init (exit 1 with one line when it
 * fails), MPI_Finalize at exit (finalize_at_exit), errors returned rather than fatal so
 * that mpi_check() can name the call, and rank, nranks. */
static void __attribute__((unused)) mpi_start(int *argc, char ***argv) {
    if (MPI_Init(argc, argv) != MPI_SUCCESS) { fprintf(stderr, "%s: MPI_Init failed\n", program_name); exit(1); }
    atexit(finalize_at_exit);
    mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
}

#endif
