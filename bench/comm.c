/*
 * bench/comm.c — the trainers' gradient exchanges timed the OSU way, over P MPI ranks.
 *
 * Ops (exactly the trainers' calls and arguments, in place, MPI_COMM_WORLD):
 *   allreduce     MPI_Allreduce(MPI_IN_PLACE, ..., MPI_SUM)
 *   reduce-bcast  MPI_Reduce to rank 0 (in place there) + MPI_Bcast from rank 0
 *   hierarchical  common/mpi_util.h's hier_allreduce(): reduce within each node, allreduce
 *                 among the node leaders, bcast within each node (PARTRAIN_RANKS_PER_NODE=K:
 *                 pseudo-nodes of K ranks, as in the trainers)
 *   iallreduce    MPI_Iallreduce + MPI_Wait (mpi/mpi --sync overlap's call, nothing to overlap)
 *   barrier       MPI_Barrier (0 bytes)
 * Sizes: powers of two from --min-bytes to --max-bytes, plus the trainers' gradient bytes
 * (the MLP of --hidden, padded per layer as the trainers lay it out) at --model-sides.
 * Timing, as OSU's osu_allreduce: per size, one validation call (each rank sends
 * rank + 1 + i % 3; the exact float sum is checked on every rank), then --warmup untimed
 * calls, then the timed calls, each preceded by an untimed MPI_Barrier and timed alone;
 * --iters of them below --large-bytes, --iters-large at or above. Each rank averages its
 * timed calls; rank 0 gets min/avg/max of those averages over the ranks. --repeats R runs
 * the warm-up and timed calls R times (R rows per size: the spread of a measurement).
 * Bandwidth, as nccl-tests: algbw = bytes / avg time; busbw = algbw x the op's factor:
 * allreduce, iallreduce, hierarchical 2(P-1)/P (each byte leaves and enters every rank
 * (P-1)/P times in reduce-scatter and again in allgather), reduce-bcast 2 (a reduce's 1 plus
 * a broadcast's 1, in the same time), barrier none. busbw compares rows across P.
 * Output (rank 0): a gnuplot table on stdout (`#` header lines; per size, of the median
 * repeat: avg min max iterations busbw per op) and a last line "comm: ... | every sum
 * verified"; --dat FILE the same; --csv FILE appends one row per (op, size, repeat)
 * (COMM_HEADER; docs/comm.md). Errors: every MPI call checked; bad flags: one line, exit 2;
 * a wrong sum: one line, exit 1.
 *
 * Compile: make bench/comm  (mpicc bench/comm.c common/options.c: no data or checkpoint code)
 * Run:     scripts/mpirun.sh 4 bench/comm --transport shm --csv results/comm.csv
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <mpi.h>

#include "maths.h"        /* grad_layout, alloc_floats: the trainers' gradient layout */
#include "options.h"    /* options_die, options_value, options_long; the trainers' --hidden */
#include "timer.h"

#define PROGRAM "comm"
#include "mpi_util.h"   /* rank, nranks, mpi_start, mpi_check, agree_or_die, hier_* */

#define COMM_HEADER "transport,op,ranks,nodes,ranks_per_node,bytes,repeat,warmup,iterations,min_us,avg_us,max_us,algbw_gbs,busbw_gbs,timestamp"
#define MAX_SIZES 64
#define MAX_SIDES 8
#define MAX_ITERS 1000000
#define MAX_REPEATS 1000

enum op_kind { OP_ALLREDUCE, OP_REDUCE_BCAST, OP_HIERARCHICAL, OP_IALLREDUCE, OP_BARRIER, N_OPS };
static const char *const OP_NAME[N_OPS] = { "allreduce", "reduce-bcast", "hierarchical", "iallreduce", "barrier" };

/* nccl-tests' bus-bandwidth factor of each op at P ranks (0: no bandwidth) */
static double busbw_factor(int op, int p) {
    switch (op) {
    case OP_REDUCE_BCAST: return 2.0;
    case OP_BARRIER: return 0.0;
    default: return 2.0 * (p - 1) / p;
    }
}

typedef struct {
    const char *transport;              /* --transport LABEL [shm] */
    int ops[N_OPS], n_ops;              /* --ops LIST, in the order given */
    long min_bytes, max_bytes;          /* --min-bytes, --max-bytes */
    int sides[MAX_SIDES], n_sides;      /* --model-sides LIST (none: 0 sides) */
    train_options net;                  /* --hidden A,B,... (the trainers' default) */
    long iters, iters_large, warmup;    /* --iters, --iters-large, --warmup */
    long large_bytes;                   /* --large-bytes: from this size on, --iters-large */
    long repeats;                       /* --repeats */
    const char *csv, *dat;              /* --csv FILE, --dat FILE (NULL: none) */
} comm_options;

