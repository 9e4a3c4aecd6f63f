/*
 * common/trace.h — timelines of a run (--trace FILE): Chrome trace-event JSON that opens in
 * Perfetto and chrome://tracing (format: docs/tracing.md). Header-only, C and C++.
 *
 * A trainer marks what a step does, one line per span:
 *     double t = trace_step_begin(epoch);          the step span (and the slow-rank hook)
 *     TRACE(TRACE_DATA, "batch") gather_batch(...);
 *     TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, l, rows);
 *     trace_step_end(t);
 * and calls trace_epoch_level(epoch) before its evaluation and checkpoint spans.
 * Off (no --trace): a mark costs one predictable branch at its begin and one at its end
 * (its name is not even formed) and nothing is recorded.
 * On: a mark is two clock reads and one store into the calling thread's buffer
 * (preallocated for --trace-steps steps, grown if needed); --trace-steps steps from step
 * --trace-from (0: the run's first; the steps of an epoch: epoch 2's first, warm caches) are
 * recorded, plus every epoch-level span. The file is written once, at the end, by
 * trace_finish() (one process) or common/trace_mpi.h's trace_finish_mpi() (rank 0, after
 * gathering every rank's events), atomically: a private temporary file, then rename.
 *
 * Test hook: PARTRAIN_SLOW_RANK=R:US makes rank R spin US microseconds at the start of
 * every training step (span "slowdown"), traced or not (docs/testing.md#test-hooks).
 */
#ifndef PARTRAIN_TRACE_H
#define PARTRAIN_TRACE_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* lstat, mkstemp-like creation, when this is the first include */
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "options.h"
#include "timer.h"

#define TRACE_SIGNATURE "{\"partrain_trace\":1,"

enum trace_cat { TRACE_STEP, TRACE_DATA, TRACE_COMPUTE, TRACE_COMM, TRACE_WAIT, TRACE_UPDATE, TRACE_EVAL,
                 TRACE_CHECKPOINT, N_TRACE_CATS };

typedef struct {
    double t0, t1;              /* timer_now() at the span's begin and end */
    const char *name;           /* a string that lives as long as the program (a literal, trace_layer()) */
    int cat, epoch, step;
} trace_event;

typedef struct {
    trace_event *ev;
    long n, cap;
    long dropped;               /* events lost to a failed growth */
    char pad[64];               /* one thread's counters off the others' cache lines */
} trace_buffer;

static struct {
    int active;                 /* record marks now: --trace given, and a traced step or an epoch-level span */
    int on;                     /* --trace given */
    int slow;                   /* this rank runs PARTRAIN_SLOW_RANK's spin */
    long slow_us;
    int epoch, step;            /* the args of the marks now (step -1: epoch-level) */
    long steps_begun, steps_from, steps_max;   /* traced: steps_from <= step < steps_from + steps_max */
    int threads, rank;
    double t0;                  /* the clock's zero: after set-up (MPI: a barrier's exit) */
    trace_buffer *buf;          /* one per OpenMP thread */
} trace_state __attribute__((unused));

static inline const char *trace_cat_name(int cat) {
    static const char *const names[N_TRACE_CATS] = { "step", "data", "compute", "comm", "wait", "update", "eval",
                                                     "checkpoint" };
    return names[cat];
}

/* "forward L3", "backward L1", "update L2": names that live as long as the program
 * (layers 0..16), written once by trace_open() before any thread marks, then only read */
static char trace_layer_names[3][17][24] __attribute__((unused));
static inline void trace_layer_init(void) {
    static const char *const what[3] = { "forward", "backward", "update" };
    for (int k = 0; k < 3; k++)
        for (int l = 0; l <= 16; l++) snprintf(trace_layer_names[k][l], sizeof trace_layer_names[k][l], "%s L%d", what[k], l);
}
static inline const char *trace_layer(const char *what, int layer) {
    int k = what[0] == 'f' ? 0 : what[0] == 'b' ? 1 : 2;
    return trace_layer_names[k][layer < 0 || layer > 16 ? 0 : layer];
}

