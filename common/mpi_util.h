/*
 * common/mpi_util.h — the MPI plumbing every MPI trainer has verbatim (header-only):
 * this process's rank, checked MPI calls, set-up errors every rank agrees on, the
 * shards of a data set, option errors printed once, and MPI finalized on any exit.
 * The including file defines PROGRAM and includes <mpi.h> and options.h first.
 * Errors: every MPI call goes through mpi_check() with MPI_ERRORS_RETURN set on
 * MPI_COMM_WORLD, so a failing call prints one line naming the rank and the call and
 * the whole job ends (MPI_Abort): no rank waits forever in a collective.
 */
#ifndef PARTRAIN_MPI_UTIL_H
#define PARTRAIN_MPI_UTIL_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rank == 0) options_die(PROGRAM, "%s", msg);
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
static inline int mute_stderr_off_root(void) {
    if (rank == 0) return -1;
    fflush(stderr);
    int saved = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) { dup2(devnull, 2); close(devnull); }
    return saved;
}
static inline void unmute_stderr(int saved) {
    if (saved >= 0) { fflush(stderr); dup2(saved, 2); close(saved); }
}

/* exit() anywhere (bad flags on every rank, --help) still finalizes MPI, so mpirun sees
 * a clean exit with our status instead of a process "exiting improperly" */
static inline void finalize_at_exit(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Finalize();
}

#endif
