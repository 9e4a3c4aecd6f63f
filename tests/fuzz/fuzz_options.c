/*
 * tests/fuzz/fuzz_options.c — libFuzzer harness of the flag parser (common/options.c).
 *
 * One fuzz input is a command line: its NUL-separated parts are argv[1..] (at most
 * MAX_ARGS; argv[0] is "fuzz"). The harness parses it as a trainer does (see
 * openmp/openmp.c's parse_options): its own flags first (--threads N: options_long,
 * --accum and --mode: variant_parse, --mode's list being longer than the error message's
 * buffer, --momentum X: options_double), then options_parse_common(), then "unknown
 * option". A rejected flag is the promised behaviour, not a crash: options_die() prints
 * its line and, in this build only (-DPARTRAIN_FUZZ), calls options_fuzz_exit(2) below,
 * which longjmps back here; any other status aborts.
 * An accepted command line is checked against options.h's contract (abort() when one
 * does not hold): every value in its flag's range, --seed exactly the decimal number
 * given, the hidden-layer list as written, options_hidden_string() and
 * options_dataset_name() within their buffers (also short ones) and consistent.
 *
 * Build: make fuzz   (clang -fsanitize=fuzzer,address,undefined -DPARTRAIN_FUZZ ...)
 * Run:   build/fuzz/fuzz_options -dict=tests/fuzz/options.dict build/fuzz/corpus/options tests/fuzz/corpus/options
 *        (bench/fuzz.sh does this with its limits and prints the figures)
 */
#include "options.h"

#include <math.h>
#include <sanitizer/common_interface_defs.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "fuzz"
#define MAX_ARGS 64
#define MAX_THREADS 256

#define ACCUM_MODES(X) \
    X(ACCUM_CRITICAL,  "critical",  "critical",  "gradients summed in omp critical") \
    X(ACCUM_REDUCTION, "reduction", "reduction", "private gradients, then a reduction") \
    X(ACCUM_OWNER,     "owner",     "owner",     "slice owners form the sums") \
    X(ACCUM_LOOP,      "loop",      "loop",      "work-shared loops") \
    X(ACCUM_MODEL,     "model",     "model",     "model parallel")
enum accum_kind { ACCUM_MODES(VARIANT_ENUM) N_ACCUM };
static const variant ACCUM[] = { ACCUM_MODES(VARIANT_ROW) };

/* values whose comma-separated list (over 300 characters) overflows variant_parse's buffer */
#define LONG_MODES(X) \
    X(MODE_A, "a", "a-mode-with-a-rather-long-flag-value-number-one", "one") \
    X(MODE_B, "b", "b-mode-with-a-rather-long-flag-value-number-two", "two") \
    X(MODE_C, "c", "c-mode-with-a-rather-long-flag-value-number-three", "three") \
    X(MODE_D, "d", "d-mode-with-a-rather-long-flag-value-number-four", "four") \
    X(MODE_E, "e", "e-mode-with-a-rather-long-flag-value-number-five", "five") \
    X(MODE_F, "f", "f-mode-with-a-rather-long-flag-value-number-six", "six") \
    X(MODE_G, "g", "g-mode-with-a-rather-long-flag-value-number-seven", "seven")
enum long_mode { LONG_MODES(VARIANT_ENUM) N_MODES };
static const variant MODES[] = { LONG_MODES(VARIANT_ROW) };

static jmp_buf rejected;
static int rejected_status;

/* options_die()'s exit in the fuzz build: back to LLVMFuzzerTestOneInput */
_Noreturn void options_fuzz_exit(int status) {
    rejected_status = status;
    longjmp(rejected, 1);
}

static void contract(int holds, const char *what) {
    if (holds) return;
    char line[256];
    snprintf(line, sizeof line, "fuzz_options: contract broken: %s", what);
    __sanitizer_report_error_summary(line);   /* where the sanitizers report: still open
                                                  under libFuzzer's -close_fd_mask=2 */
    abort();
}

typedef struct {
    train_options common;
    int threads, accum, mode;
    double momentum;
    const char *seed_text;       /* the value of the last --seed, NULL if none */
    const char *hidden_text;     /* the value of the last --hidden */
} fuzz_options;

static void parse(fuzz_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->threads = 0;
    o->accum = ACCUM_LOOP;
    o->mode = MODE_A;
    o->momentum = 0.0;
    o->seed_text = o->hidden_text = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--threads")) {
            o->threads = (int)options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, MAX_THREADS);
            continue;
        }
        if (!strcmp(a, "--accum")) {
            o->accum = variant_parse(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), ACCUM, N_ACCUM);
            continue;
        }
        if (!strcmp(a, "--mode")) {
            o->mode = variant_parse(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), MODES, N_MODES);
            continue;
        }
        if (!strcmp(a, "--momentum")) {
            o->momentum = options_double(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 0.0, 1.0);
            continue;
        }
        int at = i;
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) {
            if (!strcmp(a, "--seed")) o->seed_text = argv[at + 1];
            if (!strcmp(a, "--hidden")) o->hidden_text = argv[at + 1];
            continue;
        }
        options_die(PROGRAM, "unknown option '%s'", a);
    }
}