static inline int trace_thread(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Records one span on the calling thread's track (not inline in spirit: only when on). */
static inline void trace_record(int cat, const char *name, double t0, double t1) {
    if (!__atomic_load_n(&trace_state.active, __ATOMIC_RELAXED)) return;
    int tid = trace_thread();
    if (tid >= trace_state.threads) return;
    trace_buffer *b = &trace_state.buf[tid];
    if (b->n == b->cap) {
        long cap = b->cap ? 2 * b->cap : 1024;
        trace_event *grown = (trace_event *)realloc(b->ev, sizeof(trace_event) * (size_t)cap);
        if (!grown) { b->dropped++; return; }
        b->ev = grown;
        b->cap = cap;
    }
    trace_event *e = &b->ev[b->n++];
    e->t0 = t0; e->t1 = t1; e->name = name; e->cat = cat;
    e->epoch = __atomic_load_n(&trace_state.epoch, __ATOMIC_RELAXED);
    e->step = __atomic_load_n(&trace_state.step, __ATOMIC_RELAXED);
}

/* An MPI call's category by its name: a wait (MPI_Wait*, MPI_Barrier) or communication */
static inline int trace_mpi_cat(const char *call) {
    return !strncmp(call, "MPI_Wait", 8) || !strcmp(call, "MPI_Barrier") || !strcmp(call, "MPI_Win_fence")
           ? TRACE_WAIT : TRACE_COMM;
}

/* A span's begin: the clock when recording, else 0 (the one branch a mark costs when off) */
static inline double trace_begin(void) { return __atomic_load_n(&trace_state.active, __ATOMIC_RELAXED) ? timer_now() : 0.0; }
static inline void trace_end(int cat, const char *name, double t0) {
    if (t0 > 0.0) trace_record(cat, name, t0, timer_now());
}
/* a span's end in the macros: cat and name are evaluated only when recording */
#define TRACE_END_(cat, name, t0) ((t0) > 0.0 ? trace_record((cat), (name), (t0), timer_now()) : (void)0)

/* TRACE(cat, name) statement-or-block: the block as one span (a break or return inside it
 * loses the span: mark blocks without them) */
#define TRACE(cat, name) \
    for (double trace_t0_ = trace_begin(), trace_once_ = 1; trace_once_; trace_once_ = 0, TRACE_END_(cat, name, trace_t0_))
/* the same, recorded only when cond holds (a checkpoint span only when one is written) */
#define TRACE_IF(cond, cat, name) \
    for (double trace_t0_ = (cond) ? trace_begin() : 0.0, trace_once_ = 1; trace_once_; \
         trace_once_ = 0, TRACE_END_(cat, name, trace_t0_))

/* --- set-up --------------------------------------------------------------------------- */

/* Whether --trace FILE may be written; a one-line reason into err otherwise. Refused: an
 * empty name, a symbolic link, a directory or other non-file, the --csv or --checkpoint
 * file (same device and inode, or the same name), an existing file this suite did not
 * write (it does not start with TRACE_SIGNATURE), a directory that is missing or not
 * writable. other: further outputs of the program (--dump-params), NULL-terminated. */
static inline int trace_check_output(const train_options *o, const char *const *other, char *err, size_t errlen) {
    const char *path = o->trace;
    if (!path) return 0;
    if (!*path) { snprintf(err, errlen, "--trace: empty file name"); return -1; }
    if (strlen(path) + 40 > 4096) { snprintf(err, errlen, "--trace: the file name is too long"); return -1; }
    struct stat st, os;
    const char *outputs[8] = { o->csv, o->checkpoint, o->resume };
    int n_out = 3;
    for (int k = 0; other && other[k] && n_out < 8; k++) outputs[n_out++] = other[k];
    int exists = lstat(path, &st) == 0;
    if (!exists && errno != ENOENT) { snprintf(err, errlen, "--trace %s: %s", path, strerror(errno)); return -1; }
    for (int k = 0; k < n_out; k++) {
        const char *q = outputs[k];
        if (!q || !*q || !strcmp(q, "none")) continue;
        if (!strcmp(q, path) || (exists && stat(q, &os) == 0 && os.st_dev == st.st_dev && os.st_ino == st.st_ino)) {
            snprintf(err, errlen, "--trace %s: the same file as another output (%s)", path, q);
            return -1;
        }
    }
    if (exists) {
        if (S_ISLNK(st.st_mode)) {
            snprintf(err, errlen, "--trace %s: is a symbolic link; it is not replaced (give the file's own name)", path);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) { snprintf(err, errlen, "--trace %s: not a regular file", path); return -1; }
        char head[sizeof TRACE_SIGNATURE] = "";
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        ssize_t got = fd >= 0 ? read(fd, head, sizeof head - 1) : -1;
        if (fd >= 0) close(fd);
        if (got != (ssize_t)(sizeof head - 1) || memcmp(head, TRACE_SIGNATURE, sizeof head - 1)) {
            snprintf(err, errlen, "--trace %s: an existing file that is not a partrain trace; move it away or give "
                     "another name", path);
            return -1;
        }
    }
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &os) != 0 || !S_ISDIR(os.st_mode)) {
        snprintf(err, errlen, "--trace %s: directory %s does not exist", path, dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "--trace %s: directory %s is not writable", path, dir);
        return -1;
    }
    return 0;
}

/* PARTRAIN_SLOW_RANK=R:US for this rank: 1 and the microseconds, 0 when unset or another
 * rank's; -1 when malformed (the caller refuses it as bad input). */
