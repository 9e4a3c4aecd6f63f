/*
 * cuda/cuda.cu — GPU trainer: the whole training loop on one CUDA device (per MPI rank),
 * with a choice of matrix product (--kernel; the list: --list-variants).
 *
 * Strategy: serial's MLP and SGD, every step on the device: parameters, activations,
 * gradients and the data set live in device memory; per epoch only the shuffled sample
 * order goes up and a gather kernel builds each mini-batch. The products:
 *   naive    one thread per element of C, A and B from global memory (seed report 000);
 *   tiled    --tile 16|32: a block computes a tile of C, staging tiles of A and B in
 *            shared memory between two __syncthreads() (that report's optimised kernel);
 *   cublas   cublasSgemm as the ceiling, the epilogue as a separate kernel.
 * The maths is serial's operation for operation (one fmaf chain over k per element, the
 * same epilogues and update, nvcc -fmad=false); only the device's expf/logf and
 * cuBLAS's summation order differ. Every CUDA call and launch is checked; no GPU: one
 * line with the runtime's error, exit status 3.
 * Synchronisation: none between host and device within an epoch (the host enqueues each
 * step's kernels on one stream); per epoch the loss sum and predictions come down.
 * MPI build (-DUSE_MPI, make cuda-mpi): data parallel as mpi/mpi.c, one device per rank;
 * the gradient sums go device -> host, MPI_Allreduce, host -> device, every step.
 * Emulation build (make cuda-emu): the same file compiled as C++ with cuda/cuda_emu.h,
 * one fiber per GPU thread on the CPU, so the tests check these kernels without a GPU
 * (no cuBLAS there). Design: docs/cuda.md.
 *
 * Compile: make cuda (nvcc, -lcublas), make cuda-emu (g++ -x c++), make cuda-mpi (both, with MPI)
 * Run:     cuda/cuda --data data/fashion --epochs 5 --kernel tiled --tile 16
 *          scripts/mpirun.sh 2 cuda/cuda-mpi --kernel cublas;  scripts/gpu-check.sh on a GPU machine
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* common/ is C: its headers declare C functions (compiled by cc, linked as C) */
extern "C" {
#include "data.h"
#include "idx.h"
#include "maths.h"
#include "options.h"
#include "prng.h"
#include "program.h"
#include "results.h"
#include "schedule.h"   /* lr_at(), target_reached() */
#include "timer.h"
#include "trace.h"     /* --trace: host-side spans (launches, copies, MPI calls) */
}

#ifdef USE_MPI
#include <limits.h>
#define OMPI_SKIP_MPICXX 1      /* the C API only: skip the deprecated C++ bindings */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "trace_mpi.h"  /* --trace: the ranks' events gathered to rank 0 */
#include <unistd.h>
#define MPI_BUILD 1
#else
#define MPI_BUILD 0
#endif

#ifdef __CUDACC__
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define UNROLL _Pragma("unroll")
#else
#include "cuda_emu.h"
#define UNROLL
#endif

#if defined(USE_MPI) && defined(CUDA_EMU)
#define PROGRAM "cuda-mpi-emu"
#elif defined(USE_MPI)
#define PROGRAM "cuda-mpi"
#elif defined(CUDA_EMU)
#define PROGRAM "cuda-emu"
#else
#define PROGRAM "cuda"
#endif
#ifdef USE_MPI
extern "C" {
#include "watchdog.h"           /* --timeout-step: the stuck-rank watchdog (common/watchdog.c) */
}
#else   /* one process, no rank to watch: these do nothing and --timeout-step is no flag */
static inline int watchdog_parse(const char *, int, char **, int *) { return 0; }
static inline void watchdog_usage(void) {}
static inline void watchdog_start(void) {}
static inline void watchdog_progress(int, long) {}
static inline void watchdog_beat(void) {}
#endif
#define MAX_LAYERS (OPT_MAX_HIDDEN + 1)
#define EVAL_BATCH 512          /* rows per forward pass when evaluating */
#define THREADS 256             /* threads per block of the element-wise kernels */

static int rank = 0, nranks = 1;   /* this process in MPI_COMM_WORLD (1 without MPI) */

// ----------------------------------------------------------------------------
// errors: every CUDA call and every kernel launch is checked

/* A failure ends the program (and, with MPI, the whole job: no rank may wait forever). */
static void fatal(int status) {
    fflush(stdout);
    fflush(stderr);
#ifdef USE_MPI
    MPI_Abort(MPI_COMM_WORLD, status);
#endif
    exit(status);
}

static void cuda_check(cudaError_t rc, const char *call, int line) {
    if (rc == cudaSuccess) return;
    if (nranks > 1) fprintf(stderr, PROGRAM ": rank %d: %s (cuda.cu:%d): %s\n", rank, call, line, cudaGetErrorString(rc));
    else fprintf(stderr, PROGRAM ": %s (cuda.cu:%d): %s\n", call, line, cudaGetErrorString(rc));
    fatal(1);
}
#define CUDA(call) cuda_check((call), #call, __LINE__)

/* LAUNCH(kernel, grid, block, args...): the one way kernels are started, on work_stream,
 * checked at once (configuration errors; faults during the run surface at the next
 * synchronising call). work_stream is the legacy stream 0, or with --graph a created
 * stream (a capture needs one; the legacy stream cannot be captured). */
