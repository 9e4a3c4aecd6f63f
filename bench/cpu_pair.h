/*
 * bench/cpu_pair.h — what bench/c2c.c, bench/handover.c and bench/gemm-step.c share
 * (header-only): two threads pinned to two CPUs, the clock, integer arguments, the median
 * of the rounds.
 */
#ifndef PARTRAIN_CPU_PAIR_H
#define PARTRAIN_CPU_PAIR_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the calling thread onto CPU cpu; 0 when it worked */
static inline int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* a decimal integer in lo..hi into *out (no sign, no spaces, nothing after it); -1 if not */
static inline int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || s[0] < '0' || s[0] > '9' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static inline int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* the median of v[0..n) (sorts v) */
static inline double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The pair of CPUs: the n_given (0 or 2) in cpus, or else the first two this process may
 * use. Exit 2 with one line (prog: ...) when there is no such pair, 1 when the CPU set
 * cannot be read. */
static inline void cpu_pair(const char *prog, long cpus[2], int n_given) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) { fprintf(stderr, "%s: cannot read the CPU set\n", prog); exit(1); }
    if (n_given == 1) { fprintf(stderr, "%s: give two CPUs or none\n", prog); exit(2); }
    int n = n_given;
    if (n == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
    if (n < 2) { fprintf(stderr, "%s: this process may use only one CPU: no pair to measure\n", prog); exit(2); }
    if (cpus[0] == cpus[1]) { fprintf(stderr, "%s: the two CPUs must differ\n", prog); exit(2); }
    for (int k = 0; k < 2; k++)
        if (!CPU_ISSET(cpus[k], &allowed)) {
            fprintf(stderr, "%s: CPU %ld is not in this process's CPU set\n", prog, cpus[k]);
            exit(2);
        }
}

#endif
