/*
 * serial/serial.c — the reference trainer of partrain: one core, no parallelism.
 *
 * Strategy: none. A multi-layer perceptron (default 784-256-128-10, ReLU, softmax +
 * cross-entropy) trained with plain mini-batch SGD. Every speedup in the suite is
 * measured against this program, so it is written to be fast on one core:
 *   - a mini-batch is a matrix (batch x features) and every layer is a matrix product,
 *     run by common/gemm.h's register-blocked kernel (docs/kernel.md);
 *   - bias + activation are fused into the forward product's epilogue, the activation
 *     derivative into the backward product's, and the SGD update into the weight-
 *     gradient product (W += -lr/B * A^T dZ): no gradient buffer, no extra pass.
 * Communication: none. Threads: one. Deterministic: the same seed gives bit-identical
 * results from run to run (fixed summation order everywhere).
 *
 * Every other trainer computes this maths with the same kernel and helpers (common/);
 * tests/ checks that they reproduce serial's loss curve for the same seed.
 *
 * Compile: make serial   (cc -std=c11 -O3 -march=native -Icommon serial/serial.c common/{idx,options,results,checkpoint}.c -lz -lm)
 * Run:     serial/serial --data data/fashion --epochs 5 --batch 64
 *          serial/serial --gemm blas ...   (OpenBLAS single-threaded, when built with it)
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "data.h"
#include "gemm.h"       /* matmul(), transpose(): the one matrix kernel */
#include "idx.h"
#include "maths.h"
#include "options.h"
#include "prng.h"
#include "results.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"
#include "trace.h"     /* --trace: TRACE(cat, name) marks */


#define PROGRAM "serial"
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */

// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

/* the variants: X(id, CSV name, --gemm value, help); blas last (absent without OpenBLAS) */
#define GEMM_MODES(X) \
    X(GEMM_OWN,  "own-gemm", "own",  "own register-blocked kernel (common/gemm.h)") \
    X(GEMM_BLAS, "blas",     "blas", "single-threaded OpenBLAS cblas_sgemm, epilogue as a second pass")
enum gemm_kind { GEMM_MODES(VARIANT_ENUM) N_GEMM };
static const variant GEMM[] = { GEMM_MODES(VARIANT_ROW) };
#ifdef HAVE_CBLAS
#define N_GEMM_BUILT N_GEMM
#else
#define N_GEMM_BUILT GEMM_BLAS
#endif

typedef struct {
    train_options common;
    int gemm;                   /* --gemm own|blas */
} serial_options;

static void usage(void) {
    printf("Usage: serial/serial [options]\n"
           "Trains an MLP on MNIST-style IDX data on one core (the reference trainer).\n\n");
    options_usage_common();
    printf("Serial:\n"
           "  --gemm own|blas       matrix products [own]%s:\n",
#ifdef HAVE_CBLAS
           ""
#else
           " (blas not built in: OpenBLAS was missing)"
#endif
    );
    variant_usage(GEMM, N_GEMM);
    options_usage_exit_status();
}

static void parse_options(serial_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->gemm = GEMM_OWN;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(); exit(0); }
        if (!strcmp(argv[i], "--list-variants")) { variant_list("--gemm", GEMM, N_GEMM_BUILT); exit(0); }
        if (!strcmp(argv[i], "--gemm")) {
            o->gemm = variant_parse(PROGRAM, "--gemm", options_value(PROGRAM, argc, argv, &i), GEMM, N_GEMM);
#ifndef HAVE_CBLAS
            if (o->gemm == GEMM_BLAS) options_die(PROGRAM, "--gemm blas: this build has no OpenBLAS (install libopenblas-dev and run make)");
#endif
            continue;
        }
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) continue;
        options_die(PROGRAM, "unknown option '%s'", argv[i]);
    }
}

// ----------------------------------------------------------------------------
// model: one contiguous parameter buffer with per-layer views
//
// Layer l (1..L) maps size[l-1] inputs to size[l] outputs: W[l] is size[l-1] x size[l]
// row-major, its rows w_ld(size[l]) floats apart (common/maths.h: a padded leading
// dimension), so the forward product is act[l-1] . W[l]; b[l] has size[l] entries.

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params, with padding that aligns each view */
    float *params;                /* all W and b, layer by layer: W1 b1 W2 b2 ... */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    /* work buffers, sized for max_rows samples */
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[0] = input batch, act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of hidden layer l */
    float *wt;                    /* transposed weights for the backward product */
    float *db;                    /* bias gradient of one layer */
} mlp;

