/*
 * tests/test_cuda.cpp — unit tests of cuda/cuda.cu's kernels and of the CPU emulation
 * they run on here (cuda/cuda_emu.h). cuda.cu is #included with TESTING defined and
 * built by a C++ compiler, so every kernel runs through the emulator.
 *
 * The emulator: every (block, thread) runs exactly once; kernel arguments are evaluated
 * once; __shared__ is shared within a block and __syncthreads() orders it (a block
 * reversal and a tree reduction over several barriers); the same reversal without its
 * barrier gives wrong results (the schedule exposes the missing barrier); bad launch
 * configurations fail like the runtime's, and the next launch works; a thread that
 * returns while others wait at a barrier is a launch failure that stays set.
 * The kernels: naive, tiled 16 and tiled 32 against a host loop with the same fmaf
 * chain (bit-identical expected: the same operations in the same order) and against a
 * double-precision product (1e-5 relative), on sizes that are not multiples of the tiles
 * (K = 0 included), for the three operand layouts the trainer uses (forward A.W,
 * backward dZ.W^T, update A^T.dZ) with every epilogue; softmax + cross-entropy, the
 * bias gradient and the gather kernel against serial's host formulas, bit for bit.
 */
#define TESTING
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "../cuda/cuda.cu"
#include "check.h"

#include <vector>

// ----------------------------------------------------------------------------
// the emulator

__global__ void k_coverage(int *hits, int *arg_seen, int arg) {
    int b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    hits[b * blockDim.x * blockDim.y * blockDim.z + t]++;
    arg_seen[0] = arg;
}

static int arg_evaluations = 0;
static int counted_arg() { return ++arg_evaluations * 100; }

template <int SYNC>
__global__ void k_reverse(const int *in, int *out, int n) {
    __shared__ int s[256];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * n + t] + (int)blockIdx.x;
    if (SYNC) __syncthreads();
    out[blockIdx.x * n + t] = s[n - 1 - t];
}

__global__ void k_tree_sum(const float *in, float *out) {
    __shared__ float s[512];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        __syncthreads();
        if (t < half) s[t] += s[t + half];
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void k_early_exit(int *x) {
    if (threadIdx.x == 3) return;   /* a bug: the others wait for thread 3 forever */
    __syncthreads();
    x[threadIdx.x] = 1;
}

static void test_emulator(void) {
    /* coverage of a 3-D grid of 3-D blocks, arguments evaluated once */
    dim3 grid(3, 2, 2), block(5, 3, 2);
    int nb = 12, nt = 30;
    std::vector<int> hits(nb * nt, 0);
    int seen = 0;
    emu::launch("k_coverage", grid, block, k_coverage, hits.data(), &seen, counted_arg());
    int ok = cudaGetLastError() == cudaSuccess;
    for (int h : hits) ok &= h == 1;
    CHECK("emulator: every thread of every block runs exactly once (3-D grid and blocks)", ok, "hits not all 1");
    CHECK("emulator: kernel arguments are evaluated once per launch", arg_evaluations == 1 && seen == 100,
          "%d evaluations, kernel saw %d", arg_evaluations, seen);

    /* shared memory + barrier: reverse each block of 256 values */
    int n = 256, blocks = 3;
    std::vector<int> in(n * blocks), out(n * blocks), want(n * blocks);
    for (int i = 0; i < n * blocks; i++) in[i] = i * 7 + 1;
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < n; t++) want[b * n + t] = in[b * n + n - 1 - t] + b;
    LAUNCH(k_reverse<1>, blocks, n, in.data(), out.data(), n);
    CHECK("emulator: __shared__ is per block, __syncthreads() orders it (block reversal)", out == want,
          "reversed values differ");
    LAUNCH(k_reverse<0>, blocks, n, in.data(), out.data(), n);
    int wrong = 0;
    for (int i = 0; i < n * blocks; i++) wrong += out[i] != want[i];
    CHECK("emulator: the same reversal without its barrier gives wrong results (race exposed)", wrong > 0,
          "all %d values right: the schedule hid the missing barrier", n * blocks);

    /* a tree reduction: 9 barriers per block, results exact for small integers */
    std::vector<float> v(512 * 2), sums(2);
    for (int i = 0; i < 1024; i++) v[i] = (float)(i % 13);
    LAUNCH(k_tree_sum, 2, 512, v.data(), sums.data());
    double w0 = 0, w1 = 0;
    for (int i = 0; i < 512; i++) { w0 += v[i]; w1 += v[512 + i]; }
    CHECK("emulator: tree reduction over 9 barriers", sums[0] == w0 && sums[1] == w1,
          "got %g %g, want %g %g", sums[0], sums[1], w0, w1);

    /* bad configurations fail like the runtime's, and are not sticky */
    emu::launch("k_coverage", dim3(1), dim3(33, 32), k_coverage, hits.data(), &seen, 0);
    cudaError_t e1 = cudaGetLastError();
    emu::launch("k_coverage", dim3(0), dim3(32), k_coverage, hits.data(), &seen, 0);
    cudaError_t e2 = cudaGetLastError();
    emu::launch("k_coverage", dim3(1), dim3(4), k_coverage, hits.data(), &seen, 0);
    cudaError_t e3 = cudaGetLastError();
    CHECK("emulator: 1056 threads per block and an empty grid are invalid configurations; the next launch works",
          e1 == cudaErrorInvalidConfiguration && e2 == cudaErrorInvalidConfiguration && e3 == cudaSuccess,
          "got %s / %s / %s", cudaGetErrorString(e1), cudaGetErrorString(e2), cudaGetErrorString(e3));

    /* events */
    cudaEvent_t a = nullptr, b = nullptr;
    float ms = -1;
    int ev_ok = cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess &&
                cudaEventRecord(a) == cudaSuccess && cudaEventRecord(b) == cudaSuccess &&
                cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
    CHECK("emulator: events record and measure elapsed time", ev_ok && ms >= 0, "ms %g", ms);
    cudaEventDestroy(a); cudaEventDestroy(b);
}