static void usage(void) {
    printf("Usage: scripts/mpirun.sh P bench/comm [options]   (bench/comm.sh runs a list of P)\n"
           "Times the trainers' gradient exchanges the OSU way: an untimed barrier before each timed call;\n"
           "min/avg/max over the ranks of each rank's average; nccl-tests' algbw and busbw.\n\n"
           "  --transport LABEL   the CSV's transport column: shm, tcp, tcp-1gbit, ... [shm]\n"
           "  --ops LIST          of allreduce, reduce-bcast, hierarchical, iallreduce, barrier [all five]\n"
           "  --min-bytes N       smallest message, a multiple of 4 [4]\n"
           "  --max-bytes N       largest power-of-two message (0: only the --model-sides sizes) [4194304]\n"
           "  --model-sides LIST  also the trainers' gradient bytes at these image sides, or none [28,57,112]\n"
           "  --hidden A,B,...    the trainers' hidden layers for those sizes [256,128]\n"
           "  --iters N           timed calls per size below --large-bytes [100]\n"
           "  --iters-large N     timed calls per size from --large-bytes on [20]\n"
           "  --large-bytes N     where the large sizes start [1048576]\n"
           "  --warmup N          untimed calls before the timed ones [20]\n"
           "  --repeats R         warm-up + timed calls R times per size, one row each [1]\n"
           "  --csv FILE          append one row per (op, size, repeat) (header: " COMM_HEADER ") [none]\n"
           "  --dat FILE          also write stdout's table (gnuplot columns) to FILE [none]\n"
           "  --help              this text\n"
           "Environment: PARTRAIN_RANKS_PER_NODE=K  pseudo-nodes of K consecutive ranks (tests, one machine).\n"
           "Exit status: 0 done and every sum verified, 1 a wrong sum or a failed MPI call, 2 bad flags.\n");
}

