/*
 * tests/test_gemm.c — unit tests of common/gemm.h, the one matrix kernel.
 *
 * Built three times by the Makefile: natively (the AVX-512 or AVX2 path, the widest the
 * CPU has), with -DGEMM_LOOPS (the plain-loop path) and with PORTABLE=1 (-march=x86-64-v3:
 * the AVX2 path). Each must pass the same checks:
 *   - products by hand (plain, transposed A, the update);
 *   - every epilogue mode (forward with bias and each activation, the plain store,
 *     backward with each activation's derivative, the update, the continuation) on
 *     awkward shapes (M, N, K no multiple of the tile, K across several K blocks, a large
 *     C with a small B), both layouts of A: within 1e-5 + K * 6e-8 (relative) of a double
 *     reference AND bit for bit the plain chain of fmaf() over k = 0..K-1 in order followed by
 *     epilogue_one() (so the three paths agree with each other);
 *   - the tile-by-tile interface a team uses (matmul_tile_partial, then matmul_tile) and
 *     transpose() with a leading dimension.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>

#include "gemm.h"
#include "prng.h"
#include "check.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static void fill(float *x, long n, uint64_t seed) {
    prng r;
    prng_init(&r, seed, 7);
    for (long i = 0; i < n; i++) x[i] = (float)(2.0 * prng_uniform(&r) - 1.0);
}

static void test_hand(void) {
    /* A = [1 2 3; 4 5 6], B = [1 0; 0 1; 1 1] -> AB = [4 5; 10 11] */
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4] = {0};
    float want[4] = {4, 5, 10, 11};
    matmul(2, 2, 3, A, 3, 1, B, 2, C, 2, &EPI_PLAIN);
    CHECK_CLOSE("gemm 2x3 . 3x2 by hand", C, want, 4, 0);

    /* op(A) = A^T with A stored 3x2 */
    float At[6] = {1, 4, 2, 5, 3, 6}, C2[4] = {0};
    matmul(2, 2, 3, At, 1, 2, B, 2, C2, 2, &EPI_PLAIN);
    CHECK_CLOSE("gemm transposed-A layout by hand", C2, want, 4, 0);

    /* accumulate: C = C + alpha * AB with alpha = -0.5, C = 1 -> [-1 -1.5; -4 -4.5] */
    float C3[4] = {1, 1, 1, 1}, want3[4] = {-1, -1.5f, -4, -4.5f};
    epilogue u = EPI_PLAIN;
    u.alpha = -0.5f; u.accumulate = 1;
    matmul(2, 2, 3, A, 3, 1, B, 2, C3, 2, &u);
    CHECK_CLOSE("gemm accumulate (SGD update) by hand", C3, want3, 4, 0);

    /* continuation: C = [1 1; 1 1] + AB */
    float C4[4] = {1, 1, 1, 1}, want4[4] = {5, 6, 11, 12};
    matmul_continue(2, 2, 3, A, 3, 1, B, 2, C4, 2);
    CHECK_CLOSE("gemm continuation by hand", C4, want4, 4, 0);
}

enum { N_MODES = 10 };
static const char *const MODE_NAMES[N_MODES] = {
    "store", "bias", "bias+relu", "bias+leaky-relu", "relu (no bias)",
    "relu'", "leaky-relu'", "sigmoid'", "update", "continue"};

/* Epilogue mode m; continuation (m = 9) is not an epilogue but matmul_continue */
static epilogue mode_epilogue(int m, const float *bias, const float *H) {
    epilogue e = EPI_PLAIN;
    switch (m) {
    case 1: e.bias = bias; break;
    case 2: e.bias = bias; e.act = ACT_RELU; break;
    case 3: e.bias = bias; e.act = ACT_LEAKY_RELU; break;
    case 4: e.act = ACT_RELU; e.alpha = 0.5f; break;
    case 5: e.deriv = H; e.deriv_act = ACT_RELU; break;
    case 6: e.deriv = H; e.deriv_act = ACT_LEAKY_RELU; break;
    case 7: e.deriv = H; e.deriv_act = ACT_SIGMOID; break;
    case 8: e.alpha = -0.03f; e.accumulate = 1; break;
    default: e.alpha = 0.25f; break;   /* store: C = alpha * acc */
    }
    return e;
}

