/*
 * common/mpi_run.h — the bookkeeping of a data-parallel MPI run, the same in mpi/mpi and
 * mpi/shm (header-only; no strategy): an epoch's totals over the ranks, summed in rank
 * order, and the end of the run on rank 0 (--predict, --dump-params, the result row and
 * its summary line with each rank's compute microseconds per row).
 */
#ifndef PARTRAIN_MPI_RUN_H
#define PARTRAIN_MPI_RUN_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* POSIX calls under -std=c11, when this is the first include */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "data.h"       /* shard(), print_predictions() */
#include "gemm.h"       /* gemm_pack_bytes_dense(): the kernel's scratch, for the memory check */
#include "idx.h"
#include "maths.h"
#include "mpi_util.h"
#include "options.h"
#include "phase.h"
#include "program.h"
#include "results.h"

/* A run's per-epoch figures (the curves the checkpoint and the row hold) and this rank's
 * compute phase (common/phase.h) over its own rows, epochs 2..E (epoch 1 when E = 1). */
typedef struct {
    const train_options *o;
    long train_n, test_n;
    double *loss_curve, *acc_curve, *epoch_seconds, *comm_seconds;
    double compute_seconds, compute_rows;
} run_log;

/* After epoch `epoch`'s training (seconds) and evaluation: every rank's figures over the
 * ranks, summed in rank order (a fixed order, openmp's thread order: the same bits every
 * run) into the curves (the slowest rank's seconds, the mean of the ranks' seconds in MPI),
 * the epoch line from rank 0. Every rank gets the sums, so all return 1 together when the
 * loss diverged. */
static inline int end_epoch(run_log *g, int epoch, double loss_sum, long correct, long test_correct, double seconds) {
    if (epoch == 2) g->compute_seconds = g->compute_rows = 0;
    g->compute_seconds += phase_seconds(PHASE_COMPUTE);
    for (long start = 0; start < g->train_n; start += g->o->batch) {   /* this rank's rows of the epoch */
        long lo, count;
        shard(g->train_n - start < g->o->batch ? g->train_n - start : g->o->batch, rank, nranks, &lo, &count);
        g->compute_rows += count;
    }
    double mine[5] = { loss_sum, (double)correct, (double)test_correct, phase_seconds(PHASE_COMM), seconds };
    double sum[4] = { 0 }, slowest = 0;
    double *all = malloc(sizeof(double) * 5 * (size_t)nranks);
    if (!all) { fprintf(stderr, "%s: rank %d: out of memory\n", program_name, rank); MPI_Abort(MPI_COMM_WORLD, 1); exit(1); }
    mpi_check(MPI_Allgather(mine, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, MPI_COMM_WORLD), "MPI_Allgather");
    for (int r = 0; r < nranks; r++) {
        for (int k = 0; k < 4; k++) sum[k] += all[5 * r + k];
        if (all[5 * r + 4] > slowest) slowest = all[5 * r + 4];
    }
    free(all);
    int e = epoch - 1;
    g->epoch_seconds[e] = slowest;
    g->comm_seconds[e] = sum[3] / nranks;
    g->loss_curve[e] = sum[0] / (double)g->train_n;
    g->acc_curve[e] = 100.0 * sum[2] / (double)g->test_n;
    char extra[64];
    snprintf(extra, sizeof extra, "comm %.3f s", g->comm_seconds[e]);
    return results_epoch(program_name, rank == 0, g->o->quiet, epoch, g->o->epochs, g->loss_curve[e],
                         100.0 * sum[1] / (double)g->train_n, g->acc_curve[e], g->epoch_seconds[e], g->train_n, extra);
}

/* What a data-parallel rank's model and buffers take (its ceil(B / P) rows of a batch, or
 * the evaluation's 512), with one gradient buffer and the kernel's packed copies: for the
 * memory check before loading. */
static inline double rank_model_bytes(const train_options *o, int features) {
    long rows = (o->batch + nranks - 1) / nranks;
    rows = rows > 512 ? rows : 512;
    return dense_model_bytes(o, features, rows, 1) + gemm_pack_bytes_dense(o, features, rows);
}