/* last: the failure is sticky, as a kernel fault is on a GPU */
static void test_barrier_mismatch(void) {
    int x[8] = {0};
    printf("(expected: the emulator reports the next launch on stderr)\n");
    fflush(stdout);
    emu::launch("k_early_exit", dim3(1), dim3(8), k_early_exit, x);
    cudaError_t e1 = cudaGetLastError();
    cudaError_t e2 = cudaMemcpy(x, x, sizeof x, cudaMemcpyDeviceToDevice);
    CHECK("emulator: a thread returning while others wait at __syncthreads() fails the launch, and it sticks",
          e1 == cudaErrorLaunchFailure && e2 == cudaErrorLaunchFailure, "got %s, then %s",
          cudaGetErrorString(e1), cudaGetErrorString(e2));
}

// ----------------------------------------------------------------------------
// the trainer's kernels

static void fill(float *x, long n, uint64_t seed) {
    prng r;
    prng_init(&r, seed, 11);
    for (long i = 0; i < n; i++) x[i] = (float)(2.0 * prng_uniform(&r) - 1.0);
}

enum { FORWARD, BACKWARD, UPDATE };
static const char *const LAYOUT_NAMES[] = { "forward A.W (bias+act)", "backward dZ.W^T (deriv)", "update A^T.dZ (W += alpha*)" };

/* One product C = op(A) op(B) with the epilogue of the layout, by the kernel selected in
 * kernel_kind/tile_side; compared with the host fmaf chain (exact) and double (1e-5). */
static int run_product(int layout, int M, int N, int K, int act, double *worst_double) {
    long na = (long)M * K, nb = (long)K * N, nc = (long)M * N;
    std::vector<float> A(na + 1), B(nb + 1), C(nc + 1), H(nc + 1), bias(N + 1), want(nc + 1);
    fill(A.data(), na, 1 + M); fill(B.data(), nb, 2 + N); fill(C.data(), nc, 3 + K);
    fill(H.data(), nc, 4); fill(bias.data(), N, 5);
    if (act == ACT_SIGMOID) for (long i = 0; i < nc; i++) H[i] = 0.5f + 0.4f * H[i];   /* activations in (0,1) */
    int a_row = K, a_col = 1, b_row = N, b_col = 1;
    if (layout == BACKWARD) { b_row = 1; b_col = K; }       /* B = W^T, W stored N x K */
    if (layout == UPDATE) { a_row = 1; a_col = M; }         /* A^T, A stored K x M */
    epilogue e = EPI_PLAIN;
    if (layout == FORWARD) { e.bias = bias.data(); e.act = act; }
    if (layout == BACKWARD) { e.deriv = H.data(); e.deriv_act = act; }
    if (layout == UPDATE) { e.alpha = -0.0123f; e.accumulate = 1; }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            double dacc = 0.0;
            for (int k = 0; k < K; k++) {
                float a = A[(long)i * a_row + (long)k * a_col], b = B[(long)k * b_row + (long)j * b_col];
                acc = fmaf(a, b, acc);
                dacc += (double)a * b;
            }
            long at = (long)i * N + j;
            want[at] = epilogue_one(e, acc, C[at], j, H[at]);
            float dwant = epilogue_one(e, (float)dacc, C[at], j, H[at]);
            double d = fabs((double)want[at] - dwant) / fmax(1.0, fabs((double)dwant));
            if (!(d <= *worst_double)) *worst_double = d;
        }
    matmul(M, N, K, A.data(), a_row, a_col, B.data(), b_row, b_col, C.data(), N, &e);
    if (cudaGetLastError() != cudaSuccess) return 0;
    return memcmp(C.data(), want.data(), sizeof(float) * (size_t)nc) == 0;
}