static cudaStream_t work_stream = 0;
#ifdef CUDA_EMU
#define LAUNCH(kernel, grid, block, ...) do { \
        emu::launch(#kernel, work_stream, (grid), (block), kernel, __VA_ARGS__); \
        cuda_check(cudaGetLastError(), "launch of " #kernel, __LINE__); } while (0)
#else
#define LAUNCH(kernel, grid, block, ...) do { \
        kernel<<<(grid), (block), 0, work_stream>>>(__VA_ARGS__); \
        cuda_check(cudaGetLastError(), "launch of " #kernel, __LINE__); } while (0)
#endif

static unsigned blocks_for(long n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

// ----------------------------------------------------------------------------
// options: the common flags (common/options.h) plus this trainer's own

enum kernel_kind { KERNEL_NAIVE = 0, KERNEL_TILED = 1, KERNEL_CUBLAS = 2 };
/* the variants, each kernel with its tile: X(CSV name, kernel, --kernel value, tile, help).
 * --kernel takes the value, --tile the side; the CSV name says both (tiled16). */
#define CUDA_VARIANTS(X) \
    X("naive",   KERNEL_NAIVE,  "naive",  0,  "one thread per element, global memory") \
    X("tiled16", KERNEL_TILED,  "tiled",  16, "shared-memory tiles, 16x16 threads per block") \
    X("tiled32", KERNEL_TILED,  "tiled",  32, "shared-memory tiles, 32x32 threads per block") \
    X("cublas",  KERNEL_CUBLAS, "cublas", 0,  "cuBLAS sgemm (not in the CPU emulation build)")
struct cuda_variant { const char *name; int kernel; const char *value; int tile; const char *help; };
#define CUDA_VARIANT_ROW(name, kernel, value, tile, help) { name, kernel, value, tile, help },
static const struct cuda_variant CUDA_VARIANT[] = { CUDA_VARIANTS(CUDA_VARIANT_ROW) };
enum { N_CUDA_VARIANT = sizeof CUDA_VARIANT / sizeof CUDA_VARIANT[0] };

/* --list-variants: the ones this build runs */
static void list_variants(void) {
    for (int k = 0; k < N_CUDA_VARIANT; k++) {
        const struct cuda_variant *v = &CUDA_VARIANT[k];
#ifdef CUDA_EMU
        if (v->kernel == KERNEL_CUBLAS) continue;
#endif
        if (v->tile) printf("%s\t--kernel %s --tile %d\t%s\n", v->name, v->value, v->tile, v->help);
        else printf("%s\t--kernel %s\t%s\n", v->name, v->value, v->help);
    }
}

typedef struct {
    train_options common;
    int kernel;                 /* --kernel naive|tiled|cublas */
    int tile;                   /* --tile 16|32 (tiled) */
    int graph;                  /* --graph: one epoch's launches captured once, replayed */
} cuda_options;

static void usage(void) {
#ifdef USE_MPI
    printf("Usage: scripts/mpirun.sh P cuda/" PROGRAM " [options]\n"
           "Trains an MLP on MNIST-style IDX data on one CUDA device per MPI rank, data-parallel.\n\n");
#else
    printf("Usage: cuda/" PROGRAM " [options]\n"
           "Trains an MLP on MNIST-style IDX data on one CUDA device.\n\n");
#endif
    options_usage_common();
    printf("CUDA:\n"
           "  --kernel NAME         matrix products: naive (one thread per element, global\n"
           "                        memory), tiled (shared-memory tiles), cublas%s [tiled]\n"
           "  --tile 16|32          tile side of --kernel tiled (16x16 or 32x32 threads) [16]\n"
           "  --graph               capture one epoch's launches once as a CUDA graph and replay\n"
           "                        it every epoch (fewer launches; results bit-identical; CSV\n"
           "                        variant NAME+graph; not in the MPI builds)\n",
#ifdef CUDA_EMU
           " (not in the CPU emulation build)"
#else
           ""
#endif
    );
#ifdef CUDA_EMU
    printf("This is the CPU emulation build (cuda/cuda_emu.h): for tests, not for timing.\n");
#endif
    watchdog_usage();
    options_usage_exit_status();
}

/* With MPI, ranks other than 0 parse with stderr muted: the flags are the same on every
 * rank, so rank 0 alone prints options_die()'s one-line error; every rank exits 2. */
static void parse_options(cuda_options *o, int argc, char **argv) {
    options_defaults(&o->common);
    o->kernel = KERNEL_TILED;
    o->tile = 16;
    o->graph = 0;
#ifdef USE_MPI
    int saved = -1;
    if (rank != 0) {
        fflush(stderr);
        saved = dup(2);
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull) { dup2(fileno(devnull), 2); fclose(devnull); }
    }
#endif
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { if (rank == 0) usage(); exit(0); }
        if (!strcmp(argv[i], "--list-variants")) { if (rank == 0) list_variants(); exit(0); }
        if (!strcmp(argv[i], "--kernel")) {
            const char *v = options_value(PROGRAM, argc, argv, &i);
            int k = -1;
            for (int n = 0; n < N_CUDA_VARIANT && k < 0; n++) if (!strcmp(v, CUDA_VARIANT[n].value)) k = CUDA_VARIANT[n].kernel;
            if (k < 0) options_die(PROGRAM, "--kernel: unknown kernel '%s' (naive, tiled, cublas)", v);
#ifdef CUDA_EMU
            if (k == KERNEL_CUBLAS)
                options_die(PROGRAM, "--kernel cublas: the CPU emulation build has no cuBLAS (use naive or tiled here, "
                                     "or cuda/cuda, built by nvcc, on a GPU)");
#endif
            o->kernel = k;
            continue;
        }
        if (!strcmp(argv[i], "--tile")) {
            const char *v = options_value(PROGRAM, argc, argv, &i);
            if (strcmp(v, "16") && strcmp(v, "32")) options_die(PROGRAM, "--tile: '%s' is not 16 or 32", v);
            o->tile = atoi(v);
            continue;
        }
        if (!strcmp(argv[i], "--graph")) { o->graph = 1; continue; }
        if (watchdog_parse(PROGRAM, argc, argv, &i)) continue;
        if (options_parse_common(&o->common, PROGRAM, argc, argv, &i)) continue;
        options_die(PROGRAM, "unknown option '%s'", argv[i]);
    }
    /* checkpoints are the CPU trainers' (common/checkpoint.h); the GPU's state is not saved */
    if (o->common.checkpoint || o->common.resume || o->common.checkpoint_every)
        options_die(PROGRAM, "%s: cuda does not checkpoint (the CPU trainers do)",
                    o->common.resume ? "--resume" : o->common.checkpoint ? "--checkpoint" : "--checkpoint-every");
    char err[160];
    if (schedule_check_flags(&o->common, err, sizeof err)) options_die(PROGRAM, "%s", err);
    if (o->graph && o->common.warmup_epochs > 0)   /* a graph replays one epoch's arguments */
        options_die(PROGRAM, "--graph: the epoch is captured once with one rate per step; warm-up changes them every "
                             "epoch (leave --warmup-epochs out)");
#ifdef USE_MPI
    /* every step copies the gradient sums to the host and calls MPI_Allreduce: host work
     * between the launches, which a graph cannot hold */
    if (o->graph)
        options_die(PROGRAM, "--graph: the MPI build exchanges the gradients through the host every step, "
                             "which a CUDA graph cannot capture (use cuda/cuda for --graph)");
#endif
#ifdef USE_MPI
    if (saved >= 0) { fflush(stderr); dup2(saved, 2); close(saved); }
#endif
}

/* An error every rank detects alike (a flag against the data): rank 0 prints it as
 * options_die() would, every rank exits 2. */
static void die_all(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_all(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rank == 0) options_die(PROGRAM, "%s", msg);
    exit(2);
}

// ----------------------------------------------------------------------------
// matrix products: C[M x N] (=|+=) alpha * op(A) . op(B), then an epilogue
//
// op(A)[i][k] = A[i * a_row + k * a_col] and op(B)[k][j] = B[k * b_row + j * b_col]:
// row-major is (ld, 1), the transpose of a row-major matrix is (1, ld). The epilogue is
// serial's, applied where the element of C is computed:
//   accumulate  C = fmaf(alpha, acc, C) (the SGD update), else C = alpha * acc
//   bias        + bias[j]                                  (forward)
//   act         relu / leaky-relu / sigmoid of the result  (forward; serial applies
//               sigmoid in a separate pass: the same float operations)
//   deriv       times act'(H[i][j]) where H has C's shape and ldc (backward)

enum { ACT_NONE = -1 };

typedef struct {
    float alpha;
    int accumulate;
    const float *bias;
    int act;                    /* ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_SIGMOID */
    const float *deriv;         /* activations whose derivative multiplies the result */
    int deriv_act;
} epilogue;

static const epilogue EPI_PLAIN = { 1.0f, 0, NULL, ACT_NONE, NULL, ACT_NONE };

/* serial's epilogue_one, plus its sigmoid_inplace as act == ACT_SIGMOID */
__device__ static inline float epilogue_one(const epilogue &e, float acc, float c_old, int j, float h) {
    float v = e.accumulate ? fmaf(e.alpha, acc, c_old) : e.alpha * acc;
    if (e.bias) v += e.bias[j];
    if (e.act == ACT_RELU) v = v > 0.0f ? v : 0.0f;
    else if (e.act == ACT_LEAKY_RELU) v = v > 0.0f ? v : LEAKY_RELU_SLOPE * v;
    else if (e.act == ACT_SIGMOID) v = 1.0f / (1.0f + expf(-v));
    if (e.deriv) {
        if (e.deriv_act == ACT_RELU) v = h > 0.0f ? v : 0.0f;
        else if (e.deriv_act == ACT_LEAKY_RELU) v = h > 0.0f ? v : LEAKY_RELU_SLOPE * v;
        else if (e.deriv_act == ACT_SIGMOID) v = v * (h * (1.0f - h));
    }
    return v;
}

__device__ static inline void store_result(float *C, int ldc, int i, int j, float acc, const epilogue &e) {
    long at = (long)i * ldc + j;
    C[at] = epilogue_one(e, acc, e.accumulate ? C[at] : 0.0f, j, e.deriv ? e.deriv[at] : 0.0f);
}

/* naive: thread (i, j) reads row i of op(A) and column j of op(B) from global memory,
 * 2K loads for 2K FLOP; neighbouring threads share nothing except through the caches. */
__global__ void __launch_bounds__(16 * 16) matmul_naive(int M, int N, int K, const float *__restrict__ A, int a_row, int a_col,
                             const float *__restrict__ B, int b_row, int b_col, float *C, int ldc, epilogue e) {
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M || j >= N) return;
    const float *a = A + (long)i * a_row, *b = B + (long)j * b_col;
    float acc = 0.0f;
    for (int k = 0; k < K; k++, a += a_col, b += b_row) acc = fmaf(*a, *b, acc);
    store_result(C, ldc, i, j, acc, e);
}

/* tiled: a TILE x TILE block of threads computes one TILE x TILE tile of C. For each
 * step of K it loads one TILE x TILE tile of op(A) and one of op(B) into shared memory
 * (each thread loads one element of each), then every thread reads a row of the A tile
 * and a column of the B tile from there: each global element is loaded once per block
 * instead of once per thread, TILE times less global traffic than naive.
 * Coalescing: the thread that loads an element is chosen so that threads with
 * consecutive threadIdx.x read consecutive addresses, for plain and transposed operands
 * alike (a transposed tile is stored transposed; the +1 column keeps those stores free
 * of shared-memory bank conflicts).
 * Two barriers per step: the first so that the tiles are complete before anyone reads
 * them, the second so that nobody overwrites them with the next step's tiles while
 * others are still reading (-DBUG_DROP_SECOND_SYNC removes it, to prove that the
 * emulation test catches the race). The last step may be a partial tile: its products
 * stop at K (no padded zero terms), so the sum is serial's fmaf chain exactly. */
template <int TILE>
__global__ void __launch_bounds__(TILE * TILE) matmul_tiled(int M, int N, int K, const float *__restrict__ A, int a_row, int a_col,
                             const float *__restrict__ B, int b_row, int b_col, float *C, int ldc, epilogue e) {
    __shared__ float As[TILE][TILE + 1];   /* As[r][k]: rows of this block's C tile, a step of K */
    __shared__ float Bs[TILE][TILE + 1];   /* Bs[k][c] */
    int tx = threadIdx.x, ty = threadIdx.y;
    int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    /* the element of each tile this thread loads: (ar, ak) of A, (bk, bc) of B */
    int a_plain = a_col == 1, b_plain = b_col == 1;
    int ar = a_plain ? ty : tx, ak = a_plain ? tx : ty;
    int bk = b_plain ? ty : tx, bc = b_plain ? tx : ty;
    int a_i = row0 + ar, b_j = col0 + bc;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ar][ak] = a_i < M && k0 + ak < K ? A[(long)a_i * a_row + (long)(k0 + ak) * a_col] : 0.0f;
        Bs[bk][bc] = b_j < N && k0 + bk < K ? B[(long)(k0 + bk) * b_row + (long)b_j * b_col] : 0.0f;
        __syncthreads();
        if (K - k0 >= TILE) {
            UNROLL
            for (int k = 0; k < TILE; k++) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        } else {
            for (int k = 0; k < K - k0; k++) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        }
#ifndef BUG_DROP_SECOND_SYNC
        __syncthreads();
#endif
    }
    int i = row0 + ty, j = col0 + tx;
    if (i < M && j < N) store_result(C, ldc, i, j, acc, e);
}

