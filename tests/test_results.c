/*
 * tests/test_results.c — the CSV result writer: header once, schema, atomic appends
 * from many processes at once, refusal to append to a file of another schema; and the
 * learning-rate schedule and time-to-accuracy columns that fill the row (schedule.h)
 * against their closed forms.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "results.h"
#include "schedule.h"

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static double loss[3] = {0.5, 0.4, 0.3}, acc[3] = {80, 85, 90}, sec[3] = {1.5, 1.25, 1.0};

static result_row sample_row(int id) {
    result_row r = {
        .program = "serial", .variant = "own-gemm", .ranks = 1, .threads = 1 + id % 4,
        .omp_wait_policy = "passive", .dataset = "fashion, with comma", .image_size = 28,
        .train_n = 60000, .test_n = 10000, .hidden = "256x128", .activation = "relu", .batch = 64,
        .epochs = 3, .lr = 0.01, .lr_schedule = "none", .seed = 42, .epoch_seconds_median = 1.125, .total_seconds = 4,
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

    /* the target columns: filled when reached, three empty fields when off */
    result_row t = sample_row(0);
    t.target_accuracy = 85; t.epochs_to_target = 3; t.seconds_to_target = 2.75;
    char tpath[256];
    snprintf(tpath, sizeof tpath, "%s/target.csv", dir);
    rc = results_append(tpath, &t, err, sizeof err) || results_append(tpath, &r, err, sizeof err);
    f = fopen(tpath, "r");
    char row1[8192] = "", row2[8192] = "";
    int read_ok = f && fgets(line, sizeof line, f) && fgets(row1, sizeof row1, f) && fgets(row2, sizeof row2, f);
    if (f) fclose(f);
    CHECK("target columns: 'A,E,S' when reached, empty when off", rc == 0 && read_ok &&
          strstr(row1, ",90.0000,85,3,2.750000,0.5;") && strstr(row2, ",90.0000,,,,0.5;") && strstr(row1, ",0.01,none,42,"),
          "rows: %s%s", row1, row2);

    /* the learning rate of each step against the closed form (schedule.h) */
    train_options o;
    options_defaults(&o);
    int same = 1;
    for (int epoch = 1; epoch <= 3; epoch++)
        for (long step = 0; step < 10; step++) same &= lr_at(&o, epoch, step, 10) == (float)0.01;
    CHECK("--lr-scaling none: every step takes (float)--lr, today's bits", same, "a step differs");
    o.lr = 0.1; o.batch = 256; o.lr_base_batch = 64; o.lr_scaling = LR_SCALING_LINEAR;
    same = 1;
    for (long step = 0; step < 10; step++) same &= lr_at(&o, 1, step, 10) == (float)(0.1 * 256 / 64);
    CHECK("--lr-scaling linear without warm-up: lr x batch / B0 from the first step", same, "lr_at(1, 0) = %.9g",
          lr_at(&o, 1, 0, 10));
    o.warmup_epochs = 2;
    int ramp_ok = 1;
    for (int epoch = 1; epoch <= 4; epoch++)
        for (long step = 0; step < 10; step++) {
            double s_global = (epoch - 1) * 10 + step, peak = 0.1 * 256 / 64;
            float want = s_global < 20 ? (float)(0.1 + (peak - 0.1) * s_global / 20) : (float)peak;
            if (lr_at(&o, epoch, step, 10) != want) {
                ramp_ok = 0;
                printf("  epoch %d step %ld: lr %.9g, want %.9g\n", epoch, step, lr_at(&o, epoch, step, 10), want);
            }
        }
    CHECK("--warmup-epochs 2: linear per step from --lr (step 0) to the scaled rate (step 20 on)",
          ramp_ok && lr_at(&o, 1, 0, 10) == (float)0.1 && lr_at(&o, 2, 0, 10) == (float)0.25 && lr_at(&o, 3, 0, 10) == (float)0.4,
          "see the steps above");
    options_defaults(&o);
    o.warmup_epochs = 1;
    CHECK("--warmup-epochs without --lr-scaling linear is refused", schedule_check_flags(&o, err, sizeof err) == -1 &&
          strstr(err, "--warmup-epochs"), "err '%s'", err);

    /* the stop and its columns */
    options_defaults(&o);
    o.epochs = 10; o.target_accuracy = 85;
    int before = target_reached(&o, 1, 84.99);
    int at = target_reached(&o, 3, 85.0);
    CHECK("target_reached: below A goes on; at A stops and ends the run there", !before && at && o.epochs == 3,
          "before %d at %d epochs %d", before, at, o.epochs);
    result_row filled;
    results_fill(&filled, "serial", "own-gemm", 1, 1, &o, 28, 100, 10, 1.0, 7.5, loss, acc, sec);
    CHECK("results_fill: epochs_to_target = the epochs run, seconds_to_target = total_seconds",
          filled.epochs == 3 && filled.epochs_to_target == 3 && filled.seconds_to_target == 7.5 &&
          filled.target_accuracy == 85 && !strcmp(filled.lr_schedule, "none"),
          "epochs %d to_target %d seconds %g", filled.epochs, filled.epochs_to_target, filled.seconds_to_target);
    o.target_accuracy = 95;
    results_fill(&filled, "serial", "own-gemm", 1, 1, &o, 28, 100, 10, 1.0, 7.5, loss, acc, sec);
    CHECK("results_fill: a target not reached leaves epochs_to_target empty", filled.epochs_to_target == 0, "%d",
          filled.epochs_to_target);
    o.target_accuracy = 85; o.epochs = 10;
    int resumed_last = target_resumed(&o, acc, 3, err, sizeof err);
    CHECK("--resume: a target first reached before the checkpoint's last epoch is refused",
          resumed_last == -1 && o.epochs == 10 && strstr(err, "epoch 2 of its 3"), "%d epochs %d err '%s'",
          resumed_last, o.epochs, err);
    int resumed_before = target_resumed(&o, acc, 1, err, sizeof err);
    CHECK("--resume: a target not reached in the checkpoint's epochs trains on", resumed_before == 0 && o.epochs == 10,
          "%d epochs %d", resumed_before, o.epochs);
    o.target_accuracy = 90; o.epochs = 10;
    resumed_last = target_resumed(&o, acc, 3, err, sizeof err);
    CHECK("--resume: a target reached at the checkpoint's last epoch ends the run there", resumed_last == 0 && o.epochs == 3,
          "%d epochs %d", resumed_last, o.epochs);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_EXIT();
}