/* double-precision reference of the product + epilogue */
static void ref_product(int mode, int M, int N, int K, const float *A, long a_row, long a_col,
                        const float *B, float *C, const epilogue *e) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = mode == 9 ? C[(long)i * N + j] : 0.0;
            for (int k = 0; k < K; k++) acc += (double)A[i * a_row + k * a_col] * B[(long)k * N + j];
            long at = (long)i * N + j;
            C[at] = mode == 9 ? (float)acc : epilogue_one(e, (float)acc, C[at], j, e->deriv ? e->deriv[at] : 0.0f);
        }
}

/* the exact definition: one fmaf chain per element over k in order, then the epilogue */
static void chain_product(int mode, int M, int N, int K, const float *A, long a_row, long a_col,
                          const float *B, float *C, const epilogue *e) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long at = (long)i * N + j;
            float acc = mode == 9 ? C[at] : 0.0f;
            for (int k = 0; k < K; k++) acc = fmaf(A[i * a_row + k * a_col], B[(long)k * N + j], acc);
            C[at] = mode == 9 ? acc : epilogue_one(e, acc, C[at], j, e->deriv ? e->deriv[at] : 0.0f);
        }
}

static void test_modes_and_shapes(void) {
    /* tile-sized, awkward, K across blocks (KC + 1, several with a tail, exact multiple),
     * one row / one column, and a large C with a small B (row blocks outside; with M = 1280,
     * the transposed A's rows 5 KB apart: packed per row block, its last one partial), and
     * B's panels read by 32 and more row blocks, its rows 1 KB apart (copied per panel) */
    int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {6, 64, 16}, {8, 32, 16}, {9, 33, 17}, {11, 37, 5},
                       {13, 65, 129}, {64, 10, 128}, {3, 300, 70}, {70, 16, 1}, {17, 48, 784},
                       {7, 20, KC + 1}, {13, 70, 2 * KC + 37}, {6, 64, 3 * KC}, {1, 129, KC + 5},
                       {1100, 250, 40}, {1280, 250, 40}, {200, 256, 40}, {190, 256, KC + 3}};
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    int bad[N_MODES] = {0}, not_chain[N_MODES] = {0};
    double worst[N_MODES] = {0};
    for (int s = 0; s < nshapes; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
        float *bias = malloc(sizeof(float) * N), *H = malloc(sizeof(float) * M * N);
        float *C = malloc(sizeof(float) * M * N), *R = malloc(sizeof(float) * M * N);
        float *F = malloc(sizeof(float) * M * N);
        fill(A, (long)M * K, s); fill(B, (long)K * N, s + 100); fill(bias, N, s + 200); fill(H, (long)M * N, s + 300);
        for (int layout = 0; layout < 2; layout++)
            for (int m = 0; m < N_MODES; m++) {
                epilogue e = mode_epilogue(m, bias, H);
                e.shared_c = layout;   /* the gradient's layout: C's lines asked for ahead (update, store) */
                fill(C, (long)M * N, s + 400);
                memcpy(R, C, sizeof(float) * M * N);
                memcpy(F, C, sizeof(float) * M * N);
                long a_row = layout ? 1 : K, a_col = layout ? M : 1;  /* layout 1: A stored K x M */
                if (m == 9) matmul_continue(M, N, K, A, a_row, a_col, B, N, C, N);
                else matmul(M, N, K, A, a_row, a_col, B, N, C, N, &e);
                ref_product(m, M, N, K, A, a_row, a_col, B, R, &e);
                chain_product(m, M, N, K, A, a_row, a_col, B, F, &e);
                /* a float sum of K terms: at most about K * 2^-24 relative (values in [-1, 1]) */
                double tol = 1e-5 + K * 6e-8;
                double err = check_max_rel_err(C, R, (long)M * N) / tol;
                if (!(err <= 1.0)) bad[m]++;
                if (err > worst[m] || err != err) worst[m] = err;
                not_chain[m] += memcmp(C, F, sizeof(float) * M * N) != 0;
            }
        free(A); free(B); free(bias); free(H); free(C); free(R); free(F);
    }
    char name[200];
    for (int m = 0; m < N_MODES; m++) {
        snprintf(name, sizeof name, "gemm [%s path] %s vs double reference: %d shapes x 2 layouts",
                 GEMM_PATH, MODE_NAMES[m], nshapes);
        CHECK(name, bad[m] == 0, "%d cases over the tolerance 1e-5 + K * 6e-8, worst error %.3g x the tolerance",
              bad[m], worst[m]);
        snprintf(name, sizeof name, "gemm [%s path] %s is the fmaf chain over K in order, bit for bit "
                 "(K blocks of KC = " STR(KC) "): %d shapes x 2 layouts", GEMM_PATH, MODE_NAMES[m], nshapes);
        CHECK(name, not_chain[m] == 0, "%d of %d cases differ", not_chain[m], 2 * nshapes);
    }
}