/* the epilogue alone, after cuBLAS (as serial's matmul_blas does after cblas_sgemm) */
__global__ void __launch_bounds__(THREADS) epilogue_kernel(int M, int N, float *C, int ldc, epilogue e) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)M * N) return;
    int i = (int)(idx / N), j = (int)(idx % N);
    store_result(C, ldc, i, j, C[(long)i * ldc + j], e);
}

static int kernel_kind = KERNEL_TILED, tile_side = 16;
#ifndef CUDA_EMU
static cublasHandle_t cublas;

static void cublas_check(cublasStatus_t rc, const char *call, int line) {
    if (rc == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, PROGRAM ": %s (cuda.cu:%d): %s\n", call, line, cublasGetStatusString(rc));
    fatal(1);
}
#define CUBLAS(call) cublas_check((call), #call, __LINE__)

/* cuBLAS is column-major: the row-major C = op(A) op(B) is the column-major
 * C^T = op(B)^T op(A)^T. A row-major operand (x, 1) read column-major is its transpose
 * (no op, leading dimension x); a transposed one (1, x) is the matrix itself (op T).
 * A matrix one element wide has both strides 1: it is read the way whose leading
 * dimension cuBLAS accepts (at least the rows of the column-major matrix). */
static void matmul_cublas(int M, int N, int K, const float *A, int a_row, int a_col,
                          const float *B, int b_row, int b_col, float *C, int ldc, const epilogue *e) {
    int a_plain = a_col == 1 && a_row >= (K > 1 ? K : 1), b_plain = b_col == 1 && b_row >= (N > 1 ? N : 1);
    cublasOperation_t op_a = a_plain ? CUBLAS_OP_N : CUBLAS_OP_T, op_b = b_plain ? CUBLAS_OP_N : CUBLAS_OP_T;
    int lda = a_plain ? a_row : a_col, ldb = b_plain ? b_row : b_col;
    int plain_update = e->accumulate && !e->bias && e->act == ACT_NONE && !e->deriv;
    if (e->accumulate && !plain_update) { fprintf(stderr, PROGRAM ": internal error: unsupported cuBLAS epilogue\n"); fatal(1); }
    float alpha = e->alpha, beta = plain_update ? 1.0f : 0.0f;
    CUBLAS(cublasSgemm(cublas, op_b, op_a, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
    if (plain_update || (!e->bias && e->act == ACT_NONE && !e->deriv)) return;
    epilogue rest = *e;
    rest.alpha = 1.0f;
    LAUNCH(epilogue_kernel, blocks_for((long)M * N, THREADS), THREADS, M, N, C, ldc, rest);
}
#endif

static void matmul(int M, int N, int K, const float *A, int a_row, int a_col,
                   const float *B, int b_row, int b_col, float *C, int ldc, const epilogue *e) {
    if (M == 0 || N == 0) return;   /* an MPI rank's empty part of a short last batch */
    if (kernel_kind == KERNEL_NAIVE) {
        dim3 block(16, 16), grid(blocks_for(N, 16), blocks_for(M, 16));   /* __launch_bounds__(16 * 16) */
        LAUNCH(matmul_naive, grid, block, M, N, K, A, a_row, a_col, B, b_row, b_col, C, ldc, *e);
    } else if (kernel_kind == KERNEL_TILED && tile_side == 16) {
        dim3 block(16, 16), grid(blocks_for(N, 16), blocks_for(M, 16));
        LAUNCH(matmul_tiled<16>, grid, block, M, N, K, A, a_row, a_col, B, b_row, b_col, C, ldc, *e);
    } else if (kernel_kind == KERNEL_TILED) {
        dim3 block(32, 32), grid(blocks_for(N, 32), blocks_for(M, 32));
        LAUNCH(matmul_tiled<32>, grid, block, M, N, K, A, a_row, a_col, B, b_row, b_col, C, ldc, *e);
    } else {
#ifndef CUDA_EMU
        matmul_cublas(M, N, K, A, a_row, a_col, B, b_row, b_col, C, ldc, e);
#endif
    }
}

// ----------------------------------------------------------------------------
// model: one contiguous parameter buffer with per-layer views, in device memory
//
// Layer l (1..L) maps size[l-1] inputs to size[l] outputs: W[l] is size[l-1] x size[l]
// row-major (so the forward product is act[l-1] . W[l]), b[l] has size[l] entries.

typedef struct {
    int n_layers;                 /* L: hidden layers + output layer */
    int size[MAX_LAYERS + 1];     /* size[0] = inputs, size[L] = 10 classes */
    int activation;               /* of the hidden layers */
    long n_params;                /* trainable parameters */
    long params_alloc;            /* floats in params, with padding that aligns each view */
    float *params;                /* device: all W and b, layer by layer: W1 b1 W2 b2 ... */
    float *W[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];
    float *grad;                  /* device (MPI): gradient sums, laid out like params */
    float *gW[MAX_LAYERS + 1], *gb[MAX_LAYERS + 1];
    float *host_params;           /* host copy: the initial values; the MPI staging buffer */
    /* device work buffers, sized for max_rows samples */
    int max_rows;
    float *act[MAX_LAYERS + 1];   /* act[0] = input batch, act[L] = logits, then dZ of the output */
    float *delta[MAX_LAYERS + 1]; /* dL/dZ of hidden layer l (1..L-1; the output layer's is
                                     act[L], the input has none: delta[0], delta[L] NULL) */
    unsigned char *batch_y;       /* labels of the batch */
    double *row_loss;             /* per row of a batch: -log p_y */
    int *row_correct;             /* per row: argmax == label */
    double *loss_sum;             /* the epoch's summed loss (one double) */
    long long *correct_sum;       /* the epoch's correct predictions */
} mlp;

#define PAD16(n) (((n) + 15L) / 16 * 16)   /* floats: keep each view 64-byte aligned */

static float *device_floats(long n) {
    float *p = NULL;
    CUDA(cudaMalloc((void **)&p, sizeof(float) * (size_t)(n > 0 ? n : 1)));
    return p;
}

/* The initial weights come from common/prng.h on the host (bit-identical to serial's)
 * and go up once; the padding stays zero. */
static int mlp_init(mlp *m, int inputs, const train_options *o, int max_rows, int with_grad) {
    memset(m, 0, sizeof *m);
    m->n_layers = o->n_hidden + 1;
    m->size[0] = inputs;
    for (int l = 1; l <= o->n_hidden; l++) m->size[l] = o->hidden[l - 1];
    m->size[m->n_layers] = IDX_CLASSES;
    m->activation = o->activation;
    m->max_rows = max_rows;
    for (int l = 1; l <= m->n_layers; l++) {
        m->n_params += (long)m->size[l - 1] * m->size[l] + m->size[l];
        m->params_alloc += PAD16((long)m->size[l - 1] * m->size[l]) + PAD16(m->size[l]);
    }
    m->host_params = (float *)calloc((size_t)m->params_alloc, sizeof(float));
    if (!m->host_params) return -1;
    m->params = device_floats(m->params_alloc);
    if (with_grad) {
        m->grad = device_floats(m->params_alloc);
        CUDA(cudaMemset(m->grad, 0, sizeof(float) * (size_t)m->params_alloc));
    }
    long off = 0;
    for (int l = 1; l <= m->n_layers; l++) {
        prng_init_dense(m->host_params + off, m->size[l - 1], m->size[l], l, l == m->n_layers, o->seed);
        m->W[l] = m->params + off;
        if (m->grad) m->gW[l] = m->grad + off;
        off += PAD16((long)m->size[l - 1] * m->size[l]);
        m->b[l] = m->params + off;   /* biases start at zero (calloc) */
        if (m->grad) m->gb[l] = m->grad + off;
        off += PAD16(m->size[l]);
    }
    CUDA(cudaMemcpy(m->params, m->host_params, sizeof(float) * (size_t)m->params_alloc, cudaMemcpyHostToDevice));
    for (int l = 0; l <= m->n_layers; l++) m->act[l] = device_floats((long)max_rows * m->size[l]);
    for (int l = 1; l < m->n_layers; l++) m->delta[l] = device_floats((long)max_rows * m->size[l]);
    CUDA(cudaMalloc((void **)&m->batch_y, (size_t)max_rows));
    CUDA(cudaMalloc((void **)&m->row_loss, sizeof(double) * (size_t)max_rows));
    CUDA(cudaMalloc((void **)&m->row_correct, sizeof(int) * (size_t)max_rows));
    CUDA(cudaMalloc((void **)&m->loss_sum, sizeof(double)));
    CUDA(cudaMalloc((void **)&m->correct_sum, sizeof(long long)));
    return 0;
}

static void mlp_free(mlp *m) {
    CUDA(cudaFree(m->params));
    if (m->grad) CUDA(cudaFree(m->grad));
    for (int l = 0; l <= m->n_layers; l++) CUDA(cudaFree(m->act[l]));
    for (int l = 1; l < m->n_layers; l++) CUDA(cudaFree(m->delta[l]));
    CUDA(cudaFree(m->batch_y)); CUDA(cudaFree(m->row_loss)); CUDA(cudaFree(m->row_correct));
    CUDA(cudaFree(m->loss_sum)); CUDA(cudaFree(m->correct_sum));
    free(m->host_params);
}

// ----------------------------------------------------------------------------
// forward

/* act[l] = activation(input . W[l] + b[l]); the last layer leaves logits. input is
 * act[l-1], or for layer 1 any device matrix of rows x size[0] (the test set). */
static void dense_forward(mlp *m, int l, const float *input, int rows) {
    int in = m->size[l - 1], out = m->size[l];
    epilogue e = EPI_PLAIN;
    e.bias = m->b[l];
    if (l < m->n_layers) e.act = m->activation;
    matmul(rows, out, in, input, in, 1, m->W[l], out, 1, m->act[l], out, &e);
}

static void mlp_forward(mlp *m, const float *input, int rows) {
    for (int l = 1; l <= m->n_layers; l++)
        TRACE(TRACE_COMPUTE, trace_layer("forward", l)) dense_forward(m, l, l == 1 ? input : m->act[l - 1], rows);
}

/* Softmax + cross-entropy, one thread per row, serial's softmax_xent line for line:
 * leaves dL/dlogits = p - onehot in z, the row's -log p_y and whether argmax == y. */
__global__ void __launch_bounds__(THREADS) softmax_xent_kernel(float *z, const unsigned char *y, int rows, int classes,
                                    double *row_loss, int *row_correct) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    float *zi = z + (long)i * classes;
    int best = 0;
    float mx = zi[0];
    for (int c = 1; c < classes; c++) if (zi[c] > mx) { mx = zi[c]; best = c; }
    float zy = zi[y[i]] - mx;
    float sum = 0.0f;
    for (int c = 0; c < classes; c++) { zi[c] = expf(zi[c] - mx); sum += zi[c]; }
    /* -log p_y = log(sum) - (z_y - max): finite even when p_y underflows */
    row_loss[i] = (double)logf(sum) - (double)zy;
    float inv = 1.0f / sum;
    for (int c = 0; c < classes; c++) zi[c] *= inv;
    zi[y[i]] -= 1.0f;
    row_correct[i] = best == y[i];
}

/* One thread adds the batch's row losses in row order (serial's order: the batch sum
 * from zero, then into the epoch's sum), so the loss is deterministic. */
__global__ void __launch_bounds__(1) loss_sum_kernel(const double *row_loss, const int *row_correct, int rows,
                                double *loss_sum, long long *correct_sum) {
    double batch = 0.0;
    long long correct = 0;
    for (int i = 0; i < rows; i++) { batch += row_loss[i]; correct += row_correct[i]; }
    *loss_sum += batch;
    *correct_sum += correct;
}

// ----------------------------------------------------------------------------
// backward + update (fused: the weight gradient product adds -lr/B * A^T dZ into W;
// with MPI the plain sums go into grad, to be exchanged first)

/* bias gradient: one thread per column sums dz over the rows in order (serial's loop),
 * then b = fmaf(scale, sum, b), or (update == 0) gb = sum */
__global__ void __launch_bounds__(THREADS) bias_grad_kernel(const float *dz, int rows, int out, float scale, int update, float *b, float *gb) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= out) return;
    float s = 0.0f;
    for (int i = 0; i < rows; i++) s += dz[(long)i * out + j];
    if (update) b[j] = fmaf(scale, s, b[j]);
    else gb[j] = s;
}

