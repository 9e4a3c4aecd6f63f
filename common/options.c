/*
 * common/options.c — parsing of the flags every trainer shares; see options.h.
 */
#include "options.h"
#include "program.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *program_name = "partrain";   /* each main sets its own first */

/* The fuzz build (make fuzz: -DPARTRAIN_FUZZ) rejects a flag without ending the process:
 * tests/fuzz/fuzz_options.c defines options_fuzz_exit(), which longjmps back to the harness.
 * Every other build calls exit(). */
#ifdef PARTRAIN_FUZZ
_Noreturn void options_fuzz_exit(int status);
#define OPTIONS_EXIT options_fuzz_exit
#else
#define OPTIONS_EXIT exit
#endif

char options_error[512];

void options_die(const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(options_error, sizeof options_error, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (see --help)\n", prog, options_error);
    OPTIONS_EXIT(2);
}

int variant_parse(const char *prog, const char *flag, const char *value, const variant *t, int n) {
    for (int k = 0; k < n; k++)
        if (!strcmp(value, t[k].value)) return k;
    char names[256] = "";
    for (int k = 0; k < n; k++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", k ? ", " : "", t[k].value);
    }
    options_die(prog, "%s: unknown mode '%s' (%s)", flag, value, names);
}

void variant_usage(const variant *t, int n) {
    int width = 0;
    for (int k = 0; k < n; k++) if ((int)strlen(t[k].value) > width) width = (int)strlen(t[k].value);
    for (int k = 0; k < n; k++) printf("                        %-*s  %s\n", width, t[k].value, t[k].help);
}

void variant_list(const char *flag, const variant *t, int n) {
    for (int k = 0; k < n; k++) printf("%s\t%s %s\t%s\n", t[k].name, flag, t[k].value, t[k].help);
}

void options_defaults(train_options *o) {
    memset(o, 0, sizeof *o);
    o->data_dir = "data/fashion";
    o->hidden[0] = 256;
    o->hidden[1] = 128;
    o->n_hidden = 2;
    o->activation = ACT_RELU;
    o->batch = 64;
    o->epochs = 5;
    o->lr = 0.01;
    o->seed = 42;
    o->lr_base_batch = 64;
    o->csv = "results/runs.csv";
    o->trace_steps = 1000;
    o->trace_from = 0;
}

const char *options_value(const char *prog, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) options_die(prog, "%s needs a value", argv[*i]);
    return argv[++*i];
}

long options_long(const char *prog, const char *flag, const char *value, long min, long max) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (end == value || *end)
        options_die(prog, "%s: expected an integer, got '%s'", flag, value);
    if (errno == ERANGE)
        options_die(prog, "%s: %s is out of range %ld..%ld", flag, value, min, max);
    if (v < min || v > max)
        options_die(prog, "%s: %ld is out of range %ld..%ld", flag, v, min, max);
    return v;
}

double options_double(const char *prog, const char *flag, const char *value, double min, double max) {
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end || isnan(v))
        options_die(prog, "%s: expected a number, got '%s'", flag, value);
    if (errno == ERANGE || !isfinite(v))   /* overflow, or too small to be a normal float */
        options_die(prog, "%s: %s is out of range %g..%g", flag, value, min, max);
    if (!(v >= min && v <= max))
        options_die(prog, "%s: %g is out of range %g..%g", flag, v, min, max);
    return v;
}

/* any unsigned 64-bit integer, 0 .. 18446744073709551615 */
static uint64_t options_seed(const char *prog, const char *value) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    /* digits only: strtoull skips any leading white space and negates after a '-', so
     * "\t-1" would be 2^64-1 (found by tests/fuzz/fuzz_options.c) */
    if (end == value || *end || value[0] < '0' || value[0] > '9')
        options_die(prog, "--seed: expected an integer 0..18446744073709551615, got '%s'", value);
    if (errno == ERANGE) options_die(prog, "--seed: %s is out of range 0..18446744073709551615", value);
    return (uint64_t)v;
}

