/*
 * bench/comm.c — OSU-style timing of the trainers' gradient exchanges, P MPI ranks.
 *
 * What the data-parallel trainers spend per step on communication depends on the message
 * (the float gradient: the model's parameter bytes), the ranks and the transport; this
 * measures exactly their calls, with their arguments, outside any training:
 *   allreduce     MPI_Allreduce(MPI_IN_PLACE, ..., MPI_SUM, MPI_COMM_WORLD)
 *   reduce-bcast  MPI_Reduce to rank 0 (in place there) + MPI_Bcast from rank 0
 *   hierarchical  common/mpi_util.h's hier_allreduce(): MPI_Reduce within each node,
 *                 MPI_Allreduce among the node leaders, MPI_Bcast within each node
 *                 (PARTRAIN_RANKS_PER_NODE=K: pseudo-nodes of K ranks, as in the trainers)
 *   iallreduce    MPI_Iallreduce(MPI_IN_PLACE, ...) then MPI_Wait: the call of mpi/mpi's
 *                 --sync overlap (one per layer) with nothing to overlap it, which is what
 *                 it costs when the library progresses it only inside MPI calls
 *   barrier       MPI_Barrier (bytes 0)
 * Sizes: powers of two from --min-bytes to --max-bytes, plus the gradient bytes of the
 * trainers' MLP (--hidden, default the trainers' 256,128; padded per layer as the trainers
 * lay it out) at the image sides of --model-sides (28: the default net; 57 and 112: the
 * imagesize sweep of run_all.sh).
 * Timing (per op and size): one validation call first (each rank sends rank + 1 + i % 3,
 * the sum is exact in float and checked on every rank), then the warm-up calls (dropped),
 * then the timed calls, OSU's way: each after an untimed synchronization of all ranks (a
 * one-double MPI_Allreduce: OSU's barrier, which also tells every rank when to stop), each
 * call timed alone. --back-to-back instead lets them follow each other with nothing
 * between them, as a trainer with little computation per step makes them: one barrier,
 * then each rank times its whole run of calls. --gap-rows R spaces them as a trainer does:
 * between two calls, one training step's computation on R rows (the forward and backward
 * products of the MLP, with the trainers' kernel, common/gemm.h), only the calls timed;
 * the CSV's gap_us is that step's measured time. Over shaped TCP links on shared cores
 * how the calls are spaced, and by what work, changes their time by up to 2x (NOTES 38,
 * 40); scripts/model.py takes that factor from these rows.
 * min/avg/max over the ranks of each rank's average are reduced to rank 0 (as OSU
 * reports). The timed buffer holds zeros (in place, like the trainers; sums stay zero).
 * Iterations: --iters N, or adaptive: about --target-ms of calls (at least 3, at most
 * 100000; --back-to-back: the count comes from the warm-up calls' time, agreed by all ranks),
 * so a slow transport or size costs few calls and a fast one many.
 * Output (rank 0): stdout is a gnuplot table (`#` header lines, one row per size: bytes,
 * then avg min max iterations of each op) and a last line "comm: ... | every sum verified";
 * --dat FILE the same table, that line commented (`# comm: ...`); --csv FILE appends one row per (op, size) in results/comm.csv's schema
 * (COMM_HEADER below; docs/comm.md). Errors: every MPI call checked (common/mpi_util.h);
 * bad flags: one line, exit 2; a wrong sum: one line, exit 1.
 *
 * Compile: make all   (mpicc -std=c11 -O3 bench/comm.c common/{idx,options,results,checkpoint}.c -lz -lm)
 * Run:     scripts/mpirun.sh 4 bench/comm --transport shm --csv results/comm.csv   (bench/comm.sh: P = 2..8)
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "gemm.h"       /* matmul(): the trainers' kernel, for --gap-rows' step */
#include "mlp.h"        /* PAD16, alloc_floats */
#include "options.h"
#include "results.h"    /* results_check_output */
#include "timer.h"