/* Layer l with dZ (dL/d pre-activation) in dz: first the gradient for the layer below
 * (needs the old W), then W and b updated in place (update), or their gradient sums
 * stored in gW, gb (MPI). The launches run in this order on the device. */
static void dense_backward(mlp *m, int l, const float *dz, int rows, float scale, int update) {
    int in = m->size[l - 1], out = m->size[l];
    if (l > 1) {
        /* delta[l-1] = (dz . W^T) * act'(act[l-1]) */
        epilogue e = EPI_PLAIN;
        e.deriv = m->act[l - 1];
        e.deriv_act = m->activation;
        matmul(rows, in, out, dz, out, 1, m->W[l], 1, out, m->delta[l - 1], in, &e);
    }
    /* W += scale * act[l-1]^T . dz   (scale = -lr / B), or gW = act[l-1]^T . dz */
    epilogue u = EPI_PLAIN;
    if (update) { u.alpha = scale; u.accumulate = 1; }
    matmul(in, out, rows, m->act[l - 1], 1, in, dz, out, 1, update ? m->W[l] : m->gW[l], out, &u);
    LAUNCH(bias_grad_kernel, blocks_for(out, THREADS), THREADS, dz, rows, out, scale, update, m->b[l], m->gb[l]);
}

static void exchange_and_update(mlp *m, float scale);