/* --seed: "any unsigned 64-bit integer", so the text is decimal digits and o->seed their value */
static void check_seed(const char *text, uint64_t seed) {
    contract(text[0] != 0, "--seed accepted an empty value");
    uint64_t v = 0;
    for (const char *p = text; *p; p++) {
        contract(*p >= '0' && *p <= '9', "--seed accepted a value that is not decimal digits");
        unsigned digit = (unsigned)(*p - '0');
        contract(v <= (UINT64_MAX - digit) / 10, "--seed accepted a value above 2^64-1");
        v = v * 10 + digit;
    }
    contract(v == seed, "--seed's value differs from the number given");
}

/* options_hidden_string() and options_dataset_name() into a buffer of every short length */
static void check_strings(const fuzz_options *o, int argc, char **argv) {
    const train_options *c = &o->common;
    char full[128], part[128];
    options_hidden_string(c, full, (int)sizeof full);
    char want[128] = "";
    for (int l = 0; l < c->n_hidden; l++)
        snprintf(want + strlen(want), sizeof want - strlen(want), l ? "x%d" : "%d", c->hidden[l]);
    contract(!strcmp(full, want), "options_hidden_string differs from the layer list");
    int len = 1 + (argc > 1 ? (int)(strlen(argv[1]) % sizeof part) : 0);
    options_hidden_string(c, part, len);
    contract(strlen(part) < (size_t)len && !strncmp(part, full, strlen(part)),
             "options_hidden_string overran or garbled a short buffer");

    char name[256];
    options_dataset_name(c, name, (int)sizeof name);
    contract(!strchr(name, '/'), "options_dataset_name kept a '/'");
    contract(strlen(c->data_dir) >= sizeof name - 1 || strstr(c->data_dir, name),
             "options_dataset_name is not a part of --data");
    options_dataset_name(c, part, len);
    contract(strlen(part) < (size_t)len && !strncmp(part, name, strlen(part)),
             "options_dataset_name overran or garbled a short buffer");
}

static void check_accepted(const fuzz_options *o, int argc, char **argv) {
    const train_options *c = &o->common;
    contract(o->threads >= 0 && o->threads <= MAX_THREADS, "--threads out of range");
    contract(o->accum >= 0 && o->accum < N_ACCUM && o->mode >= 0 && o->mode < N_MODES,
             "variant_parse returned an index outside its table");
    contract(o->momentum >= 0.0 && o->momentum <= 1.0, "--momentum out of range");
    contract(c->data_dir && c->data_dir[0] && c->csv && c->csv[0], "an empty --data or --csv was accepted");
    contract(c->train_n >= 0 && c->train_n <= 100000000 && c->test_n >= 0 && c->test_n <= 100000000,
             "--train or --test out of range");
    contract(c->image_size >= 0 && c->image_size <= 1024, "--image-size out of range");
    contract(c->n_hidden >= 1 && c->n_hidden <= OPT_MAX_HIDDEN, "--hidden: number of layers out of range");
    for (int l = 0; l < c->n_hidden; l++)
        contract(c->hidden[l] >= 1 && c->hidden[l] <= 65536, "--hidden: a layer size out of range");
    if (o->hidden_text) {
        int commas = 0;
        for (const char *p = o->hidden_text; *p; p++) commas += *p == ',';
        contract(c->n_hidden == commas + 1, "--hidden: the layer count is not the list's");
    }
    contract(c->activation == ACT_RELU || c->activation == ACT_SIGMOID || c->activation == ACT_LEAKY_RELU,
             "--activation out of range");
    contract(c->batch_full ? c->batch == 0 : (c->batch >= 1 && c->batch <= 100000000), "--batch out of range");
    contract(c->epochs >= 1 && c->epochs <= 100000, "--epochs out of range");
    contract(isfinite(c->lr) && c->lr > 0 && c->lr <= 1e3, "--lr out of range");
    contract(c->predict >= 0 && c->predict <= 1000, "--predict out of range");
    if (o->seed_text) check_seed(o->seed_text, c->seed);
    contract(!strcmp(options_activation_name(c->activation),
                     c->activation == ACT_SIGMOID ? "sigmoid" : c->activation == ACT_LEAKY_RELU ? "leaky-relu" : "relu"),
             "options_activation_name");
    check_strings(o, argc, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* argv[1..]: the input's NUL-separated parts (a final part needs no NUL) */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = PROGRAM;
    for (size_t at = 0; at < size && argc <= MAX_ARGS; at += strlen(text + at) + 1)
        argv[argc++] = text + at;
    argv[argc] = NULL;

    fuzz_options o;
    if (setjmp(rejected) == 0) {
        parse(&o, argc, argv);
        check_accepted(&o, argc, argv);
    } else {
        contract(rejected_status == 2, "options_die exited with a status other than 2");
    }
    free(text);
    return 0;
}