#define PROGRAM "comm"
#include "mpi_util.h"   /* rank, nranks, mpi_check(), hier_init(), hier_allreduce() */

#define COMM_HEADER "transport,op,ranks,nodes,ranks_per_node,bytes,iterations,min_us,avg_us,max_us,timestamp,gap_us"
#define MAX_SIZES 64
#define MAX_SIDES 8
#define MIN_ITERS 3
#define MAX_ITERS 100000

// ----------------------------------------------------------------------------
// options

enum op_kind { OP_ALLREDUCE, OP_REDUCE_BCAST, OP_HIERARCHICAL, OP_IALLREDUCE, OP_BARRIER, N_OPS };
static const char *const OP_NAME[N_OPS] = { "allreduce", "reduce-bcast", "hierarchical", "iallreduce", "barrier" };

typedef struct {
    const char *transport;      /* --transport LABEL [shm] */
    int ops[N_OPS], n_ops;      /* --ops LIST, in the order given */
    long min_bytes, max_bytes;  /* --min-bytes, --max-bytes */
    int sides[MAX_SIDES], n_sides;   /* --model-sides LIST (none: 0 sides) */
    train_options net;          /* --hidden A,B,... (the trainers' default) */
    long iters, warmup;         /* --iters (0: adaptive), --warmup */
    double target_ms;           /* --target-ms */
    int back_to_back;           /* --back-to-back or --gap-rows: no synchronization between the timed calls */
    int gap_rows;               /* --gap-rows: a training step on that many rows between two calls */
    const char *csv, *dat;      /* --csv FILE, --dat FILE (NULL: none) */
} comm_options;

static void usage(void) {
    printf("Usage: scripts/mpirun.sh P bench/comm [options]   (bench/comm.sh runs P = 2..8)\n"
           "Times the trainers' gradient exchanges OSU-style, or back to back (--back-to-back); per call:\n"
           "min/avg/max over the ranks.\n\n"
           "  --transport LABEL     the CSV's transport column: shm, tcp, tcp-1gbit, ... [shm]\n"
           "  --ops LIST            of allreduce, reduce-bcast, hierarchical, iallreduce, barrier [all five]\n"
           "  --min-bytes N         smallest message, a multiple of 4 [4]\n"
           "  --max-bytes N         largest power-of-two message: N, N/2, ... down to --min-bytes; 0: none,\n"
           "                        only the --model-sides sizes [4194304]\n"
           "  --model-sides LIST    also the trainers' gradient bytes at these image sides, or none [28,57,112]\n"
           "  --hidden A,B,...      the trainers' hidden layers for those sizes [256,128]\n"
           "  --iters N             timed iterations per size [adaptive: about --target-ms]\n"
           "  --target-ms T         adaptive: time calls for about T ms per op and size [20]\n"
           "  --warmup N            untimed iterations before each size [3]\n"
           "  --back-to-back        the timed calls follow each other with nothing between them [off: OSU's\n"
           "                        way, the ranks meet (an untimed MPI_Allreduce) before every timed call]\n"
           "  --gap-rows R          back to back with one training step's computation on R rows between two\n"
           "                        calls (the MLP's forward and backward products), as a trainer's ranks\n"
           "                        compute between their exchanges; the CSV's gap_us is that step's measured\n"
           "                        time (OSU's way leaves it empty, --back-to-back writes 0)\n"
           "  --csv FILE            append one row per (op, size) to FILE (header: " COMM_HEADER ") [none]\n"
           "  --dat FILE            also write stdout's table (gnuplot columns) to FILE [none]\n"
           "  --help                this text\n"
           "Environment: PARTRAIN_RANKS_PER_NODE=K  pseudo-nodes of K consecutive ranks (tests, one machine).\n"
           "Exit status: 0 done and every sum verified, 1 a wrong sum or a failed MPI call, 2 bad flags.\n");
}

