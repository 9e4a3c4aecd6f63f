/*
 * common/options.h — the flags every partrain trainer accepts, parsed one way.
 *
 * The flag set is the contract that lets run_all.sh drive every trainer alike.
 * A trainer loops over argv, tries its own extra flags first (e.g. --threads,
 * --accum), then options_parse_common(); options_usage_common() prints the common
 * part of --help with defaults. Bad values give a one-line error and exit 2.
 */
#ifndef PARTRAIN_OPTIONS_H
#define PARTRAIN_OPTIONS_H

#include <stdint.h>

#define OPT_MAX_HIDDEN 8

enum lr_scaling { LR_SCALING_NONE = 0, LR_SCALING_LINEAR = 1 };
enum activation { ACT_RELU = 0, ACT_SIGMOID = 1, ACT_LEAKY_RELU = 2 };
#define LEAKY_RELU_SLOPE 0.01f

typedef struct train_options_s {
    const char *data_dir;      /* --data DIR (data/fashion) */
    long train_n, test_n;      /* --train N --test N (0: all) */
    int image_size;            /* --image-size S (0: the files' own size) */
    int hidden[OPT_MAX_HIDDEN];/* --hidden 256,128 */
    int n_hidden;
    int activation;            /* --activation relu|sigmoid|leaky-relu */
    long batch;                /* --batch N | full (0 until resolved: full) */
    int batch_full;
    int epochs;                /* --epochs 5 */
    double lr;                 /* --lr 0.01 */
    uint64_t seed;             /* --seed 42 */
    const char *csv;           /* --csv FILE (results/runs.csv; "none" = no row) */
    int predict;               /* --predict K: ASCII-art predictions of K test images */
    int quiet;                 /* --quiet: no per-epoch lines */
    const char *checkpoint;    /* --checkpoint FILE: the state after every N epochs (checkpoint.h) */
    int checkpoint_every;      /* --checkpoint-every N [1] (0 until given) */
    const char *resume;        /* --resume FILE: go on from a checkpoint */
    double target_accuracy;    /* --target-accuracy A: stop at test accuracy >= A percent (0: off) */
    int lr_scaling;            /* --lr-scaling none|linear (schedule.h) */
    long lr_base_batch;        /* --lr-base-batch B0 [64]: linear scaling's lr x batch / B0 */
    int warmup_epochs;         /* --warmup-epochs W [0]: ramp --lr to the scaled rate */
    const char *trace;         /* --trace FILE: Chrome trace-event timeline of the run (trace.h) */
    long trace_steps;          /* --trace-steps N [1000]: N training steps traced */
    long trace_from;           /* --trace-from K [0]: the first traced step (0: the run's first) */
} train_options;

void options_defaults(train_options *o);

/* Tries argv[*i] (and its value argv[*i + 1]) as a common flag.
 * Returns 1 if consumed (advances *i past the value), 0 if not a common flag.
 * On a bad value prints "<prog>: <flag>: <problem>" to stderr and exits 2. */
int options_parse_common(train_options *o, const char *prog, int argc, char **argv, int *i);

/* Helpers for trainers' own flags: strict parsing, exit 2 with a message on error. */
long options_long(const char *prog, const char *flag, const char *value, long min, long max);
double options_double(const char *prog, const char *flag, const char *value, double min, double max);
const char *options_value(const char *prog, int argc, char **argv, int *i); /* value of argv[*i] */

void options_usage_common(void);
void options_usage_exit_status(void);   /* the last lines of every --help */
void options_die(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* options_die()'s last message, without the program's name ("" until a flag was refused):
 * an MPI rank that alone refused its flags says why on its way out (common/mpi_util.h) */
extern char options_error[512];

/* One table of variants per program (its --accum, --sync, --kernel or --gemm modes), declared
 * as an X-macro list X(ID, "csv-name", "flag value", "one line of help") so that the enum,
 * the parser, --help and --list-variants all come from the one list:
 *   #define SYNC_MODES(X) X(SYNC_ALLREDUCE, "allreduce", "allreduce", "MPI_Allreduce ...") ...
 *   enum sync_kind { SYNC_MODES(VARIANT_ENUM) N_SYNC };
 *   static const variant SYNC[] = { SYNC_MODES(VARIANT_ROW) };
 * The name is what the CSV's variant column says; scripts read the lists from the
 * programs (`PROGRAM --list-variants`), never from copies of their own. */
typedef struct {
    const char *name;          /* CSV variant column */
    const char *value;         /* the flag's value that selects it */
    const char *help;
} variant;
#define VARIANT_ENUM(id, name, value, help) id,
#define VARIANT_ROW(id, name, value, help) { name, value, help },

/* index of value in the table; else "<prog>: <flag>: unknown mode 'x' (a, b, c)", exit 2 */
int variant_parse(const char *prog, const char *flag, const char *value, const variant *t, int n);
/* --help lines: "  value  help" under a flag's description */
void variant_usage(const variant *t, int n);
/* --list-variants: "name<TAB>flag value<TAB>help" per variant */
void variant_list(const char *flag, const variant *t, int n);

const char *options_activation_name(int activation);
/* "256x128" into buf */
const char *options_hidden_string(const train_options *o, char *buf, int len);
/* basename of the data directory, e.g. "fashion" */
const char *options_dataset_name(const train_options *o, char *buf, int len);

#endif