/* One SGD step on the rows already in act[0] (batch_y) of a global batch of batch_rows
 * rows; the loss and correct counts are added to the device's epoch sums. */
static void train_step(mlp *m, int rows, int batch_rows, float lr) {
    int L = m->n_layers;
    float scale = -lr / (float)batch_rows;
    int update = m->grad == NULL;   /* without MPI: serial's fused update */
    if (rows > 0) {
        mlp_forward(m, m->act[0], rows);
        TRACE(TRACE_COMPUTE, "loss") {
            LAUNCH(softmax_xent_kernel, blocks_for(rows, THREADS), THREADS, m->act[L], m->batch_y, rows, m->size[L],
                   m->row_loss, m->row_correct);
            LAUNCH(loss_sum_kernel, 1, 1, m->row_loss, m->row_correct, rows, m->loss_sum, m->correct_sum);
        }
    }
    TRACE(TRACE_COMPUTE, trace_layer("backward", L)) dense_backward(m, L, m->act[L], rows, scale, update);
    for (int l = L - 1; l >= 1; l--)
        TRACE(TRACE_COMPUTE, trace_layer("backward", l)) dense_backward(m, l, m->delta[l], rows, scale, update);
    if (!update) exchange_and_update(m, scale);
}

// ----------------------------------------------------------------------------
// communication (MPI build): host-staged gradients, MPI_Allreduce; every call checked

static double comm_seconds;      /* inside MPI calls during training, since the last reset */

__global__ void __launch_bounds__(THREADS) sgd_update_kernel(float *p, const float *g, long n, float scale) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = fmaf(scale, g[i], p[i]);
}

#ifdef USE_MPI
/* A failed MPI call: one line naming the rank, the call and MPI's message, then the whole
 * job ends (MPI_Abort), so no rank waits forever in a collective. */
static void mpi_check(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error code %d", rc);
    fprintf(stderr, PROGRAM ": rank %d: %s failed: %s\n", rank, call, msg);
    fatal(1);
}
/* COMM(MPI_Allreduce, (args)): call, check, add the seconds to comm_seconds */
#define COMM(fn, args) do { double t_ = timer_now(); TRACE(trace_mpi_cat(#fn), #fn) mpi_check(fn args, #fn); \
                            comm_seconds += timer_now() - t_; } while (0)

/* Set-up errors: if any rank failed, the lowest failing rank prints its one-line message
 * and every rank exits with the status. */
