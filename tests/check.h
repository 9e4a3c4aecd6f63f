/*
 * tests/check.h — the tiny reporting convention of partrain's C tests.
 * Each check prints one line, "PASS <name>", "FAIL <name>: <detail>" or
 * "SKIP <name>: <reason>"; tests/run.sh counts them and prints the verdict line.
 * A test program exits 1 if any of its checks failed. Comparisons are NaN-safe: a
 * check passes only if err <= tol holds, which is false when err is NaN.
 */
#ifndef PARTRAIN_CHECK_H
#define PARTRAIN_CHECK_H
#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failures = 0;

#define CHECK(name, cond, ...) do { \
    if (cond) printf("PASS %s\n", name); \
    else { printf("FAIL %s: ", name); printf(__VA_ARGS__); printf("\n"); check_failures++; } \
    fflush(stdout); } while (0)

#define SKIP(name, ...) do { printf("SKIP %s: ", name); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

/* max |a-b| / max(1,|b|) over n floats; NaN anywhere gives NaN */
static inline double check_max_rel_err(const float *a, const float *b, long n) {
    double worst = 0.0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
        if (d != d) return d;           /* NaN: report it, never hide it */
        if (d > worst) worst = d;
    }
    return worst;
}

#define CHECK_CLOSE(name, a, b, n, tol) do { \
    double err_ = check_max_rel_err((a), (b), (n)); \
    CHECK(name, err_ <= (tol), "max rel err %.3g > tol %.3g", err_, (double)(tol)); } while (0)

#define CHECK_EXIT() return check_failures ? 1 : 0

#endif