/* "a,b,c" of positive ints into v (at most max); status 0, or -1 on a bad list */
static int parse_ints(const char *s, int *v, int max, int *n, long lo, long hi) {
    *n = 0;
    while (*s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < lo || x > hi || *n == max || (*end && *end != ',') || (*end == ',' && !end[1])) return -1;
        v[(*n)++] = (int)x;
        s = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

static void parse_options(comm_options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->transport = "shm";
    for (int k = 0; k < N_OPS; k++) o->ops[k] = k;
    o->n_ops = N_OPS;
    o->min_bytes = 4;
    o->max_bytes = 4L << 20;
    o->sides[0] = 28; o->sides[1] = 57; o->sides[2] = 112; o->n_sides = 3;
    options_defaults(&o->net);
    o->warmup = 3;
    o->target_ms = 20;
    int saved = mute_stderr_off_root();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { if (rank == 0) usage(); exit(0); }
        if (!strcmp(a, "--transport")) {
            o->transport = options_value(PROGRAM, argc, argv, &i);
            size_t n = strlen(o->transport);
            if (!n || n > 32 || strspn(o->transport, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != n)
                options_die(PROGRAM, "--transport: expected a label of a-z 0-9 - _ . (at most 32), got '%s'", o->transport);
        } else if (!strcmp(a, "--ops")) {
            const char *v = options_value(PROGRAM, argc, argv, &i), *p = v;
            o->n_ops = 0;
            int seen[N_OPS] = { 0 };
            while (*p) {
                size_t len = strcspn(p, ",");
                int k = 0;
                while (k < N_OPS && (strlen(OP_NAME[k]) != len || strncmp(p, OP_NAME[k], len))) k++;
                if (k == N_OPS || seen[k])
                    options_die(PROGRAM, "--ops: expected distinct names of allreduce, reduce-bcast, hierarchical, iallreduce, barrier, got '%s'", v);
                seen[k] = 1;
                o->ops[o->n_ops++] = k;
                p += len;
                if (*p == ',' && !*++p) options_die(PROGRAM, "--ops: trailing ',' in '%s'", v);
            }
            if (!o->n_ops) options_die(PROGRAM, "--ops: empty list");
        } else if (!strcmp(a, "--min-bytes")) {
            o->min_bytes = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 4, 1L << 30);
        } else if (!strcmp(a, "--max-bytes")) {
            o->max_bytes = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 0, 1L << 30);
        } else if (!strcmp(a, "--model-sides")) {
            const char *v = options_value(PROGRAM, argc, argv, &i);
            if (!strcmp(v, "none")) o->n_sides = 0;
            else if (parse_ints(v, o->sides, MAX_SIDES, &o->n_sides, 1, 1024))
                options_die(PROGRAM, "--model-sides: expected up to %d image sides 1..1024 like 28,57 (or none), got '%s'", MAX_SIDES, v);
        } else if (!strcmp(a, "--iters")) {
            o->iters = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, MAX_ITERS);
        } else if (!strcmp(a, "--warmup")) {
            o->warmup = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 0, MAX_ITERS);
        } else if (!strcmp(a, "--target-ms")) {
            o->target_ms = options_double(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 0.1, 60000);
        } else if (!strcmp(a, "--back-to-back")) {
            o->back_to_back = 1;
        } else if (!strcmp(a, "--gap-rows")) {
            o->gap_rows = (int)options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, 65536);
            o->back_to_back = 1;
        } else if (!strcmp(a, "--csv")) {
            o->csv = options_value(PROGRAM, argc, argv, &i);
        } else if (!strcmp(a, "--dat")) {
            o->dat = options_value(PROGRAM, argc, argv, &i);
        } else if (!strcmp(a, "--hidden")) {
            options_parse_common(&o->net, PROGRAM, argc, argv, &i);
        } else {
            options_die(PROGRAM, "unknown option '%s'", a);
        }
    }
    if (o->csv && !strcmp(o->csv, "none")) o->csv = NULL;
    if (o->dat && !strcmp(o->dat, "none")) o->dat = NULL;
    if (o->min_bytes % 4) options_die(PROGRAM, "--min-bytes %ld: not a multiple of 4 (the payload is floats)", o->min_bytes);
    if (o->max_bytes % 4) options_die(PROGRAM, "--max-bytes %ld: not a multiple of 4 (the payload is floats)", o->max_bytes);
    if (o->max_bytes == 0 && !o->n_sides) options_die(PROGRAM, "--max-bytes 0 and --model-sides none: no size to time");
    if (o->max_bytes && o->min_bytes > o->max_bytes) options_die(PROGRAM, "--min-bytes %ld is larger than --max-bytes %ld", o->min_bytes, o->max_bytes);
    unmute_stderr(saved);
}