static void agree_or_die(int failed, const char *msg, int status) {
    int mine = failed ? rank : nranks, lowest = nranks;
    mpi_check(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (lowest == nranks) return;
    if (rank == lowest) fprintf(stderr, PROGRAM ": %s\n", msg);
    exit(status);
}

/* After backward: gradients device -> host, summed over the ranks, host -> device, and
 * every rank applies serial's update to its replica. */
static void exchange_and_update(mlp *m, float scale) {
    size_t bytes = sizeof(float) * (size_t)m->params_alloc;
    /* the first copy waits for the device's queued backward, then moves the gradient */
    TRACE(TRACE_COMM, "cudaMemcpy D2H") CUDA(cudaMemcpy(m->host_params, m->grad, bytes, cudaMemcpyDeviceToHost));
    COMM(MPI_Allreduce, (MPI_IN_PLACE, m->host_params, (int)m->params_alloc, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    TRACE(TRACE_COMM, "cudaMemcpy H2D") CUDA(cudaMemcpy(m->grad, m->host_params, bytes, cudaMemcpyHostToDevice));
    TRACE(TRACE_UPDATE, "update")
        LAUNCH(sgd_update_kernel, blocks_for(m->params_alloc, THREADS), THREADS, m->params, m->grad, m->params_alloc, scale);
}
#else
static void agree_or_die(int failed, const char *msg, int status) {
    if (!failed) return;
    fprintf(stderr, PROGRAM ": %s\n", msg);
    exit(status);
}
/* one process: its gradient sums are the totals (unused: this build fuses the update) */
static void exchange_and_update(mlp *m, float scale) {
    LAUNCH(sgd_update_kernel, blocks_for(m->params_alloc, THREADS), THREADS, m->params, m->grad, m->params_alloc, scale);
}
#endif

// ----------------------------------------------------------------------------
// data movement and evaluation

/* x[r] = X[order[r]], y[r] = Y[order[r]] for the rows of a batch: one thread per float */
__global__ void __launch_bounds__(THREADS) gather_kernel(const float *X, const unsigned char *Y, const uint32_t *order, int rows,
                              int features, float *x, unsigned char *y) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long)rows * features) return;
    int r = (int)(idx / features), f = (int)(idx % features);
    long src = (long)order[r];
    x[idx] = X[src * features + f];
    if (f == 0) y[r] = Y[src];
}

__global__ void __launch_bounds__(THREADS) argmax_kernel(const float *z, int rows, int classes, unsigned char *pred) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const float *zi = z + (long)i * classes;
    int best = 0;
    for (int c = 1; c < classes; c++) if (zi[c] > zi[best]) best = c;
    pred[i] = (unsigned char)best;
}

/* The data set in device memory as floats (the evaluation reads them in place), uploaded
 * once. */
typedef struct {
    long n;
    int features;
    float *x;              /* n x features */
    unsigned char *y;
} device_data;

static void upload(const dataset *d, device_data *g) {
    g->n = d->n;
    g->features = d->features;
    g->x = device_floats(d->n * d->features);
    CUDA(cudaMalloc((void **)&g->y, (size_t)(d->n > 0 ? d->n : 1)));
    if (d->n == 0) return;   /* an MPI rank without test samples */
    /* the floats the CPU trainers compute with (common/data.h), through a host buffer of
     * 1024 samples */
    long per = d->n < 1024 ? d->n : 1024;
    float *buf = (float *)malloc(sizeof(float) * (size_t)per * (size_t)d->features);
    if (!buf) { fprintf(stderr, PROGRAM ": out of memory for a %ld-sample upload buffer\n", per); exit(1); }
    for (long s = 0; s < d->n; s += per) {
        int n = (int)(d->n - s < per ? d->n - s : per);
        dataset_rows(d, NULL, s, n, buf);
        CUDA(cudaMemcpy(g->x + s * d->features, buf, sizeof(float) * (size_t)n * (size_t)d->features,
                        cudaMemcpyHostToDevice));
    }
    free(buf);
    CUDA(cudaMemcpy(g->y, d->y, (size_t)d->n, cudaMemcpyHostToDevice));
}

static void device_data_free(device_data *g) { CUDA(cudaFree(g->x)); CUDA(cudaFree(g->y)); }

/* Correct predictions on the samples of d (host labels in h, data in g), predictions
 * of every sample into pred (host); the forward pass reads the device copy in place. */
static long evaluate(mlp *m, const device_data *g, const dataset *h, unsigned char *dev_pred, unsigned char *pred) {
    int L = m->n_layers, classes = m->size[L];
    for (long start = 0; start < g->n; start += m->max_rows) {
        int rows = (int)(g->n - start < m->max_rows ? g->n - start : m->max_rows);
        watchdog_beat();
        mlp_forward(m, g->x + start * g->features, rows);
        LAUNCH(argmax_kernel, blocks_for(rows, THREADS), THREADS, m->act[L], rows, classes, dev_pred + start);
    }
    if (g->n > 0) CUDA(cudaMemcpy(pred, dev_pred, (size_t)g->n, cudaMemcpyDeviceToHost));
    long correct = 0;
    for (long i = 0; i < h->n; i++) correct += pred[i] == h->y[i];
    return correct;
}

/* One epoch's launches: per mini-batch the gather of this rank's rows (the sample order
 * is read from dev_order, uploaded before) and the step. The same launches every epoch,
 * the same arguments: only dev_order's contents change, which is what lets --graph
 * capture them once. */
static void epoch_launches(mlp *m, const device_data *d, const uint32_t *dev_order, long train_n,
                           const train_options *o, int epoch) {
    long batch = o->batch;
    for (long start = 0; start < train_n; start += batch) {
        double t_step = trace_step_begin(epoch);
        int rows = (int)(train_n - start < batch ? train_n - start : batch);
        long lo, count;   /* this rank's rows of the global batch */
        shard(rows, rank, nranks, &lo, &count);
        watchdog_progress(epoch, start / batch + 1);
        if (count > 0)
            TRACE(TRACE_DATA, "batch")
                LAUNCH(gather_kernel, blocks_for(count * d->features, THREADS), THREADS, d->x, d->y,
                       dev_order + start + lo, (int)count, d->features, m->act[0], m->batch_y);
        train_step(m, (int)count, rows, lr_at(o, epoch, start / batch, steps_per_epoch(o, train_n)));
        trace_step_end(t_step);
    }
}

/* --graph: epoch_launches captured once on work_stream (global mode: a synchronising call
 * slipped into them fails the capture instead of going unnoticed) and instantiated. */
static cudaGraphExec_t capture_epoch(mlp *m, const device_data *d, const uint32_t *dev_order, long train_n,
                                     const train_options *o) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA(cudaStreamBeginCapture(work_stream, cudaStreamCaptureModeGlobal));
    epoch_launches(m, d, dev_order, train_n, o, 1);
    CUDA(cudaStreamEndCapture(work_stream, &graph));
    CUDA(cudaGraphInstantiate(&exec, graph, 0));
    CUDA(cudaGraphDestroy(graph));
    return exec;
}

#ifdef USE_MPI
/* FNV-1a of the parameter bytes: equal on every rank iff the replicas are identical */
static uint64_t params_hash(const mlp *m) {
    CUDA(cudaMemcpy(m->host_params, m->params, sizeof(float) * (size_t)m->params_alloc, cudaMemcpyDeviceToHost));
    const unsigned char *p = (const unsigned char *)m->host_params;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof(float) * (size_t)m->params_alloc; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#endif

// ----------------------------------------------------------------------------
// main

/* The device of this process (with MPI: local rank modulo the node's devices). No usable
 * device: one line with the runtime's own error string, exit status 3 (every rank). */
static void device_init(cudaDeviceProp *prop) {
    int count = 0, local_rank = 0, bad = 0;
    char msg[512] = "";
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        snprintf(msg, sizeof msg, "no usable CUDA device: %s (cudaGetDeviceCount)", cudaGetErrorString(rc));
        bad = 1;
    } else if (count == 0) {
        snprintf(msg, sizeof msg, "no usable CUDA device: cudaGetDeviceCount found none");
        bad = 1;
    }
#ifdef USE_MPI
    MPI_Comm node;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    mpi_check(MPI_Comm_rank(node, &local_rank), "MPI_Comm_rank");
    mpi_check(MPI_Comm_free(&node), "MPI_Comm_free");
#endif
    agree_or_die(bad, msg, 3);
    CUDA(cudaSetDevice(local_rank % count));
    CUDA(cudaGetDeviceProperties(prop, local_rank % count));
}