static int mlp_init(mlp *m, int inputs, const train_options *o, int max_rows) {
    memset(m, 0, sizeof *m);
    m->n_layers = o->n_hidden + 1;
    m->size[0] = inputs;
    for (int l = 1; l <= o->n_hidden; l++) m->size[l] = o->hidden[l - 1];
    m->size[m->n_layers] = IDX_CLASSES;
    m->activation = o->activation;
    m->max_rows = max_rows;
    long widest = 0;
    int widest_layer = 0;
    for (int l = 1; l <= m->n_layers; l++) {
        if (m->size[l] > widest_layer) widest_layer = m->size[l];
        m->n_params += (long)m->size[l - 1] * m->size[l] + m->size[l];
        m->params_alloc += PAD16((long)m->size[l - 1] * w_ld(m->size[l])) + PAD16(m->size[l]);
        long w = (long)m->size[l - 1] * m->size[l];
        if (w > widest) widest = w;
    }
    m->params = alloc_floats(m->params_alloc);
    m->wt = alloc_floats(widest);
    m->db = alloc_floats(widest_layer);
    if (!m->params || !m->wt || !m->db) return -1;
    memset(m->params, 0, sizeof(float) * (size_t)m->params_alloc);   /* padding stays zero */
    float *p = m->params;
    for (int l = 1; l <= m->n_layers; l++) {
        int in = m->size[l - 1], out = m->size[l], ld = w_ld(out);
        m->W[l] = p; p += PAD16((long)in * ld);
        m->b[l] = p; p += PAD16(out);
        prng_init_dense_ld(m->W[l], ld, in, out, l, l == m->n_layers, o->seed);
        memset(m->b[l], 0, sizeof(float) * (size_t)m->size[l]);
    }
    for (int l = 0; l <= m->n_layers; l++) {
        m->act[l] = alloc_floats((long)max_rows * m->size[l]);
        m->delta[l] = alloc_floats((long)max_rows * m->size[l]);
        if (!m->act[l] || !m->delta[l]) return -1;
    }
    return 0;
}

static void mlp_free(mlp *m) {
    free(m->params); free(m->wt); free(m->db);
    for (int l = 0; l <= m->n_layers; l++) { free(m->act[l]); free(m->delta[l]); }
}

// ----------------------------------------------------------------------------
// forward

/* act[l] = activation(act[l-1] . W[l] + b[l]); the last layer leaves logits. */
static void dense_forward(mlp *m, int l, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    int hidden = l < m->n_layers;
    epilogue e = EPI_PLAIN;
    e.bias = m->b[l];
    if (hidden && m->activation != ACT_SIGMOID) e.act = m->activation;
    matmul(rows, out, in, m->act[l - 1], in, 1, m->W[l], w_ld(out), m->act[l], out, &e);
    if (hidden && m->activation == ACT_SIGMOID) sigmoid_inplace(m->act[l], (long)rows * out);
}

static void mlp_forward(mlp *m, int rows) {
    for (int l = 1; l <= m->n_layers; l++) TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, l, rows);
}

// ----------------------------------------------------------------------------
// backward + update (fused: the weight gradient product adds -lr/B * A^T dZ into W)

/* Layer l with dZ (dL/d pre-activation) in dz: first the gradient for the layer below
 * (needs the old W), then W and b updated in place. */