static inline int trace_slow_rank(int rank, long *us) {
    const char *v = getenv("PARTRAIN_SLOW_RANK");
    *us = 0;
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long r = strtol(v, &end, 10);
    if (end == v || *end != ':' || errno || r < 0) return -1;
    const char *p = end + 1;
    long u = strtol(p, &end, 10);
    if (end == p || *end || errno || u < 0 || u > 10000000) return -1;
    *us = u;
    return r == rank;
}

/* After the checks, before the work: buffers for `threads` threads, preallocated for the
 * traced steps (events_per_step per thread: a trainer's marks per step). Returns -1 when
 * out of memory or PARTRAIN_SLOW_RANK is malformed (err says which). */
static inline int trace_open(const train_options *o, int threads, int rank, long events_per_step, char *err,
                             size_t errlen) {
    trace_state.rank = rank;
    int slow = trace_slow_rank(rank, &trace_state.slow_us);
    if (slow < 0) { snprintf(err, errlen, "PARTRAIN_SLOW_RANK: expected R:US (rank:microseconds)"); return -1; }
    trace_state.slow = slow;
    if (!o->trace) return 0;
    trace_layer_init();
    trace_state.threads = threads;
    trace_state.steps_max = o->trace_steps;
    trace_state.steps_from = o->trace_from;
    trace_state.buf = (trace_buffer *)calloc((size_t)threads, sizeof(trace_buffer));
    if (!trace_state.buf) { snprintf(err, errlen, "--trace: out of memory"); return -1; }
    long cap = o->trace_steps * events_per_step + 256;
    if (cap > (1L << 20)) cap = 1L << 20;   /* 40 MB a thread at most up front; more grows as needed */
    for (int t = 0; t < threads; t++) {
        trace_state.buf[t].ev = (trace_event *)malloc(sizeof(trace_event) * (size_t)cap);
        if (!trace_state.buf[t].ev) { snprintf(err, errlen, "--trace: out of memory (--trace-steps smaller)"); return -1; }
        /* touched now: a page's first write would otherwise fault inside a step, a gap of
         * tens of microseconds between two spans */
        memset(trace_state.buf[t].ev, 0, sizeof(trace_event) * (size_t)cap);
        trace_state.buf[t].cap = cap;
    }
    trace_state.on = 1;
    return 0;
}

/* The clock's zero (one process: after set-up; MPI: trace_start_mpi() after a barrier).
 * What was marked before (a warm-up step, a CUDA graph's capture) is dropped and the
 * steps are counted from here. */
static inline void trace_start(void) {
    for (int t = 0; t < trace_state.threads; t++) trace_state.buf[t].n = 0;
    trace_state.steps_begun = 0;
    __atomic_store_n(&trace_state.active, 0, __ATOMIC_RELAXED);
    trace_state.t0 = timer_now();
}

/* --- steps ------------------------------------------------------------------------------ */

/* The start of a training step: the step's number, whether it is traced, the slow-rank
 * spin. Returns the step span's begin (0 when not traced) for trace_step_end(). */
static inline double trace_step_begin(int epoch) {
    if (!(trace_state.on | trace_state.slow)) return 0.0;
    long step = trace_state.steps_begun++;
    __atomic_store_n(&trace_state.epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&trace_state.step, (int)step, __ATOMIC_RELAXED);
    int active = trace_state.on && step >= trace_state.steps_from && step - trace_state.steps_from < trace_state.steps_max;
    __atomic_store_n(&trace_state.active, active, __ATOMIC_RELAXED);
    double t = active ? timer_now() : 0.0;
    if (trace_state.slow) {
        double t0 = timer_now(), until = t0 + 1e-6 * (double)trace_state.slow_us;
        while (timer_now() < until) { }
        trace_record(TRACE_COMPUTE, "slowdown", t0, timer_now());
    }
    return t;
}
/* The same in an OpenMP team: thread 0 marks the step (the others' spans carry the step
 * number thread 0 set last: a worker's first span of a step may carry the one before) */
static inline double trace_step_begin_team(int epoch) { return trace_thread() == 0 ? trace_step_begin(epoch) : 0.0; }
static inline void trace_step_end(double t0) {
    if (t0 > 0.0) trace_record(TRACE_STEP, "step", t0, timer_now());
}

/* Before an epoch's evaluation and checkpoint: their spans are always recorded (step -1) */
static inline void trace_epoch_level(int epoch) {
    if (!trace_state.on) return;
    __atomic_store_n(&trace_state.epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&trace_state.step, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&trace_state.active, 1, __ATOMIC_RELAXED);
}

/* --- the file ------------------------------------------------------------------------- */