#ifdef USE_MPI
/* exit() anywhere (bad flags on every rank, --help) still finalizes MPI */
static void finalize_at_exit(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Finalize();
}
#endif

#ifndef TESTING
int main(int argc, char **argv) {
    program_name = PROGRAM;
#ifdef USE_MPI
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) { fprintf(stderr, PROGRAM ": MPI_Init failed\n"); return 1; }
    atexit(finalize_at_exit);
    mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
#endif
    cuda_options co;
    parse_options(&co, argc, argv);
    train_options *o = &co.common;
    kernel_kind = co.kernel;
    tile_side = co.tile;
    char err[IDX_ERR_LEN] = "";

    /* outputs (rank 0 writes them): checked before the work, not after it */
    agree_or_die(rank == 0 && (results_check_output(o->csv, "--csv", err, sizeof err) ||
                               trace_check_output(o, NULL, err, sizeof err)), err, 2);
    agree_or_die(trace_open(o, 1, rank, 32, err, sizeof err), err, 2);

    /* the device first: without one there is nothing to do (exit 3) */
    cudaDeviceProp prop;
    device_init(&prop);

    /* data: every rank checks the files; the sizes decide the same errors on every rank */
    long train_avail = 0, test_avail = 0;
    int bad = dataset_count(o->data_dir, "train", &train_avail, err, sizeof err) ||
              dataset_count(o->data_dir, "t10k", &test_avail, err, sizeof err);
    agree_or_die(bad, err, 2);
    if (o->train_n > train_avail) die_all("--train %ld: %s holds only %ld training samples", o->train_n, o->data_dir, train_avail);
    if (o->test_n > test_avail) die_all("--test %ld: %s holds only %ld test samples", o->test_n, o->data_dir, test_avail);
    long train_n = o->train_n ? o->train_n : train_avail;
    long test_n = o->test_n ? o->test_n : test_avail;
    if (o->batch_full) o->batch = train_n;
    if (o->batch > train_n) die_all("--batch %ld is larger than the %ld training samples", o->batch, train_n);
    if (o->batch < nranks)
        die_all( "--batch %ld is smaller than the %d ranks: every rank needs at least one row of each mini-batch", o->batch, nranks);
    long test_lo, test_count;   /* this rank's test shard (everything without MPI) */
    shard(test_n, rank, nranks, &test_lo, &test_count);
    /* before loading: the files' image sides, and whether the host memory holds the data
     * and the host copies of the parameters (the device's own memory: CUDA's errors) */
    int train_side = 0, test_side = 0;
    bad = dataset_side(o->data_dir, "train", &train_side, err, sizeof err) ||
          dataset_side(o->data_dir, "t10k", &test_side, err, sizeof err) ||
          (!o->image_size && dataset_check_sides(o->data_dir, train_side, test_side, err, sizeof err));
    agree_or_die(bad, err, 2);
    int in_side = o->image_size ? o->image_size : train_side, on_node = 1;
#ifdef USE_MPI
    MPI_Comm node;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    mpi_check(MPI_Comm_size(node, &on_node), "MPI_Comm_size");
    mpi_check(MPI_Comm_free(&node), "MPI_Comm_free");
#endif
    double need = mem_dataset_bytes(train_n + test_count, in_side, train_side) + dense_model_bytes(o, in_side * in_side, 0, 1);
    agree_or_die(mem_short(need, on_node, "data and host buffers", err, sizeof err), err, 2);
    dataset train = {}, test = {};
    bad = dataset_load(o->data_dir, "train", 0, train_n, o->image_size, &train, err, sizeof err);
    if (!bad && test_count > 0)
        bad = dataset_load(o->data_dir, "t10k", test_lo, test_count, o->image_size, &test, err, sizeof err);
    if (!bad && test_count > 0) bad = dataset_check_sides(o->data_dir, train.side, test.side, err, sizeof err);
    agree_or_die(bad, err, 2);

    /* model and device buffers: a rank holds at most ceil(B / P) rows of a batch */
    mlp m;
    long rank_rows = (o->batch + nranks - 1) / nranks;
    int max_rows = (int)(rank_rows > EVAL_BATCH ? rank_rows : EVAL_BATCH);
    uint32_t *order = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)train_n);
    unsigned char *pred = (unsigned char *)malloc((size_t)(test_count > 0 ? test_count : 1));
    double *loss_curve = (double *)malloc(sizeof(double) * (size_t)o->epochs);
    double *acc_curve = (double *)malloc(sizeof(double) * (size_t)o->epochs);
    double *epoch_sec = (double *)malloc(sizeof(double) * (size_t)o->epochs);
    double *comm_sec = (double *)malloc(sizeof(double) * (size_t)o->epochs);
    bad = !order || !pred || !loss_curve || !acc_curve || !epoch_sec || !comm_sec ||
          mlp_init(&m, train.features, o, max_rows, MPI_BUILD);
    agree_or_die(bad, "out of memory", 1);
#ifdef USE_MPI
    if (m.params_alloc > INT_MAX) die_all( "--hidden: %ld parameters are more than one MPI message can count", m.params_alloc);
#endif
    device_data dtrain, dtest;
    upload(&train, &dtrain);
    upload(&test, &dtest);
    uint32_t *dev_order;
    unsigned char *dev_pred;
    CUDA(cudaMalloc((void **)&dev_order, sizeof(uint32_t) * (size_t)train_n));
    CUDA(cudaMalloc((void **)&dev_pred, (size_t)(test_count > 0 ? test_count : 1)));
    cudaEvent_t ev_start, ev_stop;
    CUDA(cudaEventCreate(&ev_start));
    CUDA(cudaEventCreate(&ev_stop));
    if (co.graph) CUDA(cudaStreamCreate(&work_stream));   /* blocking: ordered with the legacy stream */
#ifndef CUDA_EMU
    if (kernel_kind == KERNEL_CUBLAS) {
        CUBLAS(cublasCreate(&cublas));
        CUBLAS(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));   /* FP32 products, no TF32 tensor cores */
        CUBLAS(cublasSetStream(cublas, work_stream));
    }