static void test_products(void) {
    static const int shapes[][3] = { {1, 1, 1}, {5, 3, 0}, {17, 33, 19}, {50, 40, 47}, {33, 10, 65}, {2, 70, 33} };
    static const int acts[] = { ACT_RELU, ACT_LEAKY_RELU, ACT_SIGMOID };
    struct { int kind, tile; const char *name; } kernels[] = {
        { KERNEL_NAIVE, 16, "naive" }, { KERNEL_TILED, 16, "tiled16" }, { KERNEL_TILED, 32, "tiled32" } };
    for (auto &k : kernels) {
        kernel_kind = k.kind;
        tile_side = k.tile;
        for (int layout = FORWARD; layout <= UPDATE; layout++) {
            int ok = 1;
            double worst = 0.0;
            for (auto &s : shapes)
                for (int act : acts) ok &= run_product(layout, s[0], s[1], s[2], act, &worst);
            char name[160];
            snprintf(name, sizeof name, "%s, %s: bit-identical to the host fmaf chain on 6 shapes (K = 0 .. 65) x 3 activations",
                     k.name, LAYOUT_NAMES[layout]);
            CHECK(name, ok, "differs from the host chain");
            snprintf(name, sizeof name, "%s, %s: host chain within 1e-5 of double (max %.2g)", k.name, LAYOUT_NAMES[layout], worst);
            CHECK(name, worst <= 1e-5, "max rel err %.3g", worst);
        }
    }
}

static void test_elementwise(void) {
    /* softmax + cross-entropy: serial's per-row code on the host vs the kernel */
    int rows = 37, classes = 10;
    std::vector<float> z(rows * classes), zw;
    std::vector<unsigned char> y(rows);
    std::vector<double> row_loss(rows);
    std::vector<int> row_correct(rows);
    fill(z.data(), rows * classes, 9);
    for (auto &v : z) v *= 8.0f;
    for (int i = 0; i < rows; i++) y[i] = (unsigned char)(i * 7 % 10);
    zw = z;
    double want_loss = 0.0;
    long want_correct = 0;
    for (int i = 0; i < rows; i++) {
        float *zi = zw.data() + i * classes;
        int best = 0;
        float mx = zi[0];
        for (int c = 1; c < classes; c++) if (zi[c] > mx) { mx = zi[c]; best = c; }
        float zy = zi[y[i]] - mx, sum = 0.0f;
        for (int c = 0; c < classes; c++) { zi[c] = expf(zi[c] - mx); sum += zi[c]; }
        want_loss += (double)logf(sum) - (double)zy;
        float inv = 1.0f / sum;
        for (int c = 0; c < classes; c++) zi[c] *= inv;
        zi[y[i]] -= 1.0f;
        want_correct += best == y[i];
    }
    double loss = 0.0;
    long long correct = 0;
    LAUNCH(softmax_xent_kernel, blocks_for(rows, THREADS), THREADS, z.data(), y.data(), rows, classes,
           row_loss.data(), row_correct.data());
    LAUNCH(loss_sum_kernel, 1, 1, row_loss.data(), row_correct.data(), rows, &loss, &correct);
    CHECK("softmax + cross-entropy kernel: serial's dZ, loss and correct count, bit for bit",
          z == zw && loss == want_loss && correct == want_correct, "loss %.17g vs %.17g, correct %lld vs %ld",
          loss, want_loss, correct, want_correct);

    /* bias gradient: sum over rows in order, then fmaf update (or the plain sum) */
    int out = 45;
    std::vector<float> dz(rows * out), b(out), b_want(out), gb(out), gb_want(out);
    fill(dz.data(), rows * out, 12); fill(b.data(), out, 13);
    float scale = -0.05f / rows;
    for (int j = 0; j < out; j++) {
        float s = 0.0f;
        for (int i = 0; i < rows; i++) s += dz[i * out + j];
        gb_want[j] = s;
        b_want[j] = fmaf(scale, s, b[j]);
    }
    LAUNCH(bias_grad_kernel, blocks_for(out, THREADS), THREADS, dz.data(), rows, out, scale, 1, b.data(), gb.data());
    LAUNCH(bias_grad_kernel, blocks_for(out, THREADS), THREADS, dz.data(), rows, out, scale, 0, b_want.data(), gb.data());
    CHECK("bias gradient kernel: serial's row-order sum and fmaf update, bit for bit", b == b_want && gb == gb_want,
          "differs");

    /* gather: rows of X in the given order, with their labels */
    int n = 9, features = 13;
    std::vector<float> X(n * features), x(4 * features);
    std::vector<unsigned char> Y(n), yb(4);
    fill(X.data(), n * features, 14);
    for (int i = 0; i < n; i++) Y[i] = (unsigned char)i;
    uint32_t order[4] = { 8, 0, 5, 5 };
    LAUNCH(gather_kernel, blocks_for(4 * features, 32), 32, X.data(), Y.data(), order, 4, features, x.data(), yb.data());
    int ok = 1;
    for (int r = 0; r < 4; r++) {
        ok &= yb[r] == order[r];
        ok &= !memcmp(&x[r * features], &X[order[r] * features], sizeof(float) * features);
    }
    CHECK("gather kernel: the batch rows and labels in the shuffled order", ok, "differs");
}

int main(void) {
    test_emulator();
    test_products();
    test_elementwise();
    test_barrier_mismatch();
    CHECK_EXIT();
}
