/*
 * bench/c2c.c — core-to-core latency: a cache-line ping-pong between two threads pinned to
 * two CPUs, the round trip in nanoseconds (median, min and max over the rounds).
 *
 * Why: every 2-worker strategy hands data between cores once or more per step (a barrier,
 * a critical section, a window sync, the gradient). How long one cache line takes to go
 * there and back differs between VMs (two vCPUs on one chiplet or on two) and explains
 * much of the day-to-day spread of the speedups. run_all records it in machine.json.
 *
 * Each round: thread A writes n+1 into the shared line, spins until B has written n+2,
 * ROUNDTRIPS times; the round's time / ROUNDTRIPS is one round trip. The line is alone in
 * its 64 bytes (no false sharing with the loop counters).
 *
 *   cc -std=c11 -O2 -pthread bench/c2c.c -o /tmp/c2c
 *   /tmp/c2c              # the first two CPUs this process may use
 *   /tmp/c2c 0 1 --rounds 50 --csv
 * Output: "c2c: cpus A B: round trip median M ns (min m, max x) over R rounds", or with
 * --csv one line "cpu_a,cpu_b,median_ns,min_ns,max_ns,rounds". Exit 2 on bad input (one
 * line), 1 when the threads cannot be pinned.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <string.h>

#include "cpu_pair.h"   /* now(), pin(), parse_long(), median_of(), cpu_pair() */

enum { ROUNDTRIPS = 20000 };

static _Alignas(64) _Atomic long line;      /* the ping-pong line */
static _Alignas(64) _Atomic int start_round; /* round number A has started (B follows) */

typedef struct { int cpu, rounds, pinned; } pong_arg;

static void *pong(void *p) {
    pong_arg *a = p;
    a->pinned = pin(a->cpu) == 0;
    for (int r = 1; r <= a->rounds; r++) {
        while (atomic_load_explicit(&start_round, memory_order_acquire) < r) { }
        long base = 2L * ROUNDTRIPS * (r - 1);
        for (long i = 0; i < ROUNDTRIPS; i++) {
            long want = base + 2 * i + 1;
            while (atomic_load_explicit(&line, memory_order_acquire) != want) { }
            atomic_store_explicit(&line, want + 1, memory_order_release);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    long cpus[2], n_cpus = 0, rounds = 30;
    int csv = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("Usage: bench/c2c [CPU_A CPU_B] [--rounds R] [--csv]\n"
                   "Round trip of one cache line between two pinned threads (default: the first two\n"
                   "CPUs this process may use; R rounds of %d round trips, default 30).\n", ROUNDTRIPS);
            return 0;
        }
        if (!strcmp(argv[i], "--csv")) { csv = 1; continue; }
        if (!strcmp(argv[i], "--rounds")) {
            if (i + 1 >= argc || parse_long(argv[i + 1], 1, 100000, &rounds)) {
                fprintf(stderr, "c2c: --rounds needs an integer in 1..100000\n");
                return 2;
            }
            i++;
            continue;
        }
        if (n_cpus < 2 && !parse_long(argv[i], 0, CPU_SETSIZE - 1, &cpus[n_cpus])) { n_cpus++; continue; }
        fprintf(stderr, "c2c: unexpected argument '%s' (see --help)\n", argv[i]);
        return 2;
    }
    cpu_pair("c2c", cpus, (int)n_cpus);

    if (pin((int)cpus[0])) { fprintf(stderr, "c2c: cannot pin to CPU %ld\n", cpus[0]); return 1; }
    pong_arg arg = { (int)cpus[1], (int)rounds, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, pong, &arg)) { fprintf(stderr, "c2c: cannot start the second thread\n"); return 1; }
    double *ns = malloc(sizeof(double) * (size_t)rounds);
    if (!ns) { fprintf(stderr, "c2c: out of memory\n"); return 1; }
    for (int r = 1; r <= rounds; r++) {
        long base = 2L * ROUNDTRIPS * (r - 1);
        atomic_store_explicit(&start_round, r, memory_order_release);
        double t0 = now();
        for (long i = 0; i < ROUNDTRIPS; i++) {
            long mine = base + 2 * i + 1;
            atomic_store_explicit(&line, mine, memory_order_release);
            while (atomic_load_explicit(&line, memory_order_acquire) != mine + 1) { }
        }
        ns[r - 1] = 1e9 * (now() - t0) / ROUNDTRIPS;
    }
    pthread_join(t, NULL);
    if (!arg.pinned) { fprintf(stderr, "c2c: cannot pin to CPU %ld\n", cpus[1]); free(ns); return 1; }
    double median = median_of(ns, (int)rounds);   /* (sorts ns: then ns[0] is the least) */
    if (csv)
        printf("%ld,%ld,%.1f,%.1f,%.1f,%ld\n", cpus[0], cpus[1], median, ns[0], ns[rounds - 1], rounds);
    else
        printf("c2c: cpus %ld %ld: round trip median %.1f ns (min %.1f, max %.1f) over %ld rounds of %d\n",
               cpus[0], cpus[1], median, ns[0], ns[rounds - 1], rounds, ROUNDTRIPS);
    free(ns);
    return 0;
}
