/*
 * common/results.c — atomic CSV row appends; see results.h for the schema.
 */
#define _GNU_SOURCE
#include "results.h"
#include "options.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

double results_median(const double *v, int n) {
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return v[0];
    memcpy(s, v, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++)            /* insertion sort: n is an epoch count */
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) { double t = s[j]; s[j] = s[j - 1]; s[j - 1] = t; }
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* Growing string buffer for one row. */
typedef struct { char *p; size_t len, cap; int oom; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = 1; return; }
        if ((size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q; b->cap = cap;
    }
}

/* Text fields never contain the separators: replace ',', '"' and newlines. */
static void sb_field(sbuf *b, const char *s) {
    for (const char *c = s ? s : ""; *c; c++)
        sb_printf(b, "%c", (*c == ',' || *c == '"' || *c == '\n' || *c == '\r') ? '_' : *c);
    sb_printf(b, ",");
}

static void sb_curve(sbuf *b, const double *v, int n, const char *fmt) {
    for (int i = 0; v && i < n; i++) {
        if (i) sb_printf(b, ";");
        sb_printf(b, fmt, v[i]);
    }
    sb_printf(b, ",");
}

static int write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        p += w; len -= (size_t)w;
    }
    return 0;
}

int results_append(const char *path, const result_row *r, char *err, size_t errlen) {
    if (!path || !*path || strcmp(path, "none") == 0) return 0;

    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char run_id[320];
    snprintf(run_id, sizeof run_id, "%s-%ld-%d", host, (long)now, (int)getpid());

    sbuf b = {0};
    sb_field(&b, run_id);
    sb_field(&b, r->program);
    sb_field(&b, r->variant);
    sb_printf(&b, "%d,%d,", r->ranks, r->threads);
    sb_field(&b, r->omp_wait_policy);
    sb_field(&b, r->dataset);
    sb_printf(&b, "%d,%ld,%ld,", r->image_size, r->train_n, r->test_n);
    sb_field(&b, r->hidden);
    sb_field(&b, r->activation);
    sb_printf(&b, "%ld,%d,%.9g,", r->batch, r->epochs, r->lr);
    sb_field(&b, r->lr_schedule);
    sb_printf(&b, "%llu,", (unsigned long long)r->seed);
    sb_printf(&b, "%.6f,%.6f,%.6f,%.6f,%.1f,%.2f,%.17g,%.4f,", r->epoch_seconds_median, r->total_seconds,
              r->comm_seconds, r->sync_seconds, r->samples_per_second, r->gflops,
              r->final_train_loss, r->test_accuracy);
    if (r->target_accuracy > 0) sb_printf(&b, "%.9g,", r->target_accuracy);
    else sb_printf(&b, ",");
    if (r->epochs_to_target > 0) sb_printf(&b, "%d,%.6f,", r->epochs_to_target, r->seconds_to_target);
    else sb_printf(&b, ",,");
    sb_curve(&b, r->train_loss_curve, r->n_curve, "%.17g");
    sb_curve(&b, r->test_acc_curve, r->n_curve, "%.4f");
    sb_curve(&b, r->epoch_seconds, r->n_curve, "%.6f");
    sb_field(&b, host);
    sb_printf(&b, "%s\n", stamp);
    if (b.oom) { free(b.p); return fail(err, errlen, "%s: out of memory formatting the result row", path); }

    /* Create the parent directory if it is missing (one level, e.g. results/). */
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char dir[4352];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            free(b.p);
            return fail(err, errlen, "%s: cannot create directory %s: %s", path, dir, strerror(errno));
        }
    }
    int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) { free(b.p); return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno)); }
    int rc = -1;
    if (flock(fd, LOCK_EX) != 0) { fail(err, errlen, "%s: cannot lock: %s", path, strerror(errno)); goto out; }
    struct stat st;
    if (fstat(fd, &st) != 0) { fail(err, errlen, "%s: cannot stat: %s", path, strerror(errno)); goto out; }

    const char *header = RESULTS_HEADER "\n";
    size_t hlen = strlen(header);
    if (st.st_size > 0) {
        /* Refuse to mix schemas: the first line must be exactly our header. */
        char *first = calloc(1, hlen + 1);
        ssize_t got = first ? pread(fd, first, hlen, 0) : -1;
        int same = got == (ssize_t)hlen && memcmp(first, header, hlen) == 0;
        free(first);
        if (!same) {
            fail(err, errlen, "%s: existing file does not start with this version's CSV header; move it away or pass --csv NEW_FILE", path);
            goto out;
        }
    }
    if (!S_ISREG(st.st_mode) && strcmp(path, "/dev/null") != 0) {
        fail(err, errlen, "%s: not a regular file (give a file name, or none)", path);
        goto out;
    }
    sbuf out = {0};
    if (st.st_size == 0) sb_printf(&out, "%s", header);
    else if (S_ISREG(st.st_mode)) {
        /* a torn last line (a writer killed mid-row, a file edited by hand): the row must
         * not be glued onto the fragment, so it starts on a new line */
        char last = '\n';
        if (pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') {
            sb_printf(&out, "\n");
            fprintf(stderr, "results: %s: its last line had no newline (torn); the new row starts on a new line\n", path);
        }
    }
    sb_printf(&out, "%s", b.p);
    if (out.oom) { free(out.p); fail(err, errlen, "%s: out of memory", path); goto out; }
    if (write_all(fd, out.p, out.len) != 0) {
        int e = errno;
        if (ftruncate(fd, st.st_size) != 0) { /* best effort: nothing more we can do */ }
        fail(err, errlen, "%s: write failed: %s (file restored to its previous length)", path, strerror(e));
        free(out.p);
        goto out;
    }
    free(out.p);
    if (fsync(fd) != 0 && errno != EINVAL) { fail(err, errlen, "%s: fsync failed: %s", path, strerror(errno)); goto out; }
    rc = 0;
