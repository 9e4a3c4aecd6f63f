/*
 * common/gemm.h — the one matrix kernel of partrain's CPU trainers (header-only).
 *
 *   C[M x N] (=|+=) alpha * op(A) . B, then an epilogue applied while C is in registers.
 *
 * Every CPU trainer (serial, openmp, mpi, pipeline, hybrid, cnn) includes this header and
 * stays one translation unit, so the compiler specialises the kernel for each epilogue
 * at each call site exactly as if it were written there. There are three paths, chosen
 * at compile time: AVX-512 (6 x 64 register tile), AVX2 + FMA (6 x 16: x86-64-v3 CPUs
 * without AVX-512, and make PORTABLE=1) and plain loops the compiler vectorizes (any
 * other CPU, or -DGEMM_LOOPS). All three compute every element as the same chain of
 * fmaf() over K in order, followed by the same epilogue operations, so they give the
 * same bits (tests/test_gemm.c checks each against that chain). Design and
 * measurements: docs/kernel.md.
 *
 * op(A)[i][k] = A[i * a_row + k * a_col]: a row-major A is (a_row = lda, a_col = 1);
 * the transpose of a row-major K x M matrix is (a_row = 1, a_col = lda). B is row-major
 * K x N with leading dimension ldb. The epilogue:
 *   accumulate  C = C + alpha * acc (one fused multiply-add; the SGD update), else
 *               C = alpha * acc
 *   bias        + bias[j]                          (forward)
 *   act         relu / leaky-relu of the result    (forward)
 *   deriv       times act'(H[i][j]) where H has C's shape and ldc (backward)
 * Supported combinations: accumulate alone (update), bias and/or act (forward), deriv
 * alone (backward); matmul_continue() goes on with the sums already in C; matmul_from()
 * starts them from a scratch P and ends in the update or the plain sums (a K split between
 * calls: common/owner.h).
 *
 * It includes what it needs (<immintrin.h> for the vector paths, options.h for ACT_* and
 * LEAKY_RELU_SLOPE); the including file may define KC. Compile with -ffp-contract=off
 * or in ISO C mode (-std=c11), so that no product and sum are contracted behind the
 * kernel's back.
 */
#ifndef PARTRAIN_GEMM_H
#define PARTRAIN_GEMM_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_tile.h"   /* the epilogue, its kinds, the tile dispatch */
#include "options.h"

#ifdef HAVE_CBLAS
#include <cblas.h>
#endif

/* The path: AVX-512, AVX2 + FMA, or plain loops (each defines GEMM_PATH, MR, NR, LARGE_C
 * and matmul_tile) */
#if defined(__AVX512F__) && !defined(GEMM_LOOPS)
#include "gemm_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__) && !defined(GEMM_LOOPS)
#include "gemm_avx2.h"
#else
/* Plain-loop path: the same tiling with plain loops the compiler vectorizes along j; the
 * same fmaf chain per element and the same epilogue (epilogue_one), so the same bits. */