/* --dump-params: W1 b1 W2 b2 ... as raw float32, without the alignment padding (W's rows
 * w_ld(out) floats apart in memory, out in the file) */
static inline int dump_params(int n_layers, const int *size, float *const *W, float *const *b, const char *path,
                              char *err, size_t errlen) {
    FILE *f = fopen(path, "wb");
    if (!f) { snprintf(err, errlen, "--dump-params %s: cannot create the file", path); return -1; }
    int ok = 1;
    for (int l = 1; l <= n_layers; l++) {
        size_t nb = (size_t)size[l];
        for (int r = 0; r < size[l - 1]; r++) ok &= fwrite(W[l] + (long)r * w_ld(size[l]), sizeof(float), nb, f) == nb;
        ok &= fwrite(b[l], sizeof(float), nb, f) == nb;
    }
    if (fclose(f) || !ok) { snprintf(err, errlen, "--dump-params %s: write failed", path); return -1; }
    return 0;
}

/* What the end of a run needs: the row's figures, and the model (its layers' views for
 * --dump-params, and its evaluation for --predict). */
typedef struct {
    const char *program, *variant;           /* the CSV row's identity */
    const run_log *log;
    int side;
    double flops_per_sample, total_seconds;
    const char *dump_params;                 /* --dump-params FILE or NULL */
    int n_layers;
    const int *size;
    float *const *W, *const *b;
    void *model;                             /* for evaluate: correct predictions on d, predictions into pred */
    long (*evaluate)(void *model, const dataset *d, unsigned char *pred);
} run_end;

/* Collective. Rank 0: --predict (the first K test images, whichever shard holds them),
 * --dump-params, the row and the summary line "comm S s (F%) | compute us/sample
 * r0,r1,... | replicas identical" (each rank's compute phase per row of its own: how fast
 * its core ran). Returns the exit status. */
static inline int finish_run(const run_end *e) {
    const run_log *g = e->log;
    double us = g->compute_rows > 0 ? 1e6 * g->compute_seconds / g->compute_rows : -1.0;
    double *all = malloc(sizeof(double) * (size_t)nranks);
    char *text = malloc(16 * (size_t)nranks + 1), *extra = malloc(16 * (size_t)nranks + 128), err[IDX_ERR_LEN] = "";
    agree_or_die(!all || !text || !extra, "out of memory", 1);
    mpi_check(MPI_Gather(&us, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");
    int status = 0;
    if (rank == 0) {
        text[0] = '\0';
        for (int r = 0; r < nranks; r++) sprintf(text + strlen(text), "%s%.3f", r ? "," : "", all[r]);
        const train_options *o = g->o;
        double comm_median = results_epoch_median(g->comm_seconds, o->epochs);
        result_row row;
        results_fill(&row, e->program, e->variant, nranks, 1, o, e->side, g->train_n, g->test_n, e->flops_per_sample,
                     e->total_seconds, g->loss_curve, g->acc_curve, g->epoch_seconds);
        row.comm_seconds = comm_median;
        if (o->predict) {
            dataset first;
            long k = o->predict < g->test_n ? o->predict : g->test_n;
            unsigned char *pred = malloc((size_t)k);
            if (!pred || dataset_load(o->data_dir, "t10k", 0, k, o->image_size, &first, err, sizeof err)) {
                fprintf(stderr, "%s: %s\n", program_name, pred ? err : "out of memory");
                return 1;
            }
            e->evaluate(e->model, &first, pred);
            print_predictions(&first, pred, (int)k);
            dataset_free(&first);
            free(pred);
        }
        if (e->dump_params && dump_params(e->n_layers, e->size, e->W, e->b, e->dump_params, err, sizeof err)) status = 1;
        else {
            sprintf(extra, "comm %.3f s (%.0f%%) | compute us/sample %s | replicas identical", comm_median,
                    100.0 * comm_median / row.epoch_seconds_median, text);
            if (results_finish(&row, o->csv, NULL, extra, err, sizeof err)) status = 1;
        }
        if (status) fprintf(stderr, "%s: %s\n", program_name, err);
    }
    free(all); free(text); free(extra);
    return status;
}

#endif