// ----------------------------------------------------------------------------
// the sizes

/* the floats the trainers exchange per step for o's MLP at `features` inputs: every W and
 * b padded to 16 floats, as mpi/mpi.c and hybrid/hybrid.c lay out their gradient */
static long gradient_floats(const train_options *o, long features) {
    long n = 0, prev = features;
    for (int l = 0; l <= o->n_hidden; l++) {
        long out = l < o->n_hidden ? o->hidden[l] : IDX_CLASSES;
        n += PAD16(prev * out) + PAD16(out);
        prev = out;
    }
    return n;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* the message sizes in bytes, ascending, without repeats; returns how many */
static int make_sizes(const comm_options *o, long *sizes, long *model_bytes) {
    int n = 0;
    for (long b = o->min_bytes; b <= o->max_bytes && n < MAX_SIZES - MAX_SIDES; b *= 2) sizes[n++] = b;
    for (int k = 0; k < o->n_sides; k++)
        sizes[n++] = model_bytes[k] = 4 * gradient_floats(&o->net, (long)o->sides[k] * o->sides[k]);
    qsort(sizes, (size_t)n, sizeof *sizes, cmp_long);
    int m = 0;
    for (int k = 0; k < n; k++) if (m == 0 || sizes[k] != sizes[m - 1]) sizes[m++] = sizes[k];
    return m;
}

// ----------------------------------------------------------------------------
// one operation, exactly as the trainers call it

static hier_comms hier;

static void run_op(int op, float *buf, int n) {
    switch (op) {
    case OP_ALLREDUCE:
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        break;
    case OP_REDUCE_BCAST:
        mpi_check(MPI_Reduce(rank == 0 ? MPI_IN_PLACE : buf, buf, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
        mpi_check(MPI_Bcast(buf, n, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
        break;
    case OP_HIERARCHICAL:
        hier_allreduce(buf, n, &hier);
        break;
    case OP_IALLREDUCE: {
        MPI_Request req;
        mpi_check(MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req), "MPI_Iallreduce");
        mpi_check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
        break;
    }
    default:
        mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        break;
    }
}

/* one call on known data, the sum checked on every rank: the lowest failing rank says
 * where, every rank exits 1 */
static void validate(int op, float *buf, int n) {
    if (op == OP_BARRIER) return;
    for (int i = 0; i < n; i++) buf[i] = (float)(rank + 1 + i % 3);
    run_op(op, buf, n);
    long bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (buf[i] != (float)((long)nranks * (nranks + 1) / 2 + (long)nranks * (i % 3))) bad = i;
    char msg[200];
    if (bad >= 0)
        snprintf(msg, sizeof msg, "%s of %ld bytes: rank %d holds %g at float %ld, expected %ld: the sum is wrong",
                 OP_NAME[op], 4L * n, rank, (double)buf[bad], bad, (long)nranks * (nranks + 1) / 2 + (long)nranks * (bad % 3));
    agree_or_die(bad >= 0, msg, 1);
}

typedef struct { long iters; double min_us, avg_us, max_us, gap_us; } timing;

/* --gap-rows: what a trainer's rank computes between two exchanges, one step's products on
 * R rows of the MLP (side^2 inputs, the --hidden layers, 10 outputs): forward act[l] =
 * act[l-1] . W[l]; backward, per layer from the top, the weight gradient act[l-1]^T . dz
 * and, below the top, dz . W[l]^T. The trainers' kernel and shapes, so the cores and
 * caches are as busy as a step keeps them (a spinning loop is not: NOTES 40). The values
 * are constant (every product starts from the same inputs), so nothing overflows. */
typedef struct {
    int rows, layers, size[OPT_MAX_HIDDEN + 2];
    float *act[OPT_MAX_HIDDEN + 2], *w[OPT_MAX_HIDDEN + 2], *wt[OPT_MAX_HIDDEN + 2], *grad, *delta;
} step_work;

static int step_init(step_work *s, const train_options *net, int side, int rows) {
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->layers = net->n_hidden + 1;
    s->size[0] = side * side;
    for (int l = 1; l <= s->layers; l++) s->size[l] = l < s->layers ? net->hidden[l - 1] : IDX_CLASSES;
    long widest = 0, wide_rows = 0;
    for (int l = 0; l <= s->layers; l++) {
        s->act[l] = alloc_floats((long)rows * s->size[l]);
        if (!s->act[l]) return -1;
        for (long i = 0; i < (long)rows * s->size[l]; i++) s->act[l][i] = 0.01f;
        if ((long)rows * s->size[l] > wide_rows) wide_rows = (long)rows * s->size[l];
        if (l == 0) continue;
        long n = (long)s->size[l - 1] * s->size[l];
        s->w[l] = alloc_floats(n);
        s->wt[l] = alloc_floats(n);
        if (!s->w[l] || !s->wt[l]) return -1;
        for (long i = 0; i < n; i++) s->w[l][i] = s->wt[l][i] = 0.01f;
        if (n > widest) widest = n;
    }
    s->grad = alloc_floats(widest);
    s->delta = alloc_floats(wide_rows);
    return s->grad && s->delta ? 0 : -1;
}

static void step_free(step_work *s) {
    for (int l = 0; l <= s->layers; l++) { free(s->act[l]); free(s->w[l]); free(s->wt[l]); }
    free(s->grad); free(s->delta);
}

static void step_run(step_work *s) {
    int R = s->rows;
    for (int l = 1; l <= s->layers; l++)
        matmul(R, s->size[l], s->size[l - 1], s->act[l - 1], s->size[l - 1], 1, s->w[l], s->size[l], s->act[l],
               s->size[l], &EPI_PLAIN);
    for (int l = s->layers; l >= 1; l--) {
        int in = s->size[l - 1], out = s->size[l];
        matmul(in, out, R, s->act[l - 1], 1, in, s->act[l], out, s->grad, out, &EPI_PLAIN);
        if (l > 1) matmul(R, in, out, s->act[l], out, 1, s->wt[l], in, s->delta, in, &EPI_PLAIN);
    }
}

static step_work gap_step;   /* --gap-rows */
static double step_seconds;  /* one such step, the slowest rank's (for the adaptive count) */

/* the warm-up (dropped), then the timed calls, min/avg/max over the ranks at rank 0. Before
 * each timed call the ranks meet in an untimed MPI_Allreduce of the seconds since the
 * first one (MAX: a barrier that also makes every rank agree when to stop): --iters calls,
 * or adaptive, until about --target-ms have passed (at least MIN_ITERS calls). */
static timing time_op(const comm_options *o, int op, float *buf, int n) {
    memset(buf, 0, sizeof(float) * (size_t)n);
    double w0 = timer_now();
    for (long it = 0; it < o->warmup; it++) run_op(op, buf, n);
    timing t = { 0, 0, 0, 0, 0 };
    double sum = 0.0, gaps = 0.0, start = timer_now(), mine, elapsed = 0.0;
    if (o->back_to_back) {
        /* back to back: the count from the warm-up's time per call (slowest rank), one
         * barrier, then every rank times the whole run */
        long warm = o->warmup;
        if (!o->iters && !warm) { run_op(op, buf, n); warm = 1; }   /* an estimate needs one call */
        mine = warm ? (timer_now() - w0) / (double)warm : 0.0;
        mpi_check(MPI_Allreduce(&mine, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        t.iters = o->iters;
        if (!t.iters) {
            double per_call = elapsed + step_seconds;   /* --target-ms bounds the wall time */
            double want = per_call > 0 ? o->target_ms * 1e-3 / per_call : (double)MAX_ITERS;
            t.iters = want < MIN_ITERS ? MIN_ITERS : want > MAX_ITERS ? MAX_ITERS : (long)ceil(want);
        }
        mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        if (o->gap_rows) {
            for (long it = 0; it < t.iters; it++) {   /* each call timed, the step between them apart */
                double t0 = timer_now();
                run_op(op, buf, n);
                double t1 = timer_now();
                sum += t1 - t0;
                step_run(&gap_step);
                gaps += timer_now() - t1;
            }
        } else {
            double t0 = timer_now();
            for (long it = 0; it < t.iters; it++) run_op(op, buf, n);
            sum = timer_now() - t0;
        }
    }
    for (; !o->back_to_back;) {
        mine = timer_now() - start;
        mpi_check(MPI_Allreduce(&mine, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        if (o->iters ? t.iters == o->iters
                     : t.iters == MAX_ITERS || (t.iters >= MIN_ITERS && elapsed >= o->target_ms * 1e-3)) break;
        double t0 = timer_now();
        run_op(op, buf, n);
        sum += timer_now() - t0;
        t.iters++;
    }
    mine = 1e6 * sum / (double)t.iters;
    double lo, hi, all;
    mpi_check(MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD), "MPI_Reduce");
    mpi_check(MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce");
    mpi_check(MPI_Reduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    t.min_us = lo; t.max_us = hi; t.avg_us = all / nranks;
    mine = 1e6 * gaps / (double)t.iters;   /* --gap-rows: the step's time, mean over the ranks */
    mpi_check(MPI_Reduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    t.gap_us = all / nranks;
    return t;
}

// ----------------------------------------------------------------------------
// output: the table (stdout, --dat), the CSV rows

/* the CSV's gap_us of a row: --gap-rows the step's measured time (rank 0 holds the mean),
 * else fixed (empty: OSU's way; 0: back to back) */
static const char *gap_of(const comm_options *o, const timing *t, char *fixed) {
    static char buf[32];
    if (!o->gap_rows) return fixed;
    snprintf(buf, sizeof buf, "%.0f", t->gap_us);
    return buf;
}

static void utc_now(char *buf, size_t len) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --csv: missing, empty, or headed by COMM_HEADER (else one line, exit 2: before any work) */
static int check_csv(const char *path, char *err, size_t errlen) {
    if (!path) return 0;
    /* (not "--csv": that would check for the trainers' header) */
    if (results_check_output(path, "--csv file", err, errlen)) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256] = "";
    int ok = !fgets(line, sizeof line, f) || !strcmp(strtok(line, "\r\n") ? line : "", COMM_HEADER);
    fclose(f);
    if (!ok) snprintf(err, errlen, "--csv %s: its header is not bench/comm's (%.40s...): move it away or give another file", path, line);
    return ok ? 0 : -1;
}

/* a growing text buffer (the table and the CSV rows are written once, at the end) */
typedef struct { char *s; size_t len, cap; } text;
static void __attribute__((format(printf, 2, 3))) text_add(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = (t->len + (size_t)n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) { fprintf(stderr, PROGRAM ": out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); exit(1); }
        t->s = s; t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static int write_text(const char *path, const char *mode, const text *t, char *err, size_t errlen) {
    FILE *f = fopen(path, mode);
    if (!f) { snprintf(err, errlen, "%s: cannot be written", path); return -1; }
    int ok = fwrite(t->s ? t->s : "", 1, t->len, f) == t->len;
    if (fclose(f) || !ok) { snprintf(err, errlen, "%s: write failed", path); return -1; }
    return 0;
}

// ----------------------------------------------------------------------------
// main

int main(int argc, char **argv) {
    program_name = PROGRAM;
    program_name = PROGRAM;
    mpi_start(&argc, &argv);
    comm_options o;
    parse_options(&o, argc, argv);
    char err[IDX_ERR_LEN] = "";
    agree_or_die(rank == 0 && (check_csv(o.csv, err, sizeof err) || results_check_output(o.dat, "--dat", err, sizeof err)), err, 2);
    hier_init(&hier);

    long sizes[MAX_SIZES], model_bytes[MAX_SIDES];
    int n_sizes = make_sizes(&o, sizes, model_bytes);
    long biggest = sizes[n_sizes - 1];
    if (biggest / 4 > INT_MAX) die_all("a message of %ld bytes is more floats than one MPI call can count", biggest);
    float *buf = alloc_floats(biggest / 4);
    agree_or_die(!buf, "out of memory", 1);

    /* the table's header: the columns of each op but the barrier (one number, in the header) */
    text table = { 0 }, csv = { 0 };
    int has_barrier = 0, cols[N_OPS], n_cols = 0;
    for (int k = 0; k < o.n_ops; k++) {
        if (o.ops[k] == OP_BARRIER) has_barrier = 1;
        else cols[n_cols++] = o.ops[k];
    }
    char stamp[32], gap[32] = "";   /* gap: the CSV's gap_us, empty for OSU's way */
    if (o.back_to_back) snprintf(gap, sizeof gap, "0");
    if (o.gap_rows) {
        int side = o.n_sides ? o.sides[0] : 28;
        agree_or_die(step_init(&gap_step, &o.net, side, o.gap_rows), "out of memory", 1);
        for (int k = 0; k < 3; k++) step_run(&gap_step);   /* warm caches, then time one */
        double t0 = timer_now(), mine;
        step_run(&gap_step);
        mine = timer_now() - t0;
        mpi_check(MPI_Allreduce(&mine, &step_seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    }
    utc_now(stamp, sizeof stamp);
    text_add(&table, "# bench/comm: transport %s, %d ranks, %d node%s, up to %d ranks per node%s, %s\n", o.transport,
             nranks, hier.nodes, hier.nodes == 1 ? "" : "s", hier.max_node_size,
             hier.pseudo ? " (pseudo-nodes: PARTRAIN_RANKS_PER_NODE)" : "", stamp);
    if (o.gap_rows)
        text_add(&table, "# calls back to back, one training step on %d rows between two calls (side %d, not timed: "
                 "about %.0f us)\n", o.gap_rows, o.n_sides ? o.sides[0] : 28, step_seconds * 1e6);
    else if (o.back_to_back)
        text_add(&table, "# calls back to back, nothing between them\n");
    else
        text_add(&table, "# calls OSU's way: the ranks meet before every timed call\n");
    text_add(&table, "# microseconds per call: each rank's average over the timed iterations; avg/min/max over the ranks\n");
    if (o.n_sides) {
        text_add(&table, "# the trainers' gradient bytes (MLP side*side-");
        for (int l = 0; l < o.net.n_hidden; l++) text_add(&table, "%d-", o.net.hidden[l]);
        text_add(&table, "%d):", IDX_CLASSES);
        for (int k = 0; k < o.n_sides; k++) text_add(&table, " side %d = %ld bytes%s", o.sides[k], model_bytes[k], k + 1 < o.n_sides ? "," : "\n");
    }
    if (n_cols) {
        text_add(&table, "# columns: 1 bytes");
        for (int c = 0; c < n_cols; c++) text_add(&table, " | %d-%d %s avg min max iterations", 2 + 4 * c, 5 + 4 * c, OP_NAME[cols[c]]);
        text_add(&table, "\n# bytes");
        for (int c = 0; c < n_cols; c++)
            text_add(&table, " %s_avg_us %s_min_us %s_max_us %s_iters", OP_NAME[cols[c]], OP_NAME[cols[c]], OP_NAME[cols[c]], OP_NAME[cols[c]]);
        text_add(&table, "\n");
    }
    if (rank == 0) { fputs(table.s, stdout); fflush(stdout); }
    size_t printed = table.len;

    double t_start = timer_now();
    if (has_barrier) {
        validate(OP_BARRIER, buf, 0);
        timing t = time_op(&o, OP_BARRIER, buf, 0);
        utc_now(stamp, sizeof stamp);
        text_add(&csv, "%s,barrier,%d,%d,%d,0,%ld,%.3f,%.3f,%.3f,%s,%s\n", o.transport, nranks, hier.nodes, hier.max_node_size,
                 t.iters, t.min_us, t.avg_us, t.max_us, stamp, gap_of(&o, &t, gap));
        text_add(&table, "# barrier: %.3f us avg, %.3f min, %.3f max over the ranks (%ld iterations)\n", t.avg_us, t.min_us,
                 t.max_us, t.iters);
    }
    for (int s = 0; s < n_sizes && n_cols; s++) {
        int n = (int)(sizes[s] / 4);
        text_add(&table, "%ld", sizes[s]);
        for (int c = 0; c < n_cols; c++) {
            validate(cols[c], buf, n);
            timing t = time_op(&o, cols[c], buf, n);
            utc_now(stamp, sizeof stamp);
            text_add(&csv, "%s,%s,%d,%d,%d,%ld,%ld,%.3f,%.3f,%.3f,%s,%s\n", o.transport, OP_NAME[cols[c]], nranks, hier.nodes,
                     hier.max_node_size, sizes[s], t.iters, t.min_us, t.avg_us, t.max_us, stamp, gap_of(&o, &t, gap));
            text_add(&table, " %.3f %.3f %.3f %ld", t.avg_us, t.min_us, t.max_us, t.iters);
        }
        text_add(&table, "\n");
        if (rank == 0) { fputs(table.s + printed, stdout); fflush(stdout); }
        printed = table.len;
    }
    double seconds = timer_now() - t_start;
    size_t verdict = table.len;   /* the last line: "# comm: ..." in --dat, "comm: ..." on stdout (NAS style) */
    text_add(&table, "# comm: %s | %d ranks (%d node%s, up to %d per node) | %d sizes x %d op%s%s | %.1f s | every sum verified%s%s\n",
             o.transport, nranks, hier.nodes, hier.nodes == 1 ? "" : "s", hier.max_node_size, n_cols ? n_sizes : 0, n_cols,
             n_cols == 1 ? "" : "s", has_barrier ? " + barrier" : "", seconds, o.csv ? " | csv " : "", o.csv ? o.csv : "");

    int status = 0;
    if (rank == 0) {
        fwrite(table.s + printed, 1, verdict - printed, stdout);
        fputs(table.s + verdict + 2, stdout);
        fflush(stdout);
        if (o.csv) {
            text rows = { 0 };
            FILE *f = fopen(o.csv, "r");
            int empty = !f || fgetc(f) == EOF;
            if (f) fclose(f);
            if (empty) text_add(&rows, "%s\n", COMM_HEADER);
            text_add(&rows, "%s", csv.s ? csv.s : "");
            if (write_text(o.csv, "a", &rows, err, sizeof err)) status = 1;
            free(rows.s);
        }
        if (!status && o.dat && write_text(o.dat, "w", &table, err, sizeof err)) status = 1;
        if (status) fprintf(stderr, PROGRAM ": %s\n", err);
    }
    hier_free(&hier);
    if (o.gap_rows) step_free(&gap_step);
    free(buf); free(table.s); free(csv.s);
    return status;
}