static void parse_hidden(train_options *o, const char *prog, const char *value) {
    o->n_hidden = 0;
    const char *p = value;
    if (!*p) options_die(prog, "--hidden: expected sizes like 256,128, got ''");
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || (*end && *end != ','))
            options_die(prog, "--hidden: expected sizes like 256,128, got '%s'", value);
        if (v < 1 || v > 65536) options_die(prog, "--hidden: layer size %ld is out of range 1..65536", v);
        if (o->n_hidden == OPT_MAX_HIDDEN) options_die(prog, "--hidden: at most %d hidden layers", OPT_MAX_HIDDEN);
        o->hidden[o->n_hidden++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) options_die(prog, "--hidden: trailing ',' in '%s'", value);
    }
}

int options_parse_common(train_options *o, const char *prog, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    if (!strcmp(a, "--data")) {
        o->data_dir = options_value(prog, argc, argv, i);
        if (!*o->data_dir) options_die(prog, "--data: empty directory name");
    }
    else if (!strcmp(a, "--train")) o->train_n = options_long(prog, a, options_value(prog, argc, argv, i), 1, 100000000);
    else if (!strcmp(a, "--test")) o->test_n = options_long(prog, a, options_value(prog, argc, argv, i), 1, 100000000);
    else if (!strcmp(a, "--image-size")) o->image_size = (int)options_long(prog, a, options_value(prog, argc, argv, i), 1, 1024);
    else if (!strcmp(a, "--hidden")) parse_hidden(o, prog, options_value(prog, argc, argv, i));
    else if (!strcmp(a, "--activation")) {
        const char *v = options_value(prog, argc, argv, i);
        if (!strcmp(v, "relu")) o->activation = ACT_RELU;
        else if (!strcmp(v, "sigmoid")) o->activation = ACT_SIGMOID;
        else if (!strcmp(v, "leaky-relu")) o->activation = ACT_LEAKY_RELU;
        else options_die(prog, "--activation: unknown activation '%s' (relu, sigmoid, leaky-relu)", v);
    } else if (!strcmp(a, "--batch")) {
        const char *v = options_value(prog, argc, argv, i);
        if (!strcmp(v, "full")) { o->batch_full = 1; o->batch = 0; }
        else { o->batch_full = 0; o->batch = options_long(prog, a, v, 1, 100000000); }
    } else if (!strcmp(a, "--epochs")) o->epochs = (int)options_long(prog, a, options_value(prog, argc, argv, i), 1, 100000);
    else if (!strcmp(a, "--lr")) {
        o->lr = options_double(prog, a, options_value(prog, argc, argv, i), 0.0, 1e3);
        if (!(o->lr > 0)) options_die(prog, "--lr: must be positive");
    } else if (!strcmp(a, "--seed")) o->seed = options_seed(prog, options_value(prog, argc, argv, i));
    else if (!strcmp(a, "--csv")) {
        o->csv = options_value(prog, argc, argv, i);
        if (!*o->csv) options_die(prog, "--csv: empty file name (none writes no row)");
    }
    else if (!strcmp(a, "--predict")) o->predict = (int)options_long(prog, a, options_value(prog, argc, argv, i), 0, 1000);
    else if (!strcmp(a, "--quiet")) o->quiet = 1;
    else if (!strcmp(a, "--checkpoint")) {
        o->checkpoint = options_value(prog, argc, argv, i);
        if (!*o->checkpoint) options_die(prog, "--checkpoint: empty file name");
    } else if (!strcmp(a, "--checkpoint-every"))
        o->checkpoint_every = (int)options_long(prog, a, options_value(prog, argc, argv, i), 1, 100000);
    else if (!strcmp(a, "--resume")) {
        o->resume = options_value(prog, argc, argv, i);
        if (!*o->resume) options_die(prog, "--resume: empty file name");
    }
    else if (!strcmp(a, "--target-accuracy")) {
        o->target_accuracy = options_double(prog, a, options_value(prog, argc, argv, i), 0.0, 100.0);
        if (!(o->target_accuracy > 0)) options_die(prog, "--target-accuracy: must be above 0 (percent, up to 100)");
    } else if (!strcmp(a, "--lr-scaling")) {
        const char *v = options_value(prog, argc, argv, i);
        if (!strcmp(v, "none")) o->lr_scaling = LR_SCALING_NONE;
        else if (!strcmp(v, "linear")) o->lr_scaling = LR_SCALING_LINEAR;
        else options_die(prog, "--lr-scaling: unknown mode '%s' (none, linear)", v);
    } else if (!strcmp(a, "--lr-base-batch"))
        o->lr_base_batch = options_long(prog, a, options_value(prog, argc, argv, i), 1, 100000000);
    else if (!strcmp(a, "--trace")) {
        o->trace = options_value(prog, argc, argv, i);
        if (!*o->trace) options_die(prog, "--trace: empty file name");
    } else if (!strcmp(a, "--trace-steps"))
        o->trace_steps = options_long(prog, a, options_value(prog, argc, argv, i), 1, 100000000);
    else if (!strcmp(a, "--trace-from"))
        o->trace_from = options_long(prog, a, options_value(prog, argc, argv, i), 0, 1000000000);
    else if (!strcmp(a, "--warmup-epochs"))
        o->warmup_epochs = (int)options_long(prog, a, options_value(prog, argc, argv, i), 0, 100000);
    else return 0;
    return 1;
}