static void dense_backward_update(mlp *m, int l, const float *dz, int rows, float scale) {
    int in = m->size[l - 1], out = m->size[l];
    if (l > 1) {
        /* delta[l-1] = (dz . W^T) * act'(act[l-1]) */
        transpose_ld(m->W[l], w_ld(out), in, out, m->wt, in);
        epilogue e = EPI_PLAIN;
        e.deriv = m->act[l - 1];
        e.deriv_act = m->activation;
        matmul(rows, in, out, dz, out, 1, m->wt, in, m->delta[l - 1], in, &e);
    }
    /* W += scale * act[l-1]^T . dz   (scale = -lr / rows) */
    epilogue u = EPI_PLAIN;
    u.alpha = scale;
    u.accumulate = 1;
    matmul(in, out, rows, m->act[l - 1], 1, in, dz, out, m->W[l], w_ld(out), &u);
    /* b += scale * column sums of dz */
    float *restrict db = m->db;
    for (int j = 0; j < out; j++) db[j] = 0.0f;
    for (int i = 0; i < rows; i++) {
        const float *restrict d = dz + (long)i * out;
        for (int j = 0; j < out; j++) db[j] += d[j];
    }
    float *restrict b = m->b[l];
    for (int j = 0; j < out; j++) b[j] = fmaf(scale, db[j], b[j]);
}

/* One SGD step on the rows already in act[0]; returns the summed loss. */
static double train_step(mlp *m, const unsigned char *y, int rows, float lr, long *correct) {
    int L = m->n_layers;
    mlp_forward(m, rows);
    double loss;
    TRACE(TRACE_COMPUTE, "loss") loss = softmax_xent(m->act[L], y, rows, m->size[L], correct);
    float scale = -lr / (float)rows;
    TRACE(TRACE_COMPUTE, trace_layer("backward", L)) dense_backward_update(m, L, m->act[L], rows, scale);
    for (int l = L - 1; l >= 1; l--)
        TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_backward_update(m, l, m->delta[l], rows, scale);
    return loss;
}

// ----------------------------------------------------------------------------
// data movement and evaluation

/* Percent of test samples classified correctly; predictions optional. */
static double evaluate(mlp *m, const dataset *d, unsigned char *predictions) {
    int L = m->n_layers, classes = m->size[L];
    long correct = 0;
    for (long start = 0; start < d->n; start += m->max_rows) {
        int rows = (int)(d->n - start < m->max_rows ? d->n - start : m->max_rows);
        dataset_rows(d, NULL, start, rows, m->act[0]);
        mlp_forward(m, rows);
        correct += count_correct(m->act[L], rows, classes, d->y + start, predictions ? predictions + start : NULL);
    }
    return 100.0 * (double)correct / (double)d->n;
}

// ----------------------------------------------------------------------------
// main