/* A team's way (openmp --accum loop): every tile of the first K block into partial sums,
 * then every tile of the last block with the epilogue, started from those sums. */
static void test_tiles_by_hand(void) {
    int M = 23, N = 150, K = KC + 77, K1 = KC;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *bias = malloc(sizeof(float) * N);
    float *C = malloc(sizeof(float) * M * N), *F = malloc(sizeof(float) * M * N), *P = malloc(sizeof(float) * M * N);
    fill(A, (long)M * K, 1); fill(B, (long)K * N, 2); fill(bias, N, 3);
    epilogue e = mode_epilogue(2, bias, NULL);
    for (int j = 0; j < N; j += NR)
        for (int i = 0; i < M; i += MR) matmul_tile_partial(i, j, M, N, K1, A, K, 1, B, N, P, N, NULL);
    for (int j = 0; j < N; j += NR)
        for (int i = 0; i < M; i += MR)
            matmul_tile(EPI_FORWARD, i, j, M, N, K - K1, A + K1, K, 1, B + (long)K1 * N, N, C, N, &e, P, N);
    chain_product(2, M, N, K, A, K, 1, B, F, &e);
    CHECK("gemm tile by tile over two K blocks (a team's way) is the fmaf chain, bit for bit",
          memcmp(C, F, sizeof(float) * M * N) == 0, "the tiles differ from the chain");
    free(A); free(B); free(bias); free(C); free(F); free(P);
}

/* The owner's way (common/owner.h): K cut into parts (the workers' rows), the first part's
 * plain sums into a scratch P, the middle parts continued in P, the last part started from
 * P with the epilogue into C (matmul_from): the fmaf chain over all of K, bit for bit,
 * for the update and the plain sums, both layouts of A, parts shorter and longer than KC. */
static void test_from(void) {
    int M = 24, N = 150, parts[][3] = {{32, 32, 0}, {1, 1, 1}, {KC + 37, 5, 2 * KC + 1}, {3, KC, 0}};
    int nparts = (int)(sizeof parts / sizeof parts[0]), differ = 0, cases = 0;
    for (int c = 0; c < nparts; c++) {
        int K = parts[c][0] + parts[c][1] + parts[c][2];
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
        float *C = malloc(sizeof(float) * M * N), *F = malloc(sizeof(float) * M * N), *P = malloc(sizeof(float) * M * N);
        fill(A, (long)M * K, 40 + c); fill(B, (long)K * N, 50 + c);
        for (int layout = 0; layout < 2; layout++)
            for (int m = 0; m < 9; m += 8) {   /* store (alpha 0.25), update */
                epilogue e = mode_epilogue(m, NULL, NULL);
                long a_row = layout ? 1 : K, a_col = layout ? M : 1;
                int n = parts[c][2] ? 3 : 2;
                fill(C, (long)M * N, 60 + c);
                memcpy(F, C, sizeof(float) * M * N);
                for (int p = 0, k0 = 0; p < n; k0 += parts[c][p], p++) {
                    const float *Ap = A + (long)k0 * a_col, *Bp = B + (long)k0 * N;
                    if (p == n - 1) matmul_from(P, N, M, N, parts[c][p], Ap, a_row, a_col, Bp, N, C, N, &e);
                    else if (p == 0) matmul(M, N, parts[c][p], Ap, a_row, a_col, Bp, N, P, N, &EPI_PLAIN);
                    else matmul_continue(M, N, parts[c][p], Ap, a_row, a_col, Bp, N, P, N);
                }
                chain_product(m, M, N, K, A, a_row, a_col, B, F, &e);
                differ += memcmp(C, F, sizeof(float) * M * N) != 0;
                cases++;
            }
        free(A); free(B); free(C); free(F); free(P);
    }
    CHECK("gemm [" GEMM_PATH " path] matmul_from after parts of K (the owner's sums) is the fmaf chain, bit for bit",
          differ == 0, "%d of %d cases differ", differ, cases);
}

