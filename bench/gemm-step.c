/*
 * bench/gemm-step.c — the matrix products of one training step of the default MLP, each
 * timed alone through common/gemm.h: what the kernel path this build runs (AVX-512, AVX2
 * or the plain loops) gets on this CPU, product by product, beside bench/fma-peak.c's
 * ceiling. Serial's epoch adds the gather, softmax, bias sums and transposes to these.
 *
 * The eight products of a step with inputs I, hidden 256,128, 10 classes and batch B:
 *   fwd1..3   act[l] = relu(act[l-1] . W[l] + b[l])       (M = B, K = inputs of layer l)
 *   bwd3, 2   dz[l-1] = (dz[l] . W[l]^T) * relu'(act)      (W^T row-major, as serial keeps it)
 *   upd3..1   W[l] += -lr/B * act[l-1]^T . dz[l]           (the fused update, K = B)
 * With --panels, W is stored column panel by column panel (NR columns each, row-major
 * within: the layout openmp --accum loop and model keep), and the forward and the update
 * run one product per panel: what serial would gain from that layout (docs/NOTES.md 50).
 * Row-major W's rows lie w_ld(out) floats apart, as in the trainers (common/maths.h: 16
 * floats more when out is a multiple of 32, so that a column panel's rows do not fall in
 * the same few cache sets, docs/NOTES.md 51); with --pad F, out + F apart (--pad 0: the
 * unpadded rows the trainers had before).
 * After the step's line, the transposes of W2 and W3 that bwd2 and bwd3 read (wt2, wt3:
 * the copies the trainers make; with --panels too, of a row-major W).
 * Each product runs REPS times per timing; the best timing over the rounds is kept (the
 * VM's slow stretches only lengthen timings). Prints one line per product (microseconds,
 * GFLOP/s counted as 2 FLOP per multiply-add) and the step's total. One thread: pin it
 * (taskset -c 0) to time one core.
 *
 *   make bench/gemm-step && taskset -c 0 bench/gemm-step                 # batch 64, 28x28
 *   taskset -c 0 bench/gemm-step --batch 64 --inputs 12544 --rounds 5    # image size 112
 *   taskset -c 0 bench/gemm-step --panels                                # W by column panels
 * Exit 2 on bad input (one line), 1 when out of memory.
 */
#define _GNU_SOURCE
#include <string.h>

#include "cpu_pair.h"   /* now(), parse_long() */
#include "gemm.h"
#include "maths.h"      /* w_ld(): the trainers' row stride of W */

enum { N_PRODUCTS = 8 };
static const char *const NAMES[N_PRODUCTS] = { "fwd1", "fwd2", "fwd3", "bwd3", "bwd2", "upd3", "upd2", "upd1" };

/* the floats between two rows of a row-major W with out columns */
static long row_ld(int out, long pad) { return pad < 0 ? w_ld(out) : out + pad; }