#define GEMM_PATH "loops"
#define MR 4
#define NR 32
#define LARGE_C 262144
static inline void
matmul_tile(const int kind, int i, int j, int M, int N, int K, const float *A, long a_row, long a_col,
            const float *B, long ldb, float *C, long ldc, const epilogue *e, const float *P, long ldp) {
    int mr = M - i < MR ? M - i : MR;
    int nc = N - j < NR ? N - j : NR;
    float acc[MR][NR];
    memset(acc, 0, sizeof acc);
    if (P)
        for (int r = 0; r < mr; r++)
            for (int c = 0; c < nc; c++) acc[r][c] = P[(long)(i + r) * ldp + j + c];
    for (int k = 0; k < K; k++) {
        const float *restrict b = B + (long)k * ldb + j;
        for (int r = 0; r < mr; r++) {
            float a = A[(long)(i + r) * a_row + (long)k * a_col];
            for (int c = 0; c < nc; c++) acc[r][c] = fmaf(a, b[c], acc[r][c]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nc; c++) {
            long at = (long)(i + r) * ldc + j + c;
            if (kind == EPI_CONTINUE) C[at] = acc[r][c];
            else C[at] = epilogue_one(e, acc[r][c], C[at], j + c, kind == EPI_BACKWARD ? e->deriv[at] : 0.0f);
        }
}
#endif

/* Scratch of n floats, one per thread and slot, grown to the largest asked for and kept
 * (the kernel runs every step; the system frees it at exit). NULL when out of memory. */
enum { SCRATCH_UPDATE, SCRATCH_PACK_A, SCRATCH_PACK_B, SCRATCHES };
static inline float *scratch(int slot, size_t n) {
    static _Thread_local float *buf[SCRATCHES];
    static _Thread_local size_t cap[SCRATCHES];
    if (n > cap[slot]) {
        free(buf[slot]);
        buf[slot] = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
        cap[slot] = buf[slot] ? n : 0;
    }
    return buf[slot];
}

/* B (K x N, leading dimension ldb) in panel order into dst: the NR columns at j = p * NR
 * at dst + p * K * NR, their rows NR apart. Row by row, so that B is read in address order;
 * a full panel's row is a constant-size copy (a few vector moves, not a call). */
static inline void pack_panels(float *restrict dst, const float *restrict B, long ldb, int K, int N) {
    int full = N / NR, tail = N - full * NR;
    for (int k = 0; k < K; k++) {
        const float *row = B + (long)k * ldb;
        for (int p = 0; p < full; p++) memcpy(dst + ((long)p * K + k) * NR, row + p * NR, NR * sizeof(float));
        if (tail) memcpy(dst + ((long)full * K + k) * NR, row + full * NR, (size_t)tail * sizeof(float));
    }
}

/* How far ahead (floats) the copy of a transposed A asks for its lines: two cache lines,
 * two to three row blocks (matmul_block) */
enum { PACK_AHEAD = 32 };

/* Tile order: column panels of C outside, row blocks inside. One NR-column panel of B
 * (layer 1's W: 784 x 64 floats, 200 KB) then stays in L2 while every row block of A
 * streams past it. Except when all of B is small (at most 64 K floats: it stays in L2 in
 * any order) and C is large (over LARGE_C floats, about the L2): then row blocks outside,
 * so that C streams through the cache whole rows at a time. Each element is one sum over K in
 * the same order whatever the tile order: the order changes no bit. One K block of the
 * product: every tile, its sums started from P (NULL: from zero). */
static inline __attribute__((always_inline)) void
matmul_block(const int kind, int M, int N, int K, const float *A, long a_row, long a_col,
             const float *B, long ldb, float *C, long ldc, const epilogue *e, const float *P, long ldp) {
    int rows_outside = (long)K * N <= 65536 && (long)M * N > LARGE_C;
    int row_tiles = (M + MR - 1) / MR, tile = 0;
    /* By rows, a transposed A (the update's act^T: one row of act per k) whose rows lie a
     * multiple of 1 KB apart (layer 1 at image size 112: 49 KB) puts the tile's K lines of
     * A in at most 4 of the L1's 64 sets, where they evict each other before the next
     * column tile reads them again. Such an A is copied per row block to
     * packed[i + k * MR + r], its K x MR elements consecutive, and read from there by every
     * column tile of the block. A copied float is the same float: no bit changes. The
     * copy reads K lines, one per row of act, that no hardware prefetcher follows (K
     * streams at once): while it copies, the lines PACK_AHEAD floats on are asked for. */
    float *packed = rows_outside && a_row == 1 && N > NR && a_col % 256 == 0
                    ? scratch(SCRATCH_PACK_A, (size_t)M + (size_t)K * MR) : NULL;
    /* B's panels likewise (pack_panels: panel p at panels + p * K * NR), each tile then
     * reading its panel's K x NR floats consecutively: by rows, where every row block reads
     * all of B (small there: at most 64 K floats), all of it at once; by column panels, a
     * panel when its first tile comes, if its rows lie a multiple of 1 KB apart and 32 or
     * more row blocks read it (openmp model's update of its W1 panel: 131); with fewer (a
     * forward at batch 64: 11) the copy costs more than it saves (docs/NOTES.md 47). By
     * column panels one panel is in use at a time: the buffer holds that one, at panels + j
     * so that the tile's Bt + j is the panel's start (N + K x NR floats, not all of B). */
    int pack_b = rows_outside ? N > NR : row_tiles >= 32 && ldb % 256 == 0;
    size_t panel_floats = rows_outside ? (size_t)((N + NR - 1) / NR) * NR * (size_t)K : (size_t)N + (size_t)K * NR;
    float *panels = pack_b ? scratch(SCRATCH_PACK_B, panel_floats) : NULL;
    if (panels && rows_outside) pack_panels(panels, B, ldb, K, N);
    for (int i = 0, j = 0; i < M && j < N; tile++) {   /* one call site: the tile code is inlined once */
        const float *At = A, *Bt = B;
        long at_row = a_row, at_col = a_col, bt_ld = ldb;
        if (rows_outside) {
            /* By rows, C is large (layer 1's weights or their gradient at a large image:
             * every element written once, and for the update read once, per step): each
             * tile asks for its own columns of the row block two ahead, for writing. The
             * tile touches C only in its epilogue, after the sums, too late for the
             * out-of-order core to fetch it. Asked for all at once (a row block: about a
             * hundred lines), the misses queued behind each other (docs/NOTES.md 52). */
            if (i + 2 * MR < M)
                for (int r = i + 2 * MR; r < i + 3 * MR && r < M; r++)
                    for (int c = j; c < j + NR && c < N; c += 16) __builtin_prefetch(C + (long)r * ldc + c, 1, 2);
            if (packed) {
                if (j == 0)
                    for (int k = 0, mr = M - i < MR ? M - i : MR; k < K; k++) {
                        if (i + PACK_AHEAD < M) __builtin_prefetch(A + (long)(i + PACK_AHEAD) + (long)k * a_col, 0, 2);
                        for (int r = 0; r < mr; r++) packed[i + k * MR + r] = A[(long)(i + r) + (long)k * a_col];
                    }
                At = packed, at_row = 1, at_col = MR;
            }
        }
        /* By column panels, the update and the plain sums: the tile two ahead is asked for,
         * for writing. Its lines may sit in another core's cache (W that the other workers
         * read in their forward, a gradient buffer they summed), and each write must first
         * take its line back, a round trip between cores; asked for ahead, the round trips
         * overlap the sums of the tiles in between (docs/NOTES.md 44). */
        else if (e->shared_c && (kind == EPI_UPDATE || kind == EPI_STORE)) {
            int ahead = tile + 2, pi = ahead % row_tiles * MR, pj = ahead / row_tiles * NR;
            if (pj < N)
                for (int r = pi; r < pi + MR && r < M; r++)
                    for (int c = pj; c < pj + NR && c < N; c += 16) __builtin_prefetch(C + (long)r * ldc + c, 1, 2);
        }
        if (panels) {
            float *panel = rows_outside ? panels + (long)(j / NR) * K * NR : panels + j;
            if (!rows_outside && i == 0) pack_panels(panel, B + j, ldb, K, N - j < NR ? N - j : NR);
            Bt = panel - j, bt_ld = NR;   /* the tile reads Bt + j */
        }
        matmul_tile(kind, i, j, M, N, K, At, at_row, at_col, Bt, bt_ld, C, ldc, e, P, ldp);
        if (rows_outside) { if ((j += NR) >= N) { j = 0; i += MR; } }
        else if ((i += MR) >= M) { i = 0; j += NR; }
    }
}

/* One tile of a K block before the last (a team that shares out the tiles: openmp's
 * loop): partial sums into P, started from `from` (NULL: from zero). */
static __attribute__((unused)) void
matmul_tile_partial(int i, int j, int M, int N, int K, const float *A, long a_row, long a_col,
                    const float *B, long ldb, float *P, long ldp, const float *from) {
    matmul_tile(EPI_CONTINUE, i, j, M, N, K, A, a_row, a_col, B, ldb, P, ldp, &EPI_PLAIN, from, ldp);
}

/* A K block before the last: partial sums, whatever the product (one copy of the code) */
static __attribute__((unused)) void
matmul_block_partial(int M, int N, int K, const float *A, long a_row, long a_col,
                     const float *B, long ldb, float *P, long ldp, const float *from) {
    matmul_block(EPI_CONTINUE, M, N, K, A, a_row, a_col, B, ldb, P, ldp, &EPI_PLAIN, from, ldp);
}

/* Blocking over K: a 64-column panel of B over more than KC rows (128 KB) may no longer
 * stay in L2 while the row blocks of A stream past it, so K goes in blocks of KC: each
 * tile of a block starts from the partial sums the block before stored, and only the
 * last block applies the epilogue. A stored and reloaded float is the same float, so
 * every element is still one chain of roundings over K in order: no bit changes. The
 * partial sums go to C itself, except for the update, whose epilogue reads C's old
 * values: there they go to a scratch of M x N floats (scratch(SCRATCH_UPDATE)). */
#ifndef KC
#define KC 512
#endif
/* Most bytes one thread's packed copies in matmul_block take (scratch SCRATCH_PACK_A and
 * SCRATCH_PACK_B) for products none of whose M, N or K exceeds dim: A's copy is M + K x MR
 * floats where K x N <= 64 K and N > NR; B's is all of B, padded to whole panels, where
 * K x N <= 64 K (at most 128 K floats), or one panel of K x NR at offset N. For the memory
 * checks before loading: every thread that runs products counts it once. */
static inline double gemm_pack_bytes(double dim) {
    double pack_b = dim * (NR + 1) > 131072.0 ? dim * (NR + 1) : 131072.0;
    return sizeof(float) * (dim + 65536.0 / NR * MR + pack_b) + 2 * 64;
}

/* The same for a dense net of o's layers on `features` inputs, at most `rows` rows a product */
static inline double gemm_pack_bytes_dense(const train_options *o, int features, long rows) {
    double dim = features > rows ? features : (double)rows;
    for (int l = 0; l < o->n_hidden; l++) if (o->hidden[l] > dim) dim = o->hidden[l];
    return gemm_pack_bytes(dim);
}

/* All tiles over all of K, in the calling thread */
static inline __attribute__((always_inline)) void
matmul_tiles(const int kind, int M, int N, int K, const float *A, long a_row, long a_col,
             const float *B, long ldb, float *C, long ldc, const epilogue *e) {
    float *P = C;
    long ldp = ldc;
    if (K > KC && kind == EPI_UPDATE) {
        P = scratch(SCRATCH_UPDATE, (size_t)M * (size_t)N);
        ldp = N;
    }
    for (int k0 = 0;; k0 += KC) {   /* K <= KC, or no scratch: one block over all of K */
        int kc = K - k0 <= KC || !P ? K - k0 : KC;
        const float *Ak = A + (long)k0 * a_col, *Bk = B + (long)k0 * ldb;
        const float *from = k0 || kind == EPI_CONTINUE ? P : NULL;
        if (k0 + kc < K) { matmul_block_partial(M, N, kc, Ak, a_row, a_col, Bk, ldb, P, ldp, from); continue; }
        matmul_block(kind, M, N, kc, Ak, a_row, a_col, Bk, ldb, C, ldc, e, from, ldp);
        break;
    }
}

/* C += A . B as the continuation of the sums already in C: each element's chain of
 * fused multiply-adds goes on over this K (the CNN's dense gradient over a split K). */
static __attribute__((unused)) void
matmul_continue(int M, int N, int K, const float *A, long a_row, long a_col,
                const float *B, long ldb, float *C, long ldc) {
    matmul_tiles(EPI_CONTINUE, M, N, K, A, a_row, a_col, B, ldb, C, ldc, &EPI_PLAIN);
}

/* The product's sums started from P (M x N, leading dimension ldp) instead of zero, then
 * e's epilogue into C: the update (C + alpha * sums) or the plain sums (alpha = 1). One
 * chain of fused multiply-adds per element over a K that was split between calls (the
 * owner's sums over every worker's rows, common/owner.h, go on in P from one worker's rows
 * to the next). P is scratch: over more than KC rows of K, the blocks before the last go
 * on in it. */
static __attribute__((unused)) void
matmul_from(float *P, long ldp, int M, int N, int K, const float *A, long a_row, long a_col,
            const float *B, long ldb, float *C, long ldc, const epilogue *e) {
    int before = K > KC ? (K - 1) / KC * KC : 0;
    if (before) matmul_continue(M, N, before, A, a_row, a_col, B, ldb, P, ldp);
    A += (long)before * a_col;
    B += (long)before * ldb;
    if (e->accumulate) matmul_block(EPI_UPDATE, M, N, K - before, A, a_row, a_col, B, ldb, C, ldc, e, P, ldp);
    else if (!e->bias && e->act == ACT_NONE && !e->deriv)
        matmul_block(EPI_STORE, M, N, K - before, A, a_row, a_col, B, ldb, C, ldc, e, P, ldp);
    else { fprintf(stderr, "gemm: internal error: matmul_from takes the update or the plain sums\n"); exit(1); }
}

#ifdef HAVE_CBLAS
/* The library ceiling (serial --gemm blas): single-threaded cblas_sgemm, then the
 * epilogue as a second pass. Not bit-identical to the kernel: OpenBLAS sums in its own
 * order, chosen by CPU. */
static int gemm_use_blas __attribute__((unused));
static void matmul_blas(int M, int N, int K, const float *A, long a_row, long a_col,
                        const float *B, long ldb, float *C, long ldc, const epilogue *e) {
    int trans_a = a_row == 1 && a_col != 1;
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    long lda = trans_a ? a_col : a_row;
    if (e->accumulate && !e->bias && e->act == ACT_NONE && !e->deriv) {
        cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, M, N, K, e->alpha, A, (int)lda, B, (int)ldb, 1.0f, C, (int)ldc);
        return;
    }
    if (e->accumulate) { fprintf(stderr, "gemm: internal error: unsupported BLAS epilogue\n"); exit(1); }
    cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, M, N, K, e->alpha, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
    if (!e->bias && e->act == ACT_NONE && !e->deriv) return;
    epilogue rest = *e;
    rest.alpha = 1.0f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long at = (long)i * ldc + j;
            C[at] = epilogue_one(&rest, C[at], 0.0f, j, e->deriv ? e->deriv[at] : 0.0f);
        }
}
#endif

