/*
 * tests/fuzz/fuzz_checkpoint.c — libFuzzer harness of the checkpoint reader
 * (checkpoint_load() in common/checkpoint.c: the file --resume reads).
 *
 * One fuzz input is a checkpoint file, as is. The harness writes it to
 * /dev/shm/partrain-fuzz-ckpt.PID (removed at exit) and loads it into the state of a
 * small fixed run (serial, own-gemm, --hidden 4, 2x2 images, 100/10 samples, 64 floats,
 * 3 per-epoch series, --epochs 8): the seed corpus holds checkpoints of exactly that run,
 * so mutations reach the checks after the configuration as well.
 * Contract (abort() when broken): a load either succeeds with 0 <= epochs done <= 8, or
 * fails with one line (non-empty, no newline) that names the file.
 *
 * Build: make fuzz
 * Run:   build/fuzz/fuzz_checkpoint build/fuzz/corpus/checkpoint tests/fuzz/corpus/checkpoint
 *        (bench/fuzz.sh does this with its limits and prints the figures)
 */
#define _POSIX_C_SOURCE 200809L
#include "checkpoint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLOATS 64
#define EPOCHS 8

static char path[64];

static void remove_file(void) { if (*path) unlink(path); }

/* options_die() is not the reader's way to fail: reaching it breaks the contract */
_Noreturn void options_fuzz_exit(int status);
_Noreturn void options_fuzz_exit(int status) {
    fprintf(stderr, "fuzz_checkpoint: contract broken: options_die (status %d)\n", status);
    abort();
}

static void broken(const char *what, const char *err) {
    fprintf(stderr, "fuzz_checkpoint: contract broken: %s (err '%s')\n", what, err);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*path) {
        snprintf(path, sizeof path, "/dev/shm/partrain-fuzz-ckpt.%d", (int)getpid());
        atexit(remove_file);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) { perror(path); abort(); }

    train_options o;
    options_defaults(&o);
    o.data_dir = "data/fashion";
    o.hidden[0] = 4;
    o.n_hidden = 1;
    o.epochs = EPOCHS;
    static float params[FLOATS];
    static double loss[EPOCHS], acc[EPOCHS], seconds[EPOCHS];
    checkpoint c;
    checkpoint_init(&c, "serial", "own-gemm", 1, 1, &o, 2, 100, 10, NULL, params, FLOATS,
                    (double *[]){ loss, acc, seconds }, 3);
    char err[512] = "";
    int rc = checkpoint_load(path, &c, EPOCHS, err, sizeof err);
    if (rc == 0) {
        if (c.epochs_done < 0 || c.epochs_done > EPOCHS) broken("epochs done out of range", err);
    } else {
        if (rc != -1) broken("status neither 0 nor -1", err);
        if (!*err || strchr(err, '\n')) broken("the error is not one line", err);
        if (!strstr(err, path)) broken("the error does not name the file", err);
    }
    return 0;
}