static float *filled(long n) {
    float *p = aligned_alloc(64, (size_t)((n * (long)sizeof(float) + 63) / 64 * 64));
    if (!p) { fprintf(stderr, "gemm-step: out of memory\n"); exit(1); }
    for (long i = 0; i < n; i++) p[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    return p;
}

int main(int argc, char **argv) {
    long batch = 64, inputs = 784, rounds = 15;
    int panels = 0;
    long pad = -1;   /* -1: w_ld(out), the trainers' */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--panels")) { panels = 1; continue; }
        long *to = !strcmp(argv[i], "--batch") ? &batch : !strcmp(argv[i], "--inputs") ? &inputs
                 : !strcmp(argv[i], "--rounds") ? &rounds : !strcmp(argv[i], "--pad") ? &pad : NULL;
        if (!strcmp(argv[i], "--help")) {
            printf("usage: gemm-step [--batch B (1..65536, 64)] [--inputs I (1..1048576, 784)] [--rounds R (1..1000, 15)]"
                   " [--panels | --pad F (0..64 floats; default: as the trainers, common/maths.h w_ld)]\n");
            return 0;
        }
        if (!to) { fprintf(stderr, "gemm-step: unexpected argument '%s' (--help)\n", argv[i]); return 2; }
        long lo = to == &pad ? 0 : 1, hi = to == &batch ? 65536 : to == &inputs ? 1048576 : to == &pad ? 64 : 1000;
        if (i + 1 >= argc || parse_long(argv[i + 1], lo, hi, to)) {
            fprintf(stderr, "gemm-step: %s needs an integer in %ld..%ld\n", argv[i], lo, hi);
            return 2;
        }
        i++;
    }
    if (panels && pad >= 0) { fprintf(stderr, "gemm-step: --pad is for row-major W, not with --panels\n"); return 2; }
    int B = (int)batch, size[4] = { (int)inputs, 256, 128, 10 };
    float *x = filled((long)B * size[0]), *W[4], *WT[4], *bias[4], *act[4], *dz[4];
    for (int l = 1; l <= 3; l++) {
        W[l] = filled((long)size[l - 1] * row_ld(size[l], pad));
        WT[l] = filled((long)size[l - 1] * size[l]);
        bias[l] = filled(size[l]);
        act[l] = filled((long)B * size[l]);
        dz[l] = filled((long)B * size[l]);
    }
    act[0] = x;
    double flops[N_PRODUCTS], best[N_PRODUCTS];
    for (int p = 0; p < N_PRODUCTS; p++) best[p] = 1e30;
    /* REPS: about 100 MFLOP per timing, at least 3 */
    double step_flops = 0;
    for (int l = 1; l <= 3; l++) step_flops += 6.0 * B * size[l - 1] * size[l];
    int reps = step_flops > 1e8 / 3 ? 3 : (int)(1e8 / step_flops);
    for (long r = 0; r < rounds; r++)
        for (int p = 0; p < N_PRODUCTS; p++) {
            double t0 = now();
            for (int k = 0; k < reps; k++) {
                epilogue e = EPI_PLAIN;
                if (p <= 2) {                 /* forward of layer l */
                    int l = p + 1;
                    e.bias = bias[l];
                    e.act = l < 3 ? ACT_RELU : ACT_NONE;
                    if (!panels) matmul(B, size[l], size[l - 1], act[l - 1], size[l - 1], 1, W[l], row_ld(size[l], pad), act[l], size[l], &e);
                    else
                        for (int j = 0; j < size[l]; j += NR) {   /* the panel at column j: K x wd floats */
                            int wd = size[l] - j < NR ? size[l] - j : NR;
                            epilogue ej = e;
                            ej.bias = bias[l] + j;
                            matmul(B, wd, size[l - 1], act[l - 1], size[l - 1], 1, W[l] + (long)size[l - 1] * j, wd,
                                   act[l] + j, size[l], &ej);
                        }
                    flops[p] = 2.0 * B * size[l - 1] * size[l];
                } else if (p <= 4) {          /* input gradient of layer l - 1 */
                    int l = p == 3 ? 3 : 2;
                    e.deriv = act[l - 1];
                    e.deriv_act = ACT_RELU;
                    matmul(B, size[l - 1], size[l], dz[l], size[l], 1, WT[l], size[l - 1], dz[l - 1], size[l - 1], &e);
                    flops[p] = 2.0 * B * size[l - 1] * size[l];
                } else {                      /* the fused update of layer l */
                    int l = 8 - p;
                    e.alpha = -1e-6f;
                    e.accumulate = 1;
                    if (!panels) matmul(size[l - 1], size[l], B, act[l - 1], 1, size[l - 1], dz[l], size[l], W[l], row_ld(size[l], pad), &e);
                    else
                        for (int j = 0; j < size[l]; j += NR) {
                            int wd = size[l] - j < NR ? size[l] - j : NR;
                            matmul(size[l - 1], wd, B, act[l - 1], 1, size[l - 1], dz[l] + j, size[l],
                                   W[l] + (long)size[l - 1] * j, wd, &e);
                        }
                    flops[p] = 2.0 * B * size[l - 1] * size[l];
                }
            }
            double t = (now() - t0) / reps;
            if (t < best[p]) best[p] = t;
        }
    printf("gemm-step: kernel path %s (MR %d, NR %d, KC %d), batch %d, inputs %d, hidden 256,128, W %s (rows padded by %ld floats),"
           " best of %ld rounds x %d\n", GEMM_PATH, MR, NR, KC, B, size[0], panels ? "by column panels" : "row-major",
           panels ? 0 : row_ld(256, pad) - 256, rounds, reps);
    double total = 0, total_flops = 0;
    for (int p = 0; p < N_PRODUCTS; p++) {
        printf("%-5s %10.2f us %7.1f GFLOP/s\n", NAMES[p], best[p] * 1e6, flops[p] / best[p] / 1e9);
        total += best[p];
        total_flops += flops[p];
    }
    printf("gemm-step: step %.1f us, %.1f GFLOP/s\n", total * 1e6, total_flops / total / 1e9);
    /* the copies the trainers make of W2 and W3 for the input gradients (transpose_ld, as
     * serial/serial.c calls it), 100 per timing, the best of the rounds; not in the step's
     * rate above */
    for (int l = 2; l <= 3; l++) {
        double best_t = 1e30;
        for (long r = 0; r < rounds; r++) {
            double t0 = now();
            for (int k = 0; k < 100; k++) {
                transpose_ld(W[l], row_ld(size[l], pad), size[l - 1], size[l], WT[l], size[l - 1]);
                __asm__ __volatile__("" ::: "memory");
            }
            double t = (now() - t0) / 100;
            if (t < best_t) best_t = t;
        }
        printf("wt%d   %10.2f us   W%d transposed for bwd%d (%d x %d; a copy, not in the step)\n", l, best_t * 1e6, l, l,
               size[l - 1], size[l]);
    }
    return 0;
}