/* The product with its epilogue, all tiles in the calling thread; the kind of epilogue
 * becomes a compile-time constant of one specialised copy of the kernel. */
static __attribute__((unused)) void
matmul(int M, int N, int K, const float *A, long a_row, long a_col,
       const float *B, long ldb, float *C, long ldc, const epilogue *e) {
#ifdef HAVE_CBLAS
    if (gemm_use_blas) { matmul_blas(M, N, K, A, a_row, a_col, B, ldb, C, ldc, e); return; }
#endif
    if (e->accumulate) matmul_tiles(EPI_UPDATE, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
    else if (e->deriv) matmul_tiles(EPI_BACKWARD, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
    else if (!e->bias && e->act == ACT_NONE) matmul_tiles(EPI_STORE, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
    else matmul_tiles(EPI_FORWARD, M, N, K, A, a_row, a_col, B, ldb, C, ldc, e);
}

#if defined(__AVX2__) && !defined(GEMM_LOOPS)
/* An 8 x 8 block: dst[j * ld + i] = src[i * lds + j] for i, j < 8. Eight rows in, the
 * textbook unpack / shuffle / lane-swap network, eight rows out: a copy, the same floats. */
static inline void transpose8(const float *restrict src, long lds, float *restrict dst, long ld) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds), r2 = _mm256_loadu_ps(src + 2 * lds),
           r3 = _mm256_loadu_ps(src + 3 * lds), r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
           r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee),
           s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee),
           s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee),
           s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(dst + ld, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(s3, s7, 0x31));
}
#endif