/* "a,b,c" of ints lo..hi into v (at most max); 0, or -1 on a bad list */
static int parse_ints(const char *s, int *v, int max, int *n, long lo, long hi) {
    *n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long x = strtol(s, &end, 10);
        if (errno || end == s || x < lo || x > hi || *n == max || (*end && *end != ',') || (*end == ',' && !end[1])) return -1;
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
    o->iters = 100; o->iters_large = 20; o->large_bytes = 1L << 20; o->warmup = 20; o->repeats = 1;
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
            int seen[N_OPS] = { 0 };
            o->n_ops = 0;
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
        } else if (!strcmp(a, "--iters-large")) {
            o->iters_large = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, MAX_ITERS);
        } else if (!strcmp(a, "--large-bytes")) {
            o->large_bytes = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 4, 1L << 30);
        } else if (!strcmp(a, "--warmup")) {
            o->warmup = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 0, MAX_ITERS);
        } else if (!strcmp(a, "--repeats")) {
            o->repeats = options_long(PROGRAM, a, options_value(PROGRAM, argc, argv, &i), 1, MAX_REPEATS);
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

/* the floats the trainers exchange per step for o's MLP at `features` inputs: their
 * gradient layout (common/maths.h's grad_layout) */
static long gradient_floats(const train_options *o, long features) {
    int size[OPT_MAX_HIDDEN + 2];
    long gw[OPT_MAX_HIDDEN + 2], gb[OPT_MAX_HIDDEN + 2];
    size[0] = (int)features;
    for (int l = 1; l <= o->n_hidden; l++) size[l] = o->hidden[l - 1];
    size[o->n_hidden + 1] = IDX_CLASSES;
    return grad_layout(size, o->n_hidden + 1, gw, gb);
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
    for (long i = 0; i < n; i++) buf[i] = (float)(rank + 1 + i % 3);
    run_op(op, buf, n);
    long bad = -1;
    for (long i = 0; i < n && bad < 0; i++)
        if (buf[i] != (float)((long)nranks * (nranks + 1) / 2 + (long)nranks * (i % 3))) bad = i;
    char msg[256];
    snprintf(msg, sizeof msg, "%s of %ld bytes: rank %d holds %g at float %ld, expected %ld: the sum is wrong",
             OP_NAME[op], 4L * n, rank, bad >= 0 ? (double)buf[bad] : 0.0, bad,
             (long)nranks * (nranks + 1) / 2 + (long)nranks * (bad >= 0 ? bad % 3 : 0));
    agree_or_die(bad >= 0, msg, 1);
}

typedef struct { long iters; double min_us, avg_us, max_us; } timing;

/* OSU's loop: warm-up calls (dropped), then `iters` calls, each after an untimed barrier and
 * timed alone; this rank's average, then min/avg/max over the ranks at rank 0 */
static timing time_op(long warmup, long iters, int op, float *buf, int n) {
    memset(buf, 0, sizeof(float) * (size_t)n);   /* zeros: the in-place sums stay zero */
    double sum = 0.0;
    for (long it = 0; it < warmup + iters; it++) {
        mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        double t0 = timer_now();
        run_op(op, buf, n);
        if (it >= warmup) sum += timer_now() - t0;
    }
    double mine = 1e6 * sum / (double)iters, lo = 0, hi = 0, all = 0;
    mpi_check(MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD), "MPI_Reduce");
    mpi_check(MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce");
    mpi_check(MPI_Reduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    return (timing){ iters, lo, all / nranks, hi };
}

// ----------------------------------------------------------------------------
// output

static void utc_now(char *buf, size_t len) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --csv: absent, empty, or a regular file headed by COMM_HEADER; --dat: absent or a regular
 * file (else one line, exit 2, before any work) */
static int check_outputs(const comm_options *o, char *err, size_t len) {
    struct stat st;
    if (o->csv && !stat(o->csv, &st)) {
        if (!S_ISREG(st.st_mode)) { snprintf(err, len, "--csv %s: not a regular file", o->csv); return -1; }
        FILE *f = fopen(o->csv, "r");
        char line[512] = "";
        if (!f) { snprintf(err, len, "--csv %s: cannot be read", o->csv); return -1; }
        int ok = !fgets(line, sizeof line, f) || !strcmp(strtok(line, "\r\n") ? line : "", COMM_HEADER);
        fclose(f);
        if (!ok) { snprintf(err, len, "--csv %s: its header is not bench/comm's (%.40s...): move it away or give another file", o->csv, line); return -1; }
    }
    if (o->dat && !stat(o->dat, &st) && !S_ISREG(st.st_mode)) { snprintf(err, len, "--dat %s: not a regular file", o->dat); return -1; }
    return 0;
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

static int write_text(const char *path, const char *mode, const text *t, char *err, size_t len) {
    FILE *f = fopen(path, mode);
    if (!f) { snprintf(err, len, "%s: cannot be written", path); return -1; }
    int ok = fwrite(t->s ? t->s : "", 1, t->len, f) == t->len;
    if (fclose(f) || !ok) { snprintf(err, len, "%s: write failed", path); return -1; }
    return 0;
}

static int cmp_avg(const void *a, const void *b) {
    double x = ((const timing *)a)->avg_us, y = ((const timing *)b)->avg_us;
    return (x > y) - (x < y);
}

// ----------------------------------------------------------------------------
// main

int main(int argc, char **argv) {
    program_name = PROGRAM;
    program_name = PROGRAM;
    mpi_start(&argc, &argv);
    comm_options o;
    parse_options(&o, argc, argv);
    char err[512] = "";
    agree_or_die(rank == 0 && check_outputs(&o, err, sizeof err), err, 2);
    hier_init(&hier);

    long sizes[MAX_SIZES], model_bytes[MAX_SIDES];
    int n_sizes = make_sizes(&o, sizes, model_bytes);
    if (sizes[n_sizes - 1] / 4 > INT_MAX) die_all("a message of %ld bytes is more floats than one MPI call can count", sizes[n_sizes - 1]);
    float *buf = alloc_floats(sizes[n_sizes - 1] / 4);
    timing *reps = malloc(sizeof(timing) * (size_t)o.repeats);
    agree_or_die(!buf || !reps, "out of memory", 1);

    text table = { 0 }, csv = { 0 };
    char stamp[32];
    utc_now(stamp, sizeof stamp);
    text_add(&table, "# bench/comm: transport %s, %d ranks, %d node%s, up to %d ranks per node%s, %s\n", o.transport,
             nranks, hier.nodes, hier.nodes == 1 ? "" : "s", hier.max_node_size,
             hier.pseudo ? " (pseudo-nodes: PARTRAIN_RANKS_PER_NODE)" : "", stamp);
    text_add(&table, "# OSU's way: %ld warm-up calls, then %ld timed calls below %ld bytes and %ld from there on, each after "
             "an untimed MPI_Barrier; %ld repeat%s per size (the table: the median repeat by avg)\n",
             o.warmup, o.iters, o.large_bytes, o.iters_large, o.repeats, o.repeats == 1 ? "" : "s");
    text_add(&table, "# microseconds per call: each rank's average; avg/min/max over the ranks; busbw (GB/s) as nccl-tests\n");
    if (o.n_sides) {
        text_add(&table, "# the trainers' gradient bytes (MLP side*side-");
        for (int l = 0; l < o.net.n_hidden; l++) text_add(&table, "%d-", o.net.hidden[l]);
        text_add(&table, "%d):", IDX_CLASSES);
        for (int k = 0; k < o.n_sides; k++) text_add(&table, " side %d = %ld bytes%s", o.sides[k], model_bytes[k], k + 1 < o.n_sides ? "," : "\n");
    }
    int has_barrier = 0, cols[N_OPS], n_cols = 0;
    for (int k = 0; k < o.n_ops; k++) {
        if (o.ops[k] == OP_BARRIER) has_barrier = 1;
        else cols[n_cols++] = o.ops[k];
    }
    if (n_cols) {
        text_add(&table, "# bytes");
        for (int c = 0; c < n_cols; c++)
            text_add(&table, " %1$s_avg_us %1$s_min_us %1$s_max_us %1$s_iters %1$s_busbw_gbs", OP_NAME[cols[c]]);
        text_add(&table, "\n");
    }
    if (rank == 0) { fputs(table.s, stdout); fflush(stdout); }
    size_t printed = table.len;

    double t_start = timer_now();
    for (int s = has_barrier ? -1 : 0; s < (n_cols ? n_sizes : 0); s++) {
        long bytes = s < 0 ? 0 : sizes[s];
        int n = (int)(bytes / 4);
        long iters = bytes < o.large_bytes ? o.iters : o.iters_large;
        if (s >= 0) text_add(&table, "%ld", bytes);
        for (int c = 0; c < (s < 0 ? 1 : n_cols); c++) {
            int op = s < 0 ? OP_BARRIER : cols[c];
            validate(op, buf, n);
            for (long r = 0; r < o.repeats; r++) {
                reps[r] = time_op(o.warmup, iters, op, buf, n);
                double algbw = reps[r].avg_us > 0 ? bytes / reps[r].avg_us / 1e3 : 0.0;
                utc_now(stamp, sizeof stamp);
                text_add(&csv, "%s,%s,%d,%d,%d,%ld,%ld,%ld,%ld,%.3f,%.3f,%.3f,%.4f,%.4f,%s\n", o.transport, OP_NAME[op], nranks,
                         hier.nodes, hier.max_node_size, bytes, r + 1, o.warmup, iters, reps[r].min_us, reps[r].avg_us,
                         reps[r].max_us, algbw, algbw * busbw_factor(op, nranks), stamp);
            }
            qsort(reps, (size_t)o.repeats, sizeof *reps, cmp_avg);
            timing m = reps[(o.repeats - 1) / 2];
            if (s < 0)
                text_add(&table, "# barrier: %.3f us avg, %.3f min, %.3f max over the ranks (%ld iterations)\n", m.avg_us,
                         m.min_us, m.max_us, m.iters);
            else
                text_add(&table, " %.3f %.3f %.3f %ld %.4f", m.avg_us, m.min_us, m.max_us, m.iters,
                         m.avg_us > 0 ? bytes / m.avg_us / 1e3 * busbw_factor(op, nranks) : 0.0);
        }
        if (s >= 0) text_add(&table, "\n");
        if (rank == 0) { fputs(table.s + printed, stdout); fflush(stdout); }
        printed = table.len;
    }
    double seconds = timer_now() - t_start;
    size_t verdict = table.len;   /* the last line: "# comm: ..." in --dat, "comm: ..." on stdout (NAS style) */
    text_add(&table, "# comm: %s | %d ranks (%d node%s, up to %d per node) | %d sizes x %d op%s%s x %ld repeat%s | %.1f s | every sum verified%s%s\n",
             o.transport, nranks, hier.nodes, hier.nodes == 1 ? "" : "s", hier.max_node_size, n_cols ? n_sizes : 0, n_cols,
             n_cols == 1 ? "" : "s", has_barrier ? " + barrier" : "", o.repeats, o.repeats == 1 ? "" : "s", seconds,
             o.csv ? " | csv " : "", o.csv ? o.csv : "");

    int status = 0;
    if (rank == 0) {
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
    free(buf); free(reps); free(table.s); free(csv.s);
    return status;
}
