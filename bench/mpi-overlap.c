/*
 * bench/mpi-overlap.c — can a non-blocking MPI_Iallreduce progress while the rank computes?
 *
 * The question behind mpi/mpi's --sync overlap: an Iallreduce started during backward
 * hides communication only if the transfer advances while the rank is busy with its
 * products, i.e. without the rank calling into MPI. This program times, for the
 * default MLP's gradient (per-layer segments of 1,296 + 32,896 + 200,960 floats = the
 * 235,152 floats mpi/mpi exchanges), averaged over --iters iterations:
 *   allreduce        one blocking MPI_Allreduce of the whole gradient
 *   iallreduce       one MPI_Iallreduce per layer, MPI_Waitall at once
 *   overlap-nocalls  the largest layer's MPI_Iallreduce started first, then --compute-us
 *                    microseconds of computation without any MPI call, then MPI_Waitall
 *                    (likewise the two small layers): if MPI progressed in the
 *                    background, the wait would shrink by up to the compute time
 *   overlap-poke     the same, with MPI_Testall every --poke-us microseconds of the
 *                    computation (what mpi/mpi does between its products)
 * For each: the wall time per iteration and the part spent inside MPI calls (the
 * exposed communication). "hidden" = (allreduce time) - (exposed time of the mode).
 * Output: '#' header lines, then whitespace columns (gnuplot-ready), rank 0 only.
 *
 * Compile: mpicc -std=c11 -O2 bench/mpi-overlap.c -o /tmp/mpi-overlap
 * Run:     scripts/mpirun.sh 2 /tmp/mpi-overlap [--iters N] [--compute-us C] [--poke-us T]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "mpi-overlap: %s failed: %s\n", what, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* busy CPU work for `us` microseconds; every poke_us (0: never) MPI_Testall on the
 * pending requests, whose time is added to *in_mpi */
static volatile float sink;
static void compute(double us, double poke_us, MPI_Request *req, int n, double *in_mpi) {
    double end = now() + us * 1e-6, next_poke = poke_us > 0 ? now() + poke_us * 1e-6 : 1e300;
    float x = 1.0f, y = 0.999f;
    for (;;) {
        for (int i = 0; i < 256; i++) x = x * y + 1e-7f;   /* a dependent chain: pure core work */
        double t = now();
        if (t >= end) break;
        if (t >= next_poke && n > 0) {
            int done;
            check(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
            double t2 = now();
            *in_mpi += t2 - t;
            next_poke = t2 + poke_us * 1e-6;
        }
    }
    sink = x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = 200;
    double compute_us = 1000, poke_us = 100;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--compute-us")) compute_us = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--poke-us")) poke_us = atof(argv[i + 1]);
        else { if (!rank) fprintf(stderr, "mpi-overlap: unknown option %s\n", argv[i]); MPI_Finalize(); return 2; }
    }
    if (iters < 1 || compute_us < 0) { if (!rank) fprintf(stderr, "mpi-overlap: bad --iters/--compute-us\n"); MPI_Finalize(); return 2; }
    enum { NSEG = 3 };
    const int seg[NSEG] = { 200960, 32896, 1296 };   /* layer 1 (largest) first */
    int total = 0;
    for (int s = 0; s < NSEG; s++) total += seg[s];
    float *g = calloc((size_t)total, sizeof(float));
    if (!g) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < total; i++) g[i] = 1e-3f * (float)(i % 97);

    const char *names[4] = { "allreduce", "iallreduce", "overlap-nocalls", "overlap-poke" };
    double wall[4] = {0}, in_mpi[4] = {0};
    for (int mode = 0; mode < 4; mode++) {
        for (int it = -10; it < iters; it++) {   /* 10 warm-up iterations */
            check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
            double t0 = now(), m = 0.0;
            if (mode == 0) {
                check(MPI_Allreduce(MPI_IN_PLACE, g, total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
                m = now() - t0;
            } else {
                MPI_Request req[NSEG];
                float *p = g;
                for (int s = 0; s < NSEG; s++) {
                    double t = now();
                    check(MPI_Iallreduce(MPI_IN_PLACE, p, seg[s], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[s]), "MPI_Iallreduce");
                    m += now() - t;
                    p += seg[s];
                    if (mode >= 2) compute(compute_us / NSEG, mode == 3 ? poke_us : 0, req, s + 1, &m);
                }
                double t = now();
                check(MPI_Waitall(NSEG, req, MPI_STATUSES_IGNORE), "MPI_Waitall");
                m += now() - t;
            }
            if (it >= 0) { wall[mode] += now() - t0; in_mpi[mode] += m; }
        }
    }
    /* the slowest rank's view */
    double w[4], x[4];
    MPI_Reduce(wall, w, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(in_mpi, x, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# mpi-overlap: %d ranks, gradient of %d floats in %d per-layer segments, %d iterations,"
               " %.0f us of computation per iteration (modes 3-4), MPI_Testall every %.0f us (mode 4)\n",
               size, total, NSEG, iters, compute_us, poke_us);
        printf("# %-16s %12s %14s %12s\n", "mode", "wall_ms", "in_mpi_ms", "hidden_ms");
        double base = x[0] / iters * 1e3;
        for (int mode = 0; mode < 4; mode++)
            printf("  %-16s %12.3f %14.3f %12.3f\n", names[mode], w[mode] / iters * 1e3, x[mode] / iters * 1e3,
                   base - x[mode] / iters * 1e3);
    }
    free(g);
    MPI_Finalize();
    return 0;
}
