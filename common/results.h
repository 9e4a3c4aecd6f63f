/*
 * common/results.h — the one CSV result schema of partrain.
 *
 * results_append() adds one row per run to a CSV file, writing the header when the
 * file is new. The append is atomic: the file is locked (flock) and the row goes
 * out in a single write(), so parallel sweeps never interleave or tear rows; if
 * the write fails the file is cut back to its previous length. A file whose
 * header is not this schema is refused (nothing is written).
 *
 * Columns (see README.md for units and meaning):
 *   run_id program variant ranks threads omp_wait_policy dataset image_size
 *   train_n test_n hidden activation batch epochs lr seed
 *   epoch_seconds_median total_seconds comm_seconds sync_seconds
 *   samples_per_second gflops final_train_loss test_accuracy
 *   train_loss_curve test_acc_curve epoch_seconds host timestamp
 */
#ifndef PARTRAIN_RESULTS_H
#define PARTRAIN_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#define RESULTS_HEADER \
    "run_id,program,variant,ranks,threads,omp_wait_policy,dataset,image_size," \
    "train_n,test_n,hidden,activation,batch,epochs,lr,seed," \
    "epoch_seconds_median,total_seconds,comm_seconds,sync_seconds," \
    "samples_per_second,gflops,final_train_loss,test_accuracy," \
    "train_loss_curve,test_acc_curve,epoch_seconds,host,timestamp"

typedef struct {
    const char *program;          /* "serial", "openmp", "mpi", ... */
    const char *variant;          /* e.g. "own-gemm", "reduction", "allreduce" */
    int ranks, threads;
    const char *omp_wait_policy;  /* OMP_WAIT_POLICY as run ("" = unset/default) */
    const char *dataset;          /* name of the data directory, e.g. "fashion" */
    int image_size;
    long train_n, test_n;
    const char *hidden;           /* "256x128" */
    const char *activation;
    long batch;                   /* global mini-batch */
    int epochs;
    double lr;
    uint64_t seed;
    double epoch_seconds_median;  /* median of epochs 2..E (epoch 1 if E == 1) */
    double total_seconds;         /* training loop incl. per-epoch evaluation */
    double comm_seconds;          /* inside MPI calls (0 without MPI) */
    double sync_seconds;          /* inside thread synchronisation, summed over threads */
    double samples_per_second;    /* train_n / epoch_seconds_median */
    double gflops;                /* model FLOP per epoch / epoch_seconds_median / 1e9 */
    double final_train_loss;      /* mean cross-entropy of the last epoch */
    double test_accuracy;         /* percent, after the last epoch */
    const double *train_loss_curve, *test_acc_curve, *epoch_seconds; /* n_epochs each */
    int n_curve;
} result_row;

/* 0 on success; -1 with a one-line message in err. path "none" or "" writes nothing. */
int results_append(const char *path, const result_row *r, char *err, size_t errlen);

/* median of n values (copies; n >= 1) */
double results_median(const double *v, int n);

#endif