/* dst[j * ld + i] = src[i * lds + j] (transpose_ld: src's rows lds floats apart, a padded
 * W's; transpose: cols apart): the transpose of a block of rows of src lands in the same
 * block of columns of dst (ld = rows of the whole matrix; ld = rows transposes all of
 * src). In 16 x 16 blocks so that both the reads and the strided writes stay
 * within a few cache lines (a plain loop spends more time here than the backward
 * product it prepares); with AVX2, the whole 8 x 8 blocks in a block by registers
 * (transpose8, docs/NOTES.md 54), the rest element by element. */
static inline void transpose_ld(const float *restrict src, long lds, int rows, int cols, float *restrict dst, long ld) {
    enum { BLOCK = 16 };
    for (int i0 = 0; i0 < rows; i0 += BLOCK)
        for (int j0 = 0; j0 < cols; j0 += BLOCK) {
            int i1 = i0 + BLOCK < rows ? i0 + BLOCK : rows, j1 = j0 + BLOCK < cols ? j0 + BLOCK : cols;
            int iv = i0, jv = j0;   /* the 8 x 8 blocks cover [i0, iv) x [j0, jv) */
#if defined(__AVX2__) && !defined(GEMM_LOOPS)
            iv = i0 + (i1 - i0) / 8 * 8, jv = j0 + (j1 - j0) / 8 * 8;
            for (int i = i0; i < iv; i += 8)
                for (int j = j0; j < jv; j += 8) transpose8(src + (long)i * lds + j, lds, dst + (long)j * ld + i, ld);
#endif
            for (int j = jv; j < j1; j++)   /* the columns right of them, every row */
                for (int i = i0; i < i1; i++) dst[(long)j * ld + i] = src[(long)i * lds + j];
            for (int j = j0; j < jv; j++)   /* the rows below them */
                for (int i = iv; i < i1; i++) dst[(long)j * ld + i] = src[(long)i * lds + j];
        }
}
static inline void transpose(const float *restrict src, int rows, int cols, float *restrict dst, long ld) {
    transpose_ld(src, cols, rows, cols, dst, ld);
}

#endif