static void test_transpose(void) {
    float a[6] = {1, 2, 3, 4, 5, 6}, t[6], want[6] = {1, 4, 2, 5, 3, 6};
    transpose(a, 2, 3, t, 2);
    CHECK_CLOSE("transpose 2x3 by hand", t, want, 6, 0);
    /* rows 1..2 of a 3 x 2 matrix land in columns 1..2 of its 2 x 3 transpose (ld 3) */
    float m[6] = {1, 2, 3, 4, 5, 6}, mt[6] = {0, 0, 0, 0, 0, 0}, want2[6] = {0, 3, 5, 0, 4, 6};
    transpose(m + 2, 2, 2, mt + 1, 3);
    CHECK_CLOSE("transpose of a block of rows with a leading dimension", mt, want2, 6, 0);
    int R = 37, Cn = 70;
    float *x = malloc(sizeof(float) * R * Cn), *y = malloc(sizeof(float) * R * Cn);
    fill(x, (long)R * Cn, 9);
    transpose(x, R, Cn, y, R);
    int wrong = 0;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < Cn; j++) wrong += y[(long)j * R + i] != x[(long)i * Cn + j];
    CHECK("transpose 37x70 (blocks of 16 with tails)", wrong == 0, "%d elements wrong", wrong);
    /* the first 70 columns of rows 86 floats apart (a padded W): the same transpose */
    float *xp = malloc(sizeof(float) * R * 86);
    fill(xp, (long)R * 86, 9);
    for (int i = 0; i < R; i++) memcpy(xp + (long)i * 86, x + (long)i * Cn, sizeof(float) * (size_t)Cn);
    float *yp = malloc(sizeof(float) * R * Cn);
    transpose_ld(xp, 86, R, Cn, yp, R);
    CHECK("transpose_ld of rows 86 floats apart, 70 wide: transpose's result, the padding unread",
          memcmp(yp, y, sizeof(float) * (size_t)R * Cn) == 0, "results differ");
    /* rows 5..45 of a 48 x 72 matrix whose rows lie 80 floats apart into columns 5..45 of its
     * 72 x 48 transpose (a thread's slice, as hybrid's): 8 x 8 blocks at odd offsets, edges */
    float *s = malloc(sizeof(float) * 48 * 80), *d = malloc(sizeof(float) * 72 * 48);
    fill(s, 48L * 80, 5);
    for (long k = 0; k < 72L * 48; k++) d[k] = -1.0f;
    transpose_ld(s + 5L * 80, 80, 40, 72, d + 5, 48);
    wrong = 0;
    for (int i = 0; i < 48; i++)
        for (int j = 0; j < 72; j++) wrong += d[(long)j * 48 + i] != (i >= 5 && i < 45 ? s[(long)i * 80 + j] : -1.0f);
    CHECK("transpose_ld of rows 5..45 (80 floats apart) into columns 5..45: the rest untouched",
          wrong == 0, "%d elements wrong", wrong);
    free(x); free(y); free(xp); free(yp); free(s); free(d);
}

int main(void) {
    printf("gemm path: %s (MR %d, NR %d, KC %d)\n", GEMM_PATH, MR, NR, KC);
    test_hand();
    test_modes_and_shapes();
    test_tiles_by_hand();
    test_from();
    test_transpose();
    CHECK_EXIT();
}