#endif
    char variant[64] = "";
    for (int k = 0; k < N_CUDA_VARIANT; k++)
        if (CUDA_VARIANT[k].kernel == kernel_kind && (!CUDA_VARIANT[k].tile || CUDA_VARIANT[k].tile == tile_side))
            snprintf(variant, sizeof variant, "%s%s", CUDA_VARIANT[k].name, co.graph ? "+graph" : "");
    if (rank == 0) {
        printf(PROGRAM ": %s MLP %d", options_activation_name(o->activation), m.size[0]);
        for (int l = 1; l <= m.n_layers; l++) printf("-%d", m.size[l]);
        printf(" (%ld parameters), %s: %ld train / %ld test, %dx%d, batch %ld, lr %g, seed %llu, kernel %s, ",
               m.n_params, o->data_dir, train_n, test_n, train.side, train.side, o->batch, o->lr,
               (unsigned long long)o->seed, variant);
        if (nranks > 1) printf("%d ranks x ", nranks);
        printf("%s\n", prop.name);
        fflush(stdout);
    }

    /* warm-up: one step with lr = 0 on the first rows (loads every kernel, starts
     * cuBLAS; W = fmaf(-0, g, W) leaves the weights as they are), then zero the sums */
    {
        long lo, count, rows = o->batch;
        shard(rows, rank, nranks, &lo, &count);
        for (long i = 0; i < count; i++) order[i] = (uint32_t)(lo + i);
        CUDA(cudaMemcpy(dev_order, order, sizeof(uint32_t) * (size_t)count, cudaMemcpyHostToDevice));
        if (count > 0)
            LAUNCH(gather_kernel, blocks_for(count * train.features, THREADS), THREADS, dtrain.x, dtrain.y, dev_order,
                   (int)count, train.features, m.act[0], m.batch_y);
        train_step(&m, (int)count, (int)rows, 0.0f);
        CUDA(cudaDeviceSynchronize());
    }
    /* --graph: the epoch captured once here (nothing runs); each epoch replays it */
    cudaGraphExec_t epoch_graph = co.graph ? capture_epoch(&m, &dtrain, dev_order, train_n, o) : NULL;

    /* training (--graph: one launch an epoch, no per-step host spans) */
    watchdog_start();
#ifdef USE_MPI
    trace_start_mpi();
#else
    trace_start();
#endif
    double t_start = timer_now();
    for (int epoch = 1; epoch <= o->epochs; epoch++) {
        prng_permutation(order, (uint32_t)train_n, o->seed, (uint64_t)epoch);
        CUDA(cudaMemsetAsync(m.loss_sum, 0, sizeof(double), work_stream));
        CUDA(cudaMemsetAsync(m.correct_sum, 0, sizeof(long long), work_stream));
        comm_seconds = 0.0;
        CUDA(cudaEventRecord(ev_start, work_stream));
        /* from pageable memory: returns once order is staged, so the next epoch may refill it */
        CUDA(cudaMemcpyAsync(dev_order, order, sizeof(uint32_t) * (size_t)train_n, cudaMemcpyHostToDevice, work_stream));
        if (epoch_graph) CUDA(cudaGraphLaunch(epoch_graph, work_stream));
        else epoch_launches(&m, &dtrain, dev_order, train_n, o, epoch);
        CUDA(cudaEventRecord(ev_stop, work_stream));
        CUDA(cudaEventSynchronize(ev_stop));
        float ms = 0.0f;
        CUDA(cudaEventElapsedTime(&ms, ev_start, ev_stop));
        double seconds = 1e-3 * ms, comm = comm_seconds, loss_sum = 0.0;
        long long correct = 0;
        CUDA(cudaMemcpy(&loss_sum, m.loss_sum, sizeof(double), cudaMemcpyDeviceToHost));
        CUDA(cudaMemcpy(&correct, m.correct_sum, sizeof(long long), cudaMemcpyDeviceToHost));
        long test_correct;
        trace_epoch_level(epoch);
        TRACE(TRACE_EVAL, "eval") test_correct = evaluate(&m, &dtest, &test, dev_pred, pred);
        double sum[4] = { loss_sum, (double)correct, (double)test_correct, comm }, slowest = seconds;
#ifdef USE_MPI
        /* totals over the ranks (every rank gets them, so all stop together on divergence) */
        double mine[4] = { sum[0], sum[1], sum[2], sum[3] };
        mpi_check(MPI_Allreduce(mine, sum, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        mpi_check(MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
#endif
        epoch_sec[epoch - 1] = slowest;
        comm_sec[epoch - 1] = sum[3] / nranks;
        loss_curve[epoch - 1] = sum[0] / (double)train_n;
        acc_curve[epoch - 1] = 100.0 * sum[2] / (double)test_n;
        char extra[64] = "";
        if (nranks > 1) snprintf(extra, sizeof extra, "comm %.3f s", comm_sec[epoch - 1]);
        if (results_epoch(PROGRAM, rank == 0, o->quiet, epoch, o->epochs, loss_curve[epoch - 1],
                          100.0 * sum[1] / (double)train_n, acc_curve[epoch - 1], epoch_sec[epoch - 1], train_n, extra))
            return 1;
        if (target_reached(o, epoch, acc_curve[epoch - 1])) break;   /* the same sums on every rank */
    }
    double total = timer_now() - t_start;

#ifdef USE_MPI
    /* the replicas must be bit-identical (every rank applied the same sums) */
    unsigned long long h = params_hash(&m), hmin, hmax;
    mpi_check(MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (hmin != hmax) {
        if (rank == 0) fprintf(stderr, PROGRAM ": the model replicas differ between ranks after training; no result written\n");
        return 1;
    }
#endif

    /* results: rank 0 alone */
    int status = 0;
    if (rank == 0) {
        double comm_median = results_epoch_median(comm_sec, o->epochs);
        result_row row;
        results_fill(&row, PROGRAM, variant, nranks, 1, o, train.side, train_n, test_n, dense_flops_per_sample(m.size, m.n_layers),
                     total, loss_curve, acc_curve, epoch_sec);
        row.comm_seconds = comm_median;
        if (o->predict) print_predictions(&test, pred, o->predict);   /* rank 0's shard starts at test image 0 */
        char who[64], extra[320];
        if (nranks > 1) {
            snprintf(who, sizeof who, "%d ranks, one device each", nranks);
            snprintf(extra, sizeof extra, "comm %.3f s (%.0f%%) | replicas identical", comm_median,
                     100.0 * comm_median / row.epoch_seconds_median);
        } else {
            snprintf(who, sizeof who, "1 device");
            snprintf(extra, sizeof extra, "%s", prop.name);
        }
        if (results_finish(&row, o->csv, who, extra, err, sizeof err)) {
            fprintf(stderr, PROGRAM ": %s\n", err);
            status = 1;
        }
    }

#ifdef USE_MPI
    if (trace_finish_mpi(PROGRAM, variant, o)) status = 1;
#else
    if (trace_finish(PROGRAM, variant, o, err, sizeof err)) { fprintf(stderr, PROGRAM ": %s\n", err); status = 1; }
#endif
#ifndef CUDA_EMU
    if (kernel_kind == KERNEL_CUBLAS) CUBLAS(cublasDestroy(cublas));
#endif
    if (epoch_graph) CUDA(cudaGraphExecDestroy(epoch_graph));
    if (work_stream) CUDA(cudaStreamDestroy(work_stream));
    CUDA(cudaEventDestroy(ev_start));
    CUDA(cudaEventDestroy(ev_stop));
    CUDA(cudaFree(dev_order));
    CUDA(cudaFree(dev_pred));
    device_data_free(&dtrain);
    device_data_free(&dtest);
    mlp_free(&m);
    dataset_free(&train);
    if (test_count > 0) dataset_free(&test);
    free(order); free(pred); free(loss_curve); free(acc_curve); free(epoch_sec); free(comm_sec);
    return status;
}
#endif