#ifndef TESTING
int main(int argc, char **argv) {
    serial_options so;
    parse_options(&so, argc, argv);
    train_options *o = &so.common;
#ifdef HAVE_CBLAS
    gemm_use_blas = so.gemm == GEMM_BLAS;
    openblas_set_num_threads(1);
#endif
    char err[IDX_ERR_LEN];

    /* outputs: checked before the work, not after it */
    if (results_check_output(o->csv, "--csv", err, sizeof err) || checkpoint_check_flags(o, err, sizeof err) ||
        schedule_check_flags(o, err, sizeof err) || trace_check_output(o, NULL, err, sizeof err))
        options_die(PROGRAM, "%s", err);
    if (trace_open(o, 1, 0, 4 * MAX_LAYERS, err, sizeof err)) { fprintf(stderr, PROGRAM ": %s\n", err); return 2; }

    /* data */
    dataset train, test;
    data_plan plan;
    plan_data(PROGRAM, o, &plan);
    long rows = o->batch > EVAL_BATCH ? o->batch : EVAL_BATCH;
    char msg[256];
    if (mem_short(mem_dataset_bytes(plan.train_n + plan.test_n, plan.side, plan.file_side) +
                  dense_model_bytes(o, plan.side * plan.side, rows, 0) +
                  gemm_pack_bytes_dense(o, plan.side * plan.side, rows), 1, "data and model", msg, sizeof msg))
        { fprintf(stderr, PROGRAM ": %s\n", msg); return 2; }
    load_data(PROGRAM, o, &plan, &train, &test);
    long train_n = train.n, test_n = test.n;

    /* model */
    mlp m;
    int max_rows = (int)(o->batch > EVAL_BATCH ? o->batch : EVAL_BATCH);
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)train_n);
    unsigned char *batch_y = malloc((size_t)max_rows);
    unsigned char *pred = malloc((size_t)test_n);
    double *loss_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *acc_curve = malloc(sizeof(double) * (size_t)o->epochs);
    double *epoch_sec = malloc(sizeof(double) * (size_t)o->epochs);
    if (mlp_init(&m, train.features, o, max_rows) || !order || !batch_y || !pred || !loss_curve || !acc_curve || !epoch_sec) {
        fprintf(stderr, PROGRAM ": out of memory\n");
        return 1;
    }
    const char *variant = GEMM[so.gemm].name;

    /* checkpoint: --resume goes on after the epochs the file holds */
    checkpoint ck;
    checkpoint_init(&ck, PROGRAM, variant, 1, 1, o, train.side, train_n, test_n, NULL, m.params, m.params_alloc,
                    (double *[]){ loss_curve, acc_curve, epoch_sec }, 3);
    if (o->resume && (checkpoint_load(o->resume, &ck, o->epochs, err, sizeof err) ||
                      target_resumed(o, acc_curve, ck.epochs_done, err, sizeof err)))
        { fprintf(stderr, PROGRAM ": %s\n", err); return 2; }
    printf("serial: %s MLP %d", options_activation_name(o->activation), m.size[0]);
    for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
    printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld, lr %g, seed %llu, gemm %s\n",
           m.n_params, o->data_dir, train_n, test_n, train.side, train.side, o->batch, o->lr,
           (unsigned long long)o->seed, variant);
    if (o->resume) printf("serial: resumed from %s after epoch %d\n", o->resume, ck.epochs_done);

    /* training */
    double t_start = timer_now() - ck.seconds;
    trace_start();
    for (int epoch = ck.epochs_done + 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        double t0 = timer_now(), loss_sum = 0.0;
        long correct = 0;
        for (long start = 0; start < train_n; start += o->batch) {
            double t_step = trace_step_begin(epoch);
            int rows = (int)(train_n - start < o->batch ? train_n - start : o->batch);
            TRACE(TRACE_DATA, "batch") gather_batch(&train, order + start, rows, m.act[0], batch_y);
            long next = start + o->batch;     /* the next batch's rows, fetched while this step computes */
            if (next < train_n)
                TRACE(TRACE_DATA, "prefetch") prefetch_batch(&train, order + next,
                                                             (int)(train_n - next < o->batch ? train_n - next : o->batch));
            loss_sum += train_step(&m, batch_y, rows, lr_at(o, epoch, start / o->batch, steps_per_epoch(o, train_n)),
                                   &correct);
            trace_step_end(t_step);
        }
        epoch_sec[epoch - 1] = timer_now() - t0;
        loss_curve[epoch - 1] = loss_sum / (double)train_n;
        trace_epoch_level(epoch);
        TRACE(TRACE_EVAL, "eval") acc_curve[epoch - 1] = evaluate(&m, &test, pred);
        if (results_epoch(PROGRAM, 1, o->quiet, epoch, o->epochs, loss_curve[epoch - 1],
                          100.0 * (double)correct / (double)train_n, acc_curve[epoch - 1], epoch_sec[epoch - 1],
                          train_n, NULL))
            return 1;
        int stop = target_reached(o, epoch, acc_curve[epoch - 1]);
        TRACE_IF(checkpoint_due(o, epoch), TRACE_CHECKPOINT, "checkpoint")
            t_start += checkpoint_after_epoch(&ck, PROGRAM, o, epoch, timer_now() - t_start);
        if (stop) break;
    }
    double total = timer_now() - t_start;

    /* results */
    result_row row;
    results_fill(&row, PROGRAM, variant, 1, 1, o, train.side, train_n, test_n, dense_flops_per_sample(m.size, m.n_layers),
                 total, loss_curve, acc_curve, epoch_sec);
    if (o->predict) {
        if (ck.epochs_done == o->epochs) evaluate(&m, &test, pred);   /* resumed with nothing left to train */
        print_predictions(&test, pred, o->predict);
    }
    if (results_finish(&row, o->csv, NULL, NULL, err, sizeof err) || trace_finish(PROGRAM, variant, o, err, sizeof err)) {
        fprintf(stderr, PROGRAM ": %s\n", err);
        return 1;
    }

    mlp_free(&m);
    dataset_free(&train); dataset_free(&test);
    free(order); free(batch_y); free(pred); free(loss_curve); free(acc_curve); free(epoch_sec);
    return 0;
}
#endif