/* This process's events as JSON text, each one ",\n{...}" (metadata first: its process and
 * its threads' names), pid = rank; malloc'ed, its length in *len; NULL when out of memory. */
static inline char *trace_events_json(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *s = (char *)malloc(cap);
    int pid = trace_state.rank;
    /* appends one event: grows s first when fewer than 512 bytes are left (an event is < 300) */
#define TRACE_APPEND(...) do { \
        if (s && cap - n < 512) { char *g = (char *)realloc(s, 2 * cap); if (!g) free(s); s = g; cap *= 2; } \
        if (s) n += (size_t)snprintf(s + n, cap - n, __VA_ARGS__); \
    } while (0)
    TRACE_APPEND(",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}}", pid, pid);
    for (int t = 0; t < trace_state.threads; t++)
        TRACE_APPEND(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"thread %d\"}}",
                     pid, t, t);
    for (int t = 0; t < trace_state.threads; t++)
        for (long k = 0; k < trace_state.buf[t].n; k++) {
            const trace_event *e = &trace_state.buf[t].ev[k];
            double ts = 1e6 * (e->t0 - trace_state.t0), dur = 1e6 * (e->t1 - e->t0);
            if (!(ts >= 0)) ts = 0;   /* a span begun before the clock's zero (none in the trainers) */
            if (!(dur >= 0)) dur = 0;
            TRACE_APPEND(",\n{\"name\":\"%.40s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,"
                         "\"tid\":%d,\"args\":{\"epoch\":%d,\"step\":%d}}",
                         e->name, trace_cat_name(e->cat), ts, dur, pid, t, e->epoch, e->step);
        }
#undef TRACE_APPEND
    *len = n;
    return s;
}

/* The top of the file: signature and otherData (program, variant, ranks, threads, ...) */
static inline int trace_header(char *s, size_t cap, const char *program, const char *variant, int ranks,
                               const train_options *o) {
    long traced = trace_state.steps_begun - trace_state.steps_from;
    if (traced < 0) traced = 0;
    if (traced > trace_state.steps_max) traced = trace_state.steps_max;
    return snprintf(s, cap, TRACE_SIGNATURE "\n\"otherData\":{\"program\":\"%s\",\"variant\":\"%s\",\"ranks\":%d,"
                    "\"threads\":%d,\"batch\":%ld,\"epochs\":%d,\"first_step\":%ld,\"steps_traced\":%ld,"
                    "\"clock\":\"CLOCK_MONOTONIC from t0, a barrier exit\"},\n\"displayTimeUnit\":\"ms\",\n"
                    "\"traceEvents\":[", program, variant, ranks, trace_state.threads, o->batch, o->epochs, trace_state.steps_from, traced);
}

/* Writes header + events (events begin with ",": the first byte is skipped) to a private
 * temporary file beside path, then renames it over path. 0, or -1 with err. */
static inline int trace_write_file(const char *path, const char *header, const char *events, size_t len, char *err,
                                   size_t errlen) {
    char tmp[4200];
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%d.%d", path, (int)getpid(), rand() ^ attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) { snprintf(err, errlen, "--trace %s: cannot create a temporary file: %s", path, strerror(errno)); return -1; }
    FILE *f = fdopen(fd, "w");
    int ok = f != NULL;
    if (ok) {
        ok &= fputs(header, f) >= 0;
        if (len > 1) ok &= fwrite(events + 1, 1, len - 1, f) == len - 1;
        ok &= fputs("\n]}\n", f) >= 0;
        ok &= fclose(f) == 0;
    } else close(fd);
    for (int t = 0; t < trace_state.threads; t++)
        if (trace_state.buf[t].dropped) ok = 0, errno = ENOMEM;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "--trace %s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static inline void trace_free(void) {
    for (int t = 0; t < trace_state.threads && trace_state.buf; t++) free(trace_state.buf[t].ev);
    free(trace_state.buf);
    trace_state.buf = NULL;
    trace_state.on = 0;
    __atomic_store_n(&trace_state.active, 0, __ATOMIC_RELAXED);
}

/* One process: writes --trace FILE (nothing without --trace). 0, or -1 with err. */
static inline int trace_finish(const char *program, const char *variant, const train_options *o, char *err,
                               size_t errlen) {
    if (!trace_state.on) return 0;
    __atomic_store_n(&trace_state.active, 0, __ATOMIC_RELAXED);
    size_t len = 0;
    char header[1024];
    char *events = trace_events_json(&len);
    int rc = -1;
    if (!events) snprintf(err, errlen, "--trace: out of memory");
    else {
        trace_header(header, sizeof header, program, variant, 1, o);
        rc = trace_write_file(o->trace, header, events, len, err, errlen);
    }
    free(events);
    trace_free();
    return rc;
}

#endif