out:
    if (rc != 0 && b.p) {   /* the result must not be lost: the row goes to stderr */
        fprintf(stderr, "results: the row that could not be written to %s:\n%s%s", path, RESULTS_HEADER "\n", b.p);
    }
    free(b.p);
    close(fd);   /* releases the lock */
    return rc;
}

int results_check_output(const char *path, const char *what, char *err, size_t errlen) {
    /* a closed stdout (a trainer piped into head) must not kill the run before its row,
     * nor a file size limit (ulimit -f): the write fails (EFBIG) and is undone instead */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    if (!path || strcmp(path, "none") == 0) return 0;
    if (!*path) return fail(err, errlen, "%s: empty file name (none writes nothing)", what);
    if (strcmp(path, "/dev/null") == 0) return 0;
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return fail(err, errlen, "%s %s: is a directory", what, path);
        if (!S_ISREG(st.st_mode))
            return fail(err, errlen, "%s %s: not a regular file (a FIFO or device; give a file name)", what, path);
        int fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
        if (fd < 0) return fail(err, errlen, "%s %s: cannot be written: %s", what, path, strerror(errno));
        int bad = 0;
        if (strcmp(what, "--csv") == 0 && st.st_size > 0) {
            const char *header = RESULTS_HEADER "\n";
            size_t hlen = strlen(header);
            char *first = calloc(1, hlen + 1);
            ssize_t got = first ? pread(fd, first, hlen, 0) : -1;
            bad = !(got == (ssize_t)hlen && memcmp(first, header, hlen) == 0);
            free(first);
        }
        close(fd);
        if (bad)
            return fail(err, errlen, "%s %s: the file does not start with this version's CSV header; move it away or "
                        "give another file", what, path);
        return 0;
    }
    if (errno != ENOENT) return fail(err, errlen, "%s %s: %s", what, path, strerror(errno));
    /* a new file: its directory must be writable, or (--csv only) be one missing level
     * whose parent is (results_append creates it) */
    char dir[4352];
    const char *slash = strrchr(path, '/');
    if (strlen(path) >= sizeof dir) return fail(err, errlen, "%s: the file name is too long", what);
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return fail(err, errlen, "%s %s: %s is not a directory", what, path, dir);
        if (access(dir, W_OK | X_OK) != 0) return fail(err, errlen, "%s %s: directory %s is not writable", what, path, dir);
        return 0;
    }
    if (strcmp(what, "--csv") == 0) {
        const char *up = strrchr(dir, '/');
        char parent[4352];
        if (!up) snprintf(parent, sizeof parent, ".");
        else if (up == dir) snprintf(parent, sizeof parent, "/");
        else snprintf(parent, sizeof parent, "%.*s", (int)(up - dir), dir);
        if (stat(parent, &st) == 0 && S_ISDIR(st.st_mode) && access(parent, W_OK | X_OK) == 0) return 0;
    }
    return fail(err, errlen, "%s %s: directory %s does not exist", what, path, dir);
}

double results_epoch_median(const double *v, int epochs) {
    return epochs > 1 ? results_median(v + 1, epochs - 1) : v[0];
}

