/*
 * bench/handover.c — what it costs to write memory that another core has read: the
 * owner scheme's step (mpi/shm, openmp --accum owner), where each worker updates its
 * slice of W in place and the others read that slice in their next forward.
 *
 * Two threads pinned to two CPUs share a buffer of N bytes. Each round, thread A updates
 * every float of it (x += 1) three ways, and after each way thread B reads all of it:
 *   local     the update of a buffer only A touches (the same size): the floor;
 *   shared    the update of the shared buffer, whose lines B holds after its read: each
 *             write must first take its line back from B's cache, a round trip;
 *   ahead     the same, asking for each line DIST bytes ahead for writing
 *             (__builtin_prefetch(p, 1, 3), as common/gemm.h does when shared_c is set),
 *             so that the round trips overlap;
 * and B's read of what A wrote after the shared ways (lines modified in A's cache). Prints the median over the
 * rounds of each, in microseconds. docs/NOTES.md 44 gives the figures of one day.
 *
 *   make bench/handover && bench/handover                # 470 KB: half the default model
 *   bench/handover 0 1 --bytes 940000 --rounds 300 --ahead 4096
 * Exit 2 on bad input (one line), 1 when the threads cannot be pinned.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <string.h>

#include "cpu_pair.h"   /* now(), pin(), parse_long(), median_of(), cpu_pair() */

enum { LOCAL, SHARED, AHEAD, READ, N_TIMES };
static const char *const NAMES[N_TIMES] = { "local update", "shared update", "shared update, lines asked ahead",
                                            "the other core reads it" };

static float *shared_buf;
static long n_floats, ahead_floats;
static int rounds;
static _Alignas(64) _Atomic int turn;   /* odd: B reads; even: A's turn */

typedef struct { int cpu, pinned; double *read_us; } reader_arg;

/* B: after each of A's updates, reads the buffer (one float per line is enough to pull
 * every line into its cache) and hands the turn back */
static void *reader(void *p) {
    reader_arg *a = p;
    a->pinned = pin(a->cpu) == 0;
    volatile float sink = 0;
    for (int k = 1; k <= 3 * rounds; k++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * k - 1) { }
        double t0 = now();
        float s = 0;
        for (long i = 0; i < n_floats; i += 16) s += shared_buf[i];
        sink = s;
        a->read_us[k - 1] = 1e6 * (now() - t0);
        atomic_store_explicit(&turn, 2 * k, memory_order_release);
    }
    (void)sink;
    return NULL;
}

static void update(float *restrict x, long n) {
    for (long i = 0; i < n; i++) x[i] += 1.0f;
}

static void update_ahead(float *restrict x, long n, long ahead) {
    for (long i = 0; i < n; i += 16) {
        if (i + ahead < n) __builtin_prefetch(x + i + ahead, 1, 3);
        long end = i + 16 < n ? i + 16 : n;
        for (long j = i; j < end; j++) x[j] += 1.0f;
    }
}

int main(int argc, char **argv) {
    long cpus[2], n_cpus = 0, bytes = 470000, ahead = 4096, r = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("Usage: bench/handover [CPU_A CPU_B] [--bytes N] [--ahead DIST] [--rounds R]\n"
                   "The cost of updating N bytes (default 470000) that another core has read, against a\n"
                   "buffer only this core touches, and with each line asked for DIST bytes ahead\n"
                   "(default 4096); R rounds (default 200); the first two CPUs this process may use.\n");
            return 0;
        }
        long *target = !strcmp(argv[i], "--bytes") ? &bytes : !strcmp(argv[i], "--ahead") ? &ahead
                     : !strcmp(argv[i], "--rounds") ? &r : NULL;
        if (target) {
            long lo = target == &r ? 1 : 64, hi = target == &r ? 100000 : 1L << 30;
            if (i + 1 >= argc || parse_long(argv[i + 1], lo, hi, target)) {
                fprintf(stderr, "handover: %s needs an integer in %ld..%ld\n", argv[i], lo, hi);
                return 2;
            }
            i++;
            continue;
        }
        if (n_cpus < 2 && !parse_long(argv[i], 0, CPU_SETSIZE - 1, &cpus[n_cpus])) { n_cpus++; continue; }
        fprintf(stderr, "handover: unexpected argument '%s' (see --help)\n", argv[i]);
        return 2;
    }
    cpu_pair("handover", cpus, (int)n_cpus);

    rounds = (int)r;
    n_floats = (bytes + 63) / 64 * 16;
    ahead_floats = ahead / 4;
    size_t size = sizeof(float) * (size_t)n_floats;
    shared_buf = aligned_alloc(64, size);
    float *local = aligned_alloc(64, size);
    double *t[N_TIMES];
    for (int k = 0; k < N_TIMES; k++) t[k] = malloc(sizeof(double) * 3 * (size_t)rounds);
    if (!shared_buf || !local || !t[0] || !t[1] || !t[2] || !t[3]) { fprintf(stderr, "handover: out of memory\n"); return 1; }
    memset(shared_buf, 0, size);
    memset(local, 0, size);
    if (pin((int)cpus[0])) { fprintf(stderr, "handover: cannot pin to CPU %ld\n", cpus[0]); return 1; }
    double *reads = malloc(sizeof(double) * 3 * (size_t)rounds);
    if (!reads) { fprintf(stderr, "handover: out of memory\n"); return 1; }
    reader_arg arg = { (int)cpus[1], 0, reads };
    pthread_t th;
    if (pthread_create(&th, NULL, reader, &arg)) { fprintf(stderr, "handover: cannot start the second thread\n"); return 1; }
    for (int k = 1; k <= 3 * rounds; k++) {   /* the three ways in turn, B reading after each */
        int way = (k - 1) % 3, round = (k - 1) / 3;
        double t0 = now();
        if (way == LOCAL) update(local, n_floats);
        else if (way == SHARED) update(shared_buf, n_floats);
        else update_ahead(shared_buf, n_floats, ahead_floats);
        t[way][round] = 1e6 * (now() - t0);
        atomic_store_explicit(&turn, 2 * k - 1, memory_order_release);
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * k) { }
    }
    pthread_join(th, NULL);
    if (!arg.pinned) { fprintf(stderr, "handover: cannot pin to CPU %ld\n", cpus[1]); return 1; }
    int n_reads = 0;   /* B's reads of what A wrote: after the shared updates */
    for (int k = 0; k < 3 * rounds; k++)
        if (k % 3 != LOCAL) t[READ][n_reads++] = reads[k];
    printf("handover: cpus %ld %ld, %ld bytes, median over %d rounds:\n", cpus[0], cpus[1], n_floats * 4, rounds);
    for (int k = 0; k < N_TIMES; k++) {
        double m = median_of(t[k], k == READ ? n_reads : rounds);
        printf("  %-34s %8.1f us\n", NAMES[k], m);
    }
    printf("  (lines asked for %ld bytes ahead)\n", ahead);
    return 0;
}
