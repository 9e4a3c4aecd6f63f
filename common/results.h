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
 *   train_n test_n hidden activation batch epochs lr lr_schedule seed
 *   epoch_seconds_median total_seconds comm_seconds sync_seconds
 *   samples_per_second gflops final_train_loss test_accuracy
 *   target_accuracy epochs_to_target seconds_to_target
 *   train_loss_curve test_acc_curve epoch_seconds host timestamp
 */
#ifndef PARTRAIN_RESULTS_H
#define PARTRAIN_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#define RESULTS_HEADER \
    "run_id,program,variant,ranks,threads,omp_wait_policy,dataset,image_size," \
    "train_n,test_n,hidden,activation,batch,epochs,lr,lr_schedule,seed," \
    "epoch_seconds_median,total_seconds,comm_seconds,sync_seconds," \
    "samples_per_second,gflops,final_train_loss,test_accuracy," \
    "target_accuracy,epochs_to_target,seconds_to_target," \
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
    int epochs;                   /* epochs run (fewer than --epochs when the target stopped it) */
    double lr;
    const char *lr_schedule;      /* "none", or "linear-bB0-wW" (common/schedule.h) */
    uint64_t seed;
    double epoch_seconds_median;  /* median of epochs 2..E (epoch 1 if E == 1) */
    double total_seconds;         /* training loop incl. per-epoch evaluation */
    double comm_seconds;          /* inside MPI calls (0 without MPI) */
    double sync_seconds;          /* inside thread synchronisation, summed over threads */
    double samples_per_second;    /* train_n / epoch_seconds_median */
    double gflops;                /* model FLOP per epoch / epoch_seconds_median / 1e9 */
    double final_train_loss;      /* mean cross-entropy of the last epoch */
    double test_accuracy;         /* percent, after the last epoch */
    double target_accuracy;       /* --target-accuracy, percent (0: off, empty) */
    int epochs_to_target;         /* first epoch with test_accuracy >= target (0: empty) */
    double seconds_to_target;     /* total_seconds up to that epoch's evaluation (empty with 0 above) */
    const double *train_loss_curve, *test_acc_curve, *epoch_seconds; /* n_epochs each */
    int n_curve;
    char hidden_text[128], dataset_text[256], schedule_text[64];   /* storage behind hidden and dataset (results_fill) */
} result_row;

struct train_options_s;
/* The columns every trainer computes alike, from its options and its per-epoch curves:
 * the configuration, the epoch median (epochs 2..E, epoch 1 if E == 1), samples/s,
 * GFLOP/s (flops_per_sample x train_n per epoch), the final loss and accuracy, and
 * OMP_WAIT_POLICY as run, the learning-rate schedule and, when the last epoch reached
 * --target-accuracy (the trainers stop there: common/schedule.h), epochs_to_target and
 * seconds_to_target = total_seconds. comm_seconds and sync_seconds stay 0: the trainer's to set.
 * Keeps pointers to the curves (they must outlive the row). */
void results_fill(result_row *r, const char *program, const char *variant, int ranks, int threads,
                  const struct train_options_s *o, int image_size, long train_n, long test_n,
                  double flops_per_sample, double total_seconds,
                  const double *loss_curve, const double *acc_curve, const double *epoch_seconds);

/* The median of v[0..E-1] over epochs 2..E (epoch 1 alone when E == 1): every
 * per-epoch column (epoch, comm and sync seconds) is reported this way. */
double results_epoch_median(const double *v, int epochs);

/* The end of epoch `epoch` of `epochs`: prints (when `printer` and not `quiet`)
 *   epoch e/E  loss L  train_acc A%  test_acc T%  time S s  Nk samples/s[  extra]
 * and returns 0; or, when the loss is not finite, prints (when `printer`)
 * "PROGRAM: training diverged at epoch e (loss x); lower --lr" on stderr and returns 1. */
int results_epoch(const char *program, int printer, int quiet, int epoch, int epochs, double loss,
                  double train_acc, double test_acc, double seconds, long train_n, const char *extra);

/* The end of a run: appends the row to csv and prints the one summary line
 *   PROGRAM: variant | who | E epochs | epoch median S s | Nk samples/s | G GFLOP/s |
 *   loss L | test acc A% [| target T% at epoch e (S s) | target T% not reached in E epochs]
 *   [| extra] | csv FILE
 * (who: NULL for "1 core", "T threads", "P ranks" or "P ranks x T threads" from the
 * row; extra: the trainer's own figures, or NULL). 0 on success; -1 with a one-line
 * message in err (nothing was written, no summary printed). */
int results_finish(const result_row *r, const char *csv, const char *who, const char *extra, char *err, size_t errlen);

/* 0 on success; -1 with a one-line message in err, and the row printed to stderr so that
 * it is not lost. path "none" or "" writes nothing. A torn last line (no newline) is
 * repaired: the row starts on a new line, with a note on stderr. */
int results_append(const char *path, const result_row *r, char *err, size_t errlen);

/* Before the work: whether `path` can take the output (what: "--csv", which also checks
 * the header of an existing file, or "--dump-params"): a regular file that can be
 * written, or a new file in a writable directory; "none" and /dev/null need nothing.
 * 0, or -1 with one line in err naming the flag, the file and the problem. Also makes
 * SIGPIPE harmless, so a closed stdout cannot end the run before its row is written,
 * and SIGXFSZ: a row over ulimit -f fails with EFBIG, the file is cut back to its
 * previous length and the row goes to stderr. */
int results_check_output(const char *path, const char *what, char *err, size_t errlen);

/* This run writes no CSV row (a resumed checkpoint that had nothing left to train):
 * results_finish() prints the summary line without appending. */
void results_skip_row(void);

/* median of n values (copies; n >= 1) */
double results_median(const double *v, int n);

#endif
