/*
 * tests/test_results.c — the CSV result writer: header once, schema, atomic appends
 * from many processes at once, refusal to append to a file of another schema.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "results.h"

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static result_row sample_row(int id) {
    static double loss[3] = {0.5, 0.4, 0.3}, acc[3] = {80, 85, 90}, sec[3] = {1.5, 1.25, 1.0};
    result_row r = {
        .program = "serial", .variant = "own-gemm", .ranks = 1, .threads = 1 + id % 4,
        .omp_wait_policy = "passive", .dataset = "fashion, with comma", .image_size = 28,
        .train_n = 60000, .test_n = 10000, .hidden = "256x128", .activation = "relu", .batch = 64,
        .epochs = 3, .lr = 0.01, .seed = 42, .epoch_seconds_median = 1.125, .total_seconds = 4,
        .samples_per_second = 53333.3, .gflops = 60.5, .final_train_loss = 0.3, .test_accuracy = 90,
        .train_loss_curve = loss, .test_acc_curve = acc, .epoch_seconds = sec, .n_curve = 3,
    };
    return r;
}

int main(void) {
    char dir[] = "/tmp/partrain-results-XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/sub/runs.csv", dir);

    result_row r = sample_row(0);
    int rc = results_append(path, &r, err, sizeof err);
    CHECK("append creates the directory, the file and the header", rc == 0, "%s", err);

    /* 8 processes x 40 rows at once */
    int writers = 8, rows_each = 40;
    for (int w = 0; w < writers; w++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < rows_each; i++) {
                result_row x = sample_row(w * rows_each + i);
                if (results_append(path, &x, err, sizeof err)) _exit(1);
            }
            _exit(0);
        }
    }
    int child_fail = 0, status;
    while (wait(&status) > 0) child_fail += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    CHECK("concurrent appends all succeed", child_fail == 0, "%d writers failed", child_fail);

    FILE *f = fopen(path, "r");
    char line[8192];
    int lines = 0, headers = 0, torn = 0;
    int want_commas = count_char(RESULTS_HEADER, ',');
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        if (!strncmp(line, "run_id,", 7)) headers++;
        else if (count_char(line, ',') != want_commas || line[strlen(line) - 1] != '\n' ||
                 !strstr(line, ",serial,own-gemm,")) torn++;
    }
    if (f) fclose(f);
    CHECK("exactly one header line", headers == 1, "%d header lines", headers);
    CHECK("every row complete: 1 + 8 x 40 rows, each with the schema's field count", lines == 1 + 1 + writers * rows_each && torn == 0,
          "%d lines (want %d), %d torn rows", lines, 2 + writers * rows_each, torn);

    /* a comma inside a text field must not shift the columns */
    f = fopen(path, "r");
    if (f && fgets(line, sizeof line, f) && fgets(line, sizeof line, f)) {
        CHECK("text fields are sanitised (no embedded commas)", strstr(line, "fashion_ with comma") != NULL, "row: %s", line);
        CHECK("curves are ';'-separated", strstr(line, ",0.5;0.40000000000000002;0.29999999999999999,80.0000;85.0000;90.0000,1.500000;1.250000;1.000000,") != NULL,
              "row: %s", line);
    }
    if (f) fclose(f);

    /* a file of another schema is refused and left untouched */
    char other[256];
    snprintf(other, sizeof other, "%s/other.csv", dir);
    f = fopen(other, "w");
    fputs("a,b,c\n1,2,3\n", f);
    fclose(f);
    rc = results_append(other, &r, err, sizeof err);
    f = fopen(other, "r");
    long size = 0;
    if (f) { fseek(f, 0, SEEK_END); size = ftell(f); fclose(f); }
    CHECK("a foreign CSV header is refused, file untouched", rc == -1 && size == 12 && strstr(err, other) && strstr(err, "header"),
          "rc %d, size %ld, err '%s'", rc, size, err);

    rc = results_append("none", &r, err, sizeof err);
    CHECK("path 'none' writes nothing", rc == 0, "rc %d", rc);

    rc = results_append("/proc/partrain-no-such-dir/x.csv", &r, err, sizeof err);
    CHECK("unwritable path gives an error naming it", rc == -1 && strstr(err, "/proc/partrain-no-such-dir"), "rc %d err '%s'", rc, err);

    double v[5] = {5, 1, 4, 2, 3}, e[4] = {4, 1, 3, 2};
    CHECK("median of odd and even counts", results_median(v, 5) == 3 && results_median(e, 4) == 2.5, "wrong median");

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_EXIT();
}
