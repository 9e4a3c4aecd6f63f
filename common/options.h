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

enum activation { ACT_RELU = 0, ACT_SIGMOID = 1, ACT_LEAKY_RELU = 2 };
#define LEAKY_RELU_SLOPE 0.01f

typedef struct {
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
void options_die(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

const char *options_activation_name(int activation);
/* "256x128" into buf */
const char *options_hidden_string(const train_options *o, char *buf, int len);
/* basename of the data directory, e.g. "fashion" */
const char *options_dataset_name(const train_options *o, char *buf, int len);

#endif