void results_fill(result_row *r, const char *program, const char *variant, int ranks, int threads,
                  const train_options *o, int image_size, long train_n, long test_n,
                  double flops_per_sample, double total_seconds,
                  const double *loss_curve, const double *acc_curve, const double *epoch_seconds) {
    memset(r, 0, sizeof *r);
    const char *wait = getenv("OMP_WAIT_POLICY");
    double median = results_epoch_median(epoch_seconds, o->epochs);
    r->program = program;
    r->variant = variant;
    r->ranks = ranks;
    r->threads = threads;
    r->omp_wait_policy = wait ? wait : "";
    r->dataset = options_dataset_name(o, r->dataset_text, (int)sizeof r->dataset_text);
    r->image_size = image_size;
    r->train_n = train_n;
    r->test_n = test_n;
    r->hidden = options_hidden_string(o, r->hidden_text, (int)sizeof r->hidden_text);
    r->activation = options_activation_name(o->activation);
    r->batch = o->batch;
    r->epochs = o->epochs;
    r->lr = o->lr;
    r->seed = o->seed;
    r->epoch_seconds_median = median;
    r->total_seconds = total_seconds;
    r->samples_per_second = (double)train_n / median;
    r->gflops = flops_per_sample * (double)train_n / median / 1e9;
    r->final_train_loss = loss_curve[o->epochs - 1];
    r->test_accuracy = acc_curve[o->epochs - 1];
    if (o->lr_scaling == LR_SCALING_LINEAR)
        snprintf(r->schedule_text, sizeof r->schedule_text, "linear-b%ld-w%d", o->lr_base_batch, o->warmup_epochs);
    else snprintf(r->schedule_text, sizeof r->schedule_text, "none");
    r->lr_schedule = r->schedule_text;
    r->target_accuracy = o->target_accuracy;
    if (o->target_accuracy > 0 && r->test_accuracy >= o->target_accuracy) {   /* the run stopped there */
        r->epochs_to_target = o->epochs;
        r->seconds_to_target = total_seconds;
    }
    r->train_loss_curve = loss_curve;
    r->test_acc_curve = acc_curve;
    r->epoch_seconds = epoch_seconds;
    r->n_curve = o->epochs;
}

static int skip_row;

void results_skip_row(void) { skip_row = 1; }

int results_finish(const result_row *r, const char *csv, const char *who_text, const char *extra, char *err,
                   size_t errlen) {
    if (skip_row) csv = "none";
    else if (results_append(csv, r, err, errlen)) return -1;
    char who[64];
    if (who_text) snprintf(who, sizeof who, "%s", who_text);
    else if (r->ranks > 1 && r->threads > 1) snprintf(who, sizeof who, "%d ranks x %d threads", r->ranks, r->threads);
    else if (r->ranks > 1) snprintf(who, sizeof who, "%d ranks", r->ranks);
    else if (r->threads > 1) snprintf(who, sizeof who, "%d threads", r->threads);
    else snprintf(who, sizeof who, "1 core");
    char target[96] = "";
    if (r->epochs_to_target > 0)
        snprintf(target, sizeof target, " | target %g%% at epoch %d (%.3f s)", r->target_accuracy, r->epochs_to_target,
                 r->seconds_to_target);
    else if (r->target_accuracy > 0)
        snprintf(target, sizeof target, " | target %g%% not reached in %d epochs", r->target_accuracy, r->epochs);
    printf("%s: %s | %s | %d epochs | epoch median %.3f s | %.1fk samples/s | %.1f GFLOP/s | loss %.4f | "
           "test acc %.2f%%%s%s%s | csv %s\n",
           r->program, r->variant, who, r->epochs, r->epoch_seconds_median, r->samples_per_second / 1e3, r->gflops,
           r->final_train_loss, r->test_accuracy, target, extra && *extra ? " | " : "", extra ? extra : "",
           csv && *csv && strcmp(csv, "none") ? csv : "(none)");
    fflush(stdout);
    return 0;
}

int results_epoch(const char *program, int printer, int quiet, int epoch, int epochs, double loss,
                  double train_acc, double test_acc, double seconds, long train_n, const char *extra) {
    if (!isfinite(loss)) {
        if (printer) fprintf(stderr, "%s: training diverged at epoch %d (loss %g); lower --lr\n", program, epoch, loss);
        return 1;
    }
    if (printer && !quiet)
        printf("epoch %d/%d  loss %.6f  train_acc %.2f%%  test_acc %.2f%%  time %.3f s  %.1fk samples/s%s%s\n",
               epoch, epochs, loss, train_acc, test_acc, seconds, (double)train_n / seconds / 1e3,
               extra && *extra ? "  " : "", extra ? extra : "");
    fflush(stdout);
    return 0;
}