void options_usage_common(void) {
    printf(
        "Data:\n"
        "  --data DIR            IDX files (train-images-idx3-ubyte[.gz], ...) [data/fashion]\n"
        "  --train N             use the first N training samples [all]\n"
        "  --test N              use the first N test samples [all]\n"
        "  --image-size S        resample images to SxS, bilinear [the files' size, 28]\n"
        "Model:\n"
        "  --hidden A,B,...      hidden layer sizes [256,128]\n"
        "  --activation NAME     relu | sigmoid | leaky-relu (slope 0.01) [relu]\n"
        "Training:\n"
        "  --batch N|full        global mini-batch size; full = whole training set [64]\n"
        "  --epochs E            [5]\n"
        "  --lr LR               SGD learning rate [0.01]\n"
        "  --seed S              seed of initial weights and shuffling [42]\n"
        "  --lr-scaling MODE     none | linear: lr x batch / B0 (Goyal et al. 2017) [none]\n"
        "  --lr-base-batch B0    the batch --lr is meant for, with linear scaling [64]\n"
        "  --warmup-epochs W     ramp --lr to the scaled rate per step over W epochs [0]\n"
        "  --target-accuracy A   stop after the first epoch with test accuracy >= A%% [off]\n"
        "Output:\n"
        "  --csv FILE|none       append one result row to FILE [results/runs.csv]\n"
        "  --predict K           show K test images as ASCII art with predictions [0]\n"
        "  --quiet               no per-epoch progress lines\n"
        "  --trace FILE          write a timeline of the run (Chrome trace JSON: Perfetto) [off]\n"
        "  --trace-steps N       N training steps in the timeline [1000]\n"
        "  --trace-from K        the timeline's first step, counted from 0 over the run; K = the\n"
        "                        steps of an epoch traces a warm epoch 2 [0]\n"
        "Checkpoints:\n"
        "  --checkpoint FILE     save the run's state to FILE after every N epochs and the last\n"
        "  --checkpoint-every N  [1]\n"
        "  --resume FILE         go on from FILE's state (same flags; --epochs may be larger):\n"
        "                        ends with the bits of a run that never stopped\n"
        "  --list-variants       print this program's variants (CSV name, flags, description)\n"
        "  --help                this text\n");
}

void options_usage_exit_status(void) {
    printf(
        "Exit status: 0 done; 1 a failure during the run (the loss diverged, the row could not\n"
        "  be written after all: it then goes to stderr; an MPI call failed); 2 bad input,\n"
        "  found before the work (a flag, the data, an output, not enough memory; one line on\n"
        "  stderr, nothing written); 3 no usable GPU (cuda); 130 interrupted (Ctrl-C).\n");
}

const char *options_activation_name(int activation) {
    switch (activation) {
    case ACT_SIGMOID: return "sigmoid";
    case ACT_LEAKY_RELU: return "leaky-relu";
    default: return "relu";
    }
}

const char *options_hidden_string(const train_options *o, char *buf, int len) {
    int used = 0;
    buf[0] = 0;
    for (int l = 0; l < o->n_hidden && used < len; l++)
        used += snprintf(buf + used, (size_t)(len - used), l ? "x%d" : "%d", o->hidden[l]);
    return buf;
}

const char *options_dataset_name(const train_options *o, char *buf, int len) {
    const char *d = o->data_dir;
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/') n--;              /* ignore trailing slashes */
    size_t start = n;
    while (start > 0 && d[start - 1] != '/') start--;
    snprintf(buf, (size_t)len, "%.*s", (int)(n - start), d + start);
    return buf;
}
