/*
 * tests/test_cnn.c — unit tests of cnn/cnn.c's maths (the trainer is #included with
 * TESTING defined, so its static functions are testable; built with mpicc -fopenmp).
 *
 * Hand-computed values for the convolution + ReLU + max-pooling forward and for the
 * convolution's weight gradient, max-pool ties in every position (the rule: the FIRST
 * maximum of the 2x2 window in row-major order gets the gradient), the fast kernels
 * (AVX-512, AVX2, or the 16-lane loops: all three give the AVX-512 kernel's bits) against
 * the scalar reference on awkward sizes (forward bit-identical, backward within 2e-5
 * relative: the lanes sum in another order), a central finite-difference check of
 * the whole CNN's gradient, and that T threads stay within 1e-5 of one thread
 * (bit-identical on a rerun). MPI runs as a singleton (one rank, no mpirun): the training
 * step then makes no MPI call, and nothing else here needs one.
 */
#define TESTING
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "../cnn/cnn.c"
#include "check.h"

/* OpenMPI's own allocations outlive MPI_Finalize: LeakSanitizer would report them */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static void fill(float *x, long n, uint64_t seed, float lo, float hi) {
    prng r;
    prng_init(&r, seed, 7);
    for (long i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * prng_uniform(&r));
}

/* A model with hand-set parameters: S x S images, F filters, buffers for `rows` samples */
static int make(cnn *m, int S, int F, int rows) {
    if (cnn_init(m, S, F, 42, rows, 8)) { CHECK("cnn_init", 0, "out of memory"); return -1; }
    return 0;
}

static void set_filter(cnn *m, int f, const float w[9], float bias) {
    for (int k = 0; k < 9; k++) m->Wc[k * m->filters + f] = w[k];
    m->bc[f] = bias;
}

/* 4x4 image, 2 filters: conv 2x2, pooled 1x1 each (worked out in the comments) */
static const float IMG4[16] = {1, 2, 0, 1,
                               0, 1, 3, 0,
                               2, 0, 1, 1,
                               1, 1, 0, 2};
static const float W_EDGE[9] = {1, 0, -1, 0, 1, 0, -1, 0, 1};      /* filter 0, bias 0.5 */
static const float W_LAPLACE[9] = {0, 1, 0, 1, -4, 1, 0, 1, 0};    /* filter 1, bias -1 */

static void test_forward_hand(void) {
    cnn m;
    if (make(&m, 4, 2, 1)) return;
    set_filter(&m, 0, W_EDGE, 0.5f);
    set_filter(&m, 1, W_LAPLACE, -1.0f);
    /* filter 0: conv (0,0) = 1-0+1-2+1 + .5 = 1.5; (0,1) = 2-1+3-0+1 + .5 = 5.5;
     *           (1,0) = 0-3+0-1+0 + .5 = -3.5 -> ReLU 0; (1,1) = 1-0+1-1+2 + .5 = 3.5
     *           -> pooled 5.5 at window position 1 = (0,1)
     * filter 1: (0,0) = 2+0-4+3+0 - 1 = 0; (0,1) = 0+1-12+0+1 - 1 = -11 -> 0;
     *           (1,0) = 1+2-0+1+1 - 1 = 4; (1,1) = 3+0-4+1+0 - 1 = -1 -> 0
     *           -> pooled 4 at window position 2 = (1,0) */
    float want[2] = {5.5f, 4.0f};
    unsigned char want_arg[2] = {1, 2};
    for (int path = 0; path < 2; path++) {
        float got[2];
        unsigned char got_arg[2];
        for (int f = 0; f < 2; f++) {
            float *pf = m.pooled + f * m.fstride;
            unsigned char *af = m.arg + f * m.astride;
            pf[0] = -1.0f;
            if (path == 0) conv_pool_forward_ref(&m, IMG4, f, pf, af);
            else conv_pool_forward_one(&m, IMG4, f, pf, af);
            got[f] = pf[0];
            got_arg[f] = af[0];
        }
        char name[96];
        snprintf(name, sizeof name, "conv 3x3 + ReLU + max-pool by hand, 4x4 image, 2 filters (%s)",
                 path ? "fast kernel" : "reference");
        CHECK(name, !memcmp(got, want, sizeof want) && !memcmp(got_arg, want_arg, 2),
              "pooled %g %g (want 5.5 4), argmax %d %d (want 1 2)", got[0], got[1], got_arg[0], got_arg[1]);
    }
    /* 6x6 image, 1 filter: 4x4 conv, 2x2 pooled; the centre tap alone copies the inner
     * 4x4 of the image, so each pooled value is the max of a 2x2 block of it */
    cnn m6;
    if (make(&m6, 6, 1, 1)) { cnn_free(&m); return; }
    float centre[9] = {0, 0, 0, 0, 1, 0, 0, 0, 0}, img6[36] = {0};
    float inner[16] = {1, 7, 2, 2,
                       3, 4, 9, 1,
                       0, 5, 6, 6,
                       8, 2, 6, 6};
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) img6[(y + 1) * 6 + x + 1] = inner[y * 4 + x];
    set_filter(&m6, 0, centre, 0.0f);
    conv_pool_forward_one(&m6, img6, 0, m6.pooled, m6.arg);
    float want6[4] = {7, 9, 8, 6};
    unsigned char arg6[4] = {1, 2, 2, 0};
    CHECK("max-pool of a 4x4 map by hand: 7 9 8 6, argmax 1 2 2 0 (the 6-6-6-6 tie goes to the first)",
          !memcmp(m6.pooled, want6, sizeof want6) && !memcmp(m6.arg, arg6, 4),
          "pooled %g %g %g %g, argmax %d %d %d %d", m6.pooled[0], m6.pooled[1], m6.pooled[2], m6.pooled[3],
          m6.arg[0], m6.arg[1], m6.arg[2], m6.arg[3]);
    cnn_free(&m6);
    cnn_free(&m);
}

/* Ties: the centre tap copies image[1..2][1..2] into the 2x2 conv map, i.e. the window
 * (q0 q1 / q2 q3). The first maximum in row-major order must win, in both paths. */
static void test_pool_ties(void) {
    cnn m;
    if (make(&m, 4, 1, 1)) return;
    float centre[9] = {0, 0, 0, 0, 1, 0, 0, 0, 0};
    struct { float q[4]; float bias; float pooled; int arg; const char *name; } cases[] = {
        {{2, 2, 2, 2}, 0.0f, 2, 0, "all four equal -> position 0"},
        {{1, 3, 2, 3}, 0.0f, 3, 1, "q1 = q3 -> position 1"},
        {{1, 0, 3, 3}, 0.0f, 3, 2, "q2 = q3 -> position 2"},
        {{0, 1, 1, 5}, 0.0f, 5, 3, "strict maximum at position 3"},
        {{4, 1, 1, 4}, 0.0f, 4, 0, "q0 = q3 -> position 0"},
        {{-1, -2, -3, -4}, 0.0f, 0, 0, "all negative: ReLU zeros tie -> position 0, pooled 0"},
        {{-1, 0.5f, -3, 0.5f}, -1.0f, 0, 0, "bias kills all -> position 0, pooled 0"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float img[16] = {0};
        img[5] = cases[c].q[0]; img[6] = cases[c].q[1]; img[9] = cases[c].q[2]; img[10] = cases[c].q[3];
        set_filter(&m, 0, centre, cases[c].bias);
        float p_ref, p_fast;
        unsigned char a_ref, a_fast;
        conv_pool_forward_ref(&m, img, 0, m.pooled, m.arg);
        p_ref = m.pooled[0]; a_ref = m.arg[0];
        conv_pool_forward_one(&m, img, 0, m.pooled, m.arg);
        p_fast = m.pooled[0]; a_fast = m.arg[0];
        char name[128];
        snprintf(name, sizeof name, "max-pool tie rule: %s", cases[c].name);
        CHECK(name, p_ref == cases[c].pooled && p_fast == cases[c].pooled && a_ref == cases[c].arg && a_fast == cases[c].arg,
              "reference %g@%d, fast %g@%d, want %g@%d", p_ref, a_ref, p_fast, a_fast, cases[c].pooled, cases[c].arg);
    }
    cnn_free(&m);
}

/* conv weight gradient by hand: dL/dWc[k] = dpool * the 3x3 input patch at the argmax
 * position, dL/dbc = dpool; zero when the pooled value is 0 (dead ReLU) */
static void test_backward_hand(void) {
    cnn m;
    if (make(&m, 4, 2, 1)) return;
    set_filter(&m, 0, W_EDGE, 0.5f);
    set_filter(&m, 1, W_LAPLACE, -1.0f);
    float slot[2][SLOT];
    for (int path = 0; path < 2; path++) {
        for (int f = 0; f < 2; f++) conv_pool_forward_one(&m, IMG4, f, m.pooled + f * m.fstride, m.arg + f * m.astride);
        m.dpool[0] = 2.0f;                /* filter 0 */
        m.dpool[m.fstride] = -1.0f;       /* filter 1 */
        for (int f = 0; f < 2; f++) {
            const float *pf = m.pooled + f * m.fstride, *df = m.dpool + f * m.fstride;
            const unsigned char *af = m.arg + f * m.astride;
            if (path == 0) conv_backward_ref(&m, IMG4, pf, af, df, slot[f]);
            else conv_backward_one(&m, IMG4, pf, af, df, slot[f]);
        }
        /* filter 0: argmax (0,1): patch rows 0..2, cols 1..3 = [2 0 1; 1 3 0; 0 1 1], times 2
         * filter 1: argmax (1,0): patch rows 1..3, cols 0..2 = [0 1 3; 2 0 1; 1 1 0], times -1 */
        float want0[10] = {4, 0, 2, 2, 6, 0, 0, 2, 2, 2};
        float want1[10] = {0, -1, -3, -2, 0, -1, -1, -1, 0, -1};
        char name[96];
        snprintf(name, sizeof name, "conv backward by hand: weight and bias gradients (%s)", path ? "fast kernel" : "reference");
        CHECK(name, !memcmp(slot[0], want0, sizeof want0) && !memcmp(slot[1], want1, sizeof want1),
              "filter 0: %g %g %g %g %g %g %g %g %g | %g; filter 1: %g %g %g ...", slot[0][0], slot[0][1], slot[0][2],
              slot[0][3], slot[0][4], slot[0][5], slot[0][6], slot[0][7], slot[0][8], slot[0][9], slot[1][0], slot[1][1],
              slot[1][2]);
    }
    /* dead ReLU: every conv output <= 0 -> pooled 0 -> no gradient at all */
    set_filter(&m, 0, W_EDGE, -100.0f);
    conv_pool_forward_one(&m, IMG4, 0, m.pooled, m.arg);
    m.dpool[0] = 3.0f;
    conv_backward_one(&m, IMG4, m.pooled, m.arg, m.dpool, slot[0]);
    int zero = 1;
    for (int k = 0; k < 10; k++) zero &= slot[0][k] == 0.0f;
    CHECK("conv backward: a dead ReLU (pooled 0) passes no gradient", zero && m.pooled[0] == 0.0f,
          "pooled %g, slot %g %g ... %g", m.pooled[0], slot[0][0], slot[0][1], slot[0][9]);
    cnn_free(&m);
}

/* max-pool backward with ties: only the first maximum's patch enters the gradient */
static void test_pool_backward_ties(void) {
    cnn m;
    if (make(&m, 4, 1, 1)) return;
    float centre[9] = {0, 0, 0, 0, 1, 0, 0, 0, 0};
    set_filter(&m, 0, centre, 0.0f);
    /* window q = (1 3 / 2 3): q1 and q3 tie; the gradient must use the patch at (0,1) */
    float img[16] = {1, 2, 3, 4,
                     5, 1, 3, 6,
                     7, 2, 3, 8,
                     9, 10, 11, 12};
    float want[10];
    for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++) want[ky * 3 + kx] = 0.5f * img[ky * 4 + 1 + kx];  /* patch at (0,1) */
    want[9] = 0.5f;
    for (int path = 0; path < 2; path++) {
        float slot[SLOT];
        conv_pool_forward_one(&m, img, 0, m.pooled, m.arg);
        m.dpool[0] = 0.5f;
        if (path == 0) conv_backward_ref(&m, img, m.pooled, m.arg, m.dpool, slot);
        else conv_backward_one(&m, img, m.pooled, m.arg, m.dpool, slot);
        char name[128];
        snprintf(name, sizeof name, "max-pool backward, tie q1 = q3: the gradient goes to q1 only (%s)",
                 path ? "fast kernel" : "reference");
        CHECK(name, m.arg[0] == 1 && !memcmp(slot, want, sizeof want),
              "argmax %d, slot %g %g %g %g %g %g %g %g %g | %g", m.arg[0], slot[0], slot[1], slot[2], slot[3], slot[4],
              slot[5], slot[6], slot[7], slot[8], slot[9]);
    }
    cnn_free(&m);
}

/* The fast kernels against the reference on sizes around the 32-column chunk and with
 * many exact ties (pixels on a 1/4 grid, some zero rows): forward pooled values and
 * argmax identical bit for bit (same operation order), backward within 2e-5. */
static void test_kernels_vs_reference(void) {
    int sides[] = {4, 5, 6, 7, 9, 28, 33, 34, 35, 37, 40, 66, 67, 70};
    int bad_fwd = 0, bad_bwd = 0;
    double worst = 0;
    uint64_t digest = 1469598103934665603ULL;   /* FNV-1a over the backward's slot bits */
    for (size_t s = 0; s < sizeof sides / sizeof sides[0]; s++)
        for (int F = 1; F <= 8; F += 7) {
            int S = sides[s];
            cnn m, r;
            if (make(&m, S, F, 1) || make(&r, S, F, 1)) return;
            float *img = malloc(sizeof(float) * S * S);
            fill(img, (long)S * S, s, 0.0f, 1.0f);
            for (int i = 0; i < S * S; i++) img[i] = (s % 2) ? floorf(img[i] * 4) / 4 : img[i];  /* ties */
            for (int x = 0; x < S; x++) img[x] = 0.0f;                                            /* a blank row */
            fill(m.Wc, 9L * F, s + 50, -1.0f, 1.0f);
            fill(m.bc, F, s + 60, -0.3f, 0.3f);
            memcpy(r.params, m.params, sizeof(float) * (size_t)m.params_alloc);
            fill(m.dpool, m.prow, s + 70, -1.0f, 1.0f);
            memcpy(r.dpool, m.dpool, sizeof(float) * (size_t)m.prow);
            for (int f = 0; f < F; f++) {
                conv_pool_forward_one(&m, img, f, m.pooled + f * m.fstride, m.arg + f * m.astride);
                conv_pool_forward_ref(&r, img, f, r.pooled + f * r.fstride, r.arg + f * r.astride);
            }
            if (memcmp(m.pooled, r.pooled, sizeof(float) * (size_t)m.prow) || memcmp(m.arg, r.arg, (size_t)m.arow))
                bad_fwd++;
            for (int f = 0; f < F; f++) {
                float a[SLOT], b[SLOT];
                long fo = (long)f * m.fstride, ao = (long)f * m.astride;
                conv_backward_one(&m, img, r.pooled + fo, r.arg + ao, m.dpool + fo, a);
                conv_backward_ref(&r, img, r.pooled + fo, r.arg + ao, r.dpool + fo, b);
                double err = check_max_rel_err(a, b, 10);
                if (!(err <= 2e-5)) bad_bwd++;
                const unsigned char *bytes = (const unsigned char *)a;
                for (size_t i = 0; i < 10 * sizeof(float); i++) digest = (digest ^ bytes[i]) * 1099511628211ULL;
                if (err > worst || err != err) worst = err;
            }
            free(img);
            cnn_free(&m); cnn_free(&r);
        }
#if defined(__AVX512F__)
#define CONV_PATH "AVX-512"
#elif defined(__AVX2__) && defined(__FMA__)
#define CONV_PATH "AVX2"
#else
#define CONV_PATH "16-lane loops"
#endif
    /* the bits of every path's backward: tests/test_cnn.sh compares this line between the
     * native build and the loops build (tests/bin/test_cnn_loops), which must agree */
    printf("cnn conv backward digest (%s): %016llx\n", CONV_PATH, (unsigned long long)digest);
    CHECK(CONV_PATH " conv+ReLU+pool == reference bit for bit (14 sizes x 1, 8 filters, with ties)", bad_fwd == 0,
          "%d configurations differ", bad_fwd);
    /* float sums of up to 1,156 products (70x70 images), added in two different orders */
    CHECK(CONV_PATH " conv backward vs reference within 2e-5 relative", bad_bwd == 0,
          "%d gradients off, worst relative error %.3g", bad_bwd, worst);
}

/* A small training set in memory */
static dataset make_data(int n, int S, uint64_t seed, float lo) {
    dataset d = { .n = n, .side = S, .features = S * S };
    d.x = malloc(sizeof(float) * (size_t)n * S * S);
    d.y = malloc((size_t)n);
    fill(d.x, (long)n * S * S, seed, lo, 1.0f);
    for (int i = 0; i < n; i++) d.y[i] = (unsigned char)((i * 7 + 3) % 10);
    return d;
}

/* mean loss of the model on rows samples of d (forward only, in the calling thread) */
static double mean_loss(cnn *m, const dataset *d, const uint32_t *idx, int rows) {
    conv_pool_forward(m, d->x, idx, rows);
    dense_forward(m, 0, rows);
    long c = 0;
    double loss = 0;
    for (int i = 0; i < rows; i++) {
        unsigned char y = d->y[idx[i]];
        loss += softmax_xent(m->logits + (long)i * CLASSES, &y, 1, CLASSES, &c);
    }
    return loss / rows;
}

/* `steps` train_steps of `rows` samples each by a team of T threads inside one parallel
 * region, as main() runs an epoch (the last phase of a step has no barrier); returns the
 * summed loss */
static double steps_team(cnn *m, const dataset *d, const uint32_t *idx, int rows, int steps, float lr, int T) {
    thread_stats st[8];
    memset(st, 0, sizeof st);
    double loss = 0;
#pragma omp parallel num_threads(T)
    for (int s = 0; s < steps; s++)
        train_step(m, &st[omp_get_thread_num()], d, idx + (long)s * rows, rows, rows, lr, &loss,
                   omp_get_thread_num(), T);
    return loss;
}

static void test_gradient_check(void) {
    int S = 10, F = 3, rows = 5;
    cnn m, g;
    if (make(&m, S, F, rows) || make(&g, S, F, rows)) return;
    dataset d = make_data(rows, S, 5, -1.0f);   /* signed inputs: no filter is dead */
    uint32_t idx[5] = {4, 0, 3, 1, 2};
    for (long p = 0; p < m.params_alloc; p++) m.params[p] *= 1.5f;      /* livelier gradients */
    for (int f = 0; f < F; f++) m.bc[f] = 0.05f * (float)(f - 1);
    m.bd[3] = 0.1f;
    transpose(m.Wd, CLASSES, m.features, m.WdT, CLASSES);
    /* analytic gradient: one SGD step with lr = 1 on a copy, g = old - new */
    memcpy(g.params, m.params, sizeof(float) * (size_t)m.params_alloc);
    memcpy(g.WdT, m.WdT, sizeof(float) * (size_t)m.features * CLASSES);
    steps_team(&g, &d, idx, rows, 1, 1.0f, 1);
    int bad = 0, nonzero = 0, n_conv_nonzero = 0;
    double worst = 0;
    for (long p = 0; p < m.params_alloc; p++) {   /* padding: gradient 0 both ways */
        double analytic = (double)m.params[p] - (double)g.params[p];
        float keep = m.params[p];
        double eps = 1e-3;
        m.params[p] = keep + (float)eps;
        transpose(m.Wd, CLASSES, m.features, m.WdT, CLASSES);
        double up = mean_loss(&m, &d, idx, rows);
        m.params[p] = keep - (float)eps;
        transpose(m.Wd, CLASSES, m.features, m.WdT, CLASSES);
        double down = mean_loss(&m, &d, idx, rows);
        m.params[p] = keep;
        transpose(m.Wd, CLASSES, m.features, m.WdT, CLASSES);
        double numeric = (up - down) / (2 * eps);
        double err = fabs(numeric - analytic), tol = 5e-4 + 2e-2 * fabs(numeric);
        if (!(err <= tol)) bad++;
        if (err > worst || err != err) worst = err;
        if (fabs(analytic) > 1e-4) { nonzero++; if (p < m.Wd - m.params) n_conv_nonzero++; }
    }
    char name[128];
    snprintf(name, sizeof name, "finite-difference gradient of the whole CNN (10x10 images, %d filters, %ld params)",
             F, m.n_params);
    /* a kink of ReLU or a flip of a pooling argmax inside +-eps can spoil a few entries */
    CHECK(name, bad <= 2 && nonzero > m.n_params / 3 && n_conv_nonzero >= 9 * F,
          "%d entries off (worst abs err %.3g), %d non-zero gradients (%d in the conv layer)", bad, worst, nonzero,
          n_conv_nonzero);
    free(d.x); free(d.y);
    cnn_free(&m); cnn_free(&g);
}

/* T threads share each step: each thread sums the gradient over its block of samples and
 * the blocks' sums are added in thread order. So for T = 2, 3, 5 (rows not a multiple of
 * T, T not dividing the 8 filters, on purpose) the weights after several steps stay within
 * 1e-5 of 1 thread's (only the rounding of the block sums differs: measured ~1e-8), and a
 * rerun with the same T is bit-identical (the order is fixed, not first come first served) */
static void test_threads(void) {
    int S = 28, F = 8, rows = 13, steps = 6;
    dataset d = make_data(rows * steps, S, 9, 0.0f);
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)rows * steps);
    prng_permutation(idx, (uint32_t)(rows * steps), 42, 1);
    cnn ref;
    if (make(&ref, S, F, rows)) return;
    double loss_ref = steps_team(&ref, &d, idx, rows, steps, 0.1f, 1);
    for (int T = 2; T <= 5; T += (T == 3 ? 2 : 1)) {
        cnn m, again;
        if (make(&m, S, F, rows) || make(&again, S, F, rows)) return;
        double loss = steps_team(&m, &d, idx, rows, steps, 0.1f, T);
        double loss_again = steps_team(&again, &d, idx, rows, steps, 0.1f, T);
        double err = check_max_rel_err(m.params, ref.params, m.params_alloc);
        double loss_err = fabs(loss - loss_ref) / fabs(loss_ref);
        char name[128];
        snprintf(name, sizeof name, "%d threads: weights and loss within 1e-5 of 1 thread after %d steps", T, steps);
        CHECK(name, err <= 1e-5 && loss_err <= 1e-5, "max rel diff %.3g, loss %.17g vs %.17g (rel %.3g)", err, loss,
              loss_ref, loss_err);
        snprintf(name, sizeof name, "%d threads: a rerun is bit-identical", T);
        CHECK(name, !memcmp(m.params, again.params, sizeof(float) * (size_t)m.params_alloc) && loss == loss_again,
              "max rel diff %.3g, loss %.17g vs %.17g", check_max_rel_err(m.params, again.params, m.params_alloc), loss,
              loss_again);
        cnn_free(&m); cnn_free(&again);
    }
    /* and the step did change the weights (the checks above cannot pass vacuously) */
    cnn init;
    if (make(&init, S, F, rows)) return;
    double moved = check_max_rel_err(init.params, ref.params, ref.params_alloc);
    CHECK("training steps change the weights by far more than the tolerance", moved > 1e-3, "max change %.3g", moved);
    cnn_free(&init); cnn_free(&ref);
    free(d.x); free(d.y); free(idx);
}

/* Pieces of a block run by another thread: thread 1 starts its own block only once
 * thread 0 has taken a piece from its end, every step, so every step takes the path where
 * the block's dense sum is the owner's prefix continued over the taken tail after the
 * barrier. The weights must be bit-identical to the same team's ordinary run (who ran a
 * sample changes no value), and something must really have been taken. */
static void test_taken_pieces(void) {
    int S = 28, F = 8, rows = 13, steps = 4;
    dataset d = make_data(rows * steps, S, 11, 0.0f);
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)rows * steps);
    prng_permutation(idx, (uint32_t)(rows * steps), 7, 1);
    cnn plain, taken;
    if (make(&plain, S, F, rows) || make(&taken, S, F, rows)) return;
    double loss_plain = steps_team(&plain, &d, idx, rows, steps, 0.1f, 2);
    test_hold_owner = 1;
    double loss_taken = steps_team(&taken, &d, idx, rows, steps, 0.1f, 2);
    test_hold_owner = -1;
    long lo, hi;
    split(rows, 1, 2, &lo, &hi);
    CHECK("a thread takes pieces of another's block: the taken tail was run by thread 0",
          blocks[1].owner_end < hi, "owner ran [%ld, %ld) of [%ld, %ld)", lo, blocks[1].owner_end, lo, hi);
    CHECK("taken pieces: weights and loss bit-identical to the ordinary 2-thread run",
          !memcmp(plain.params, taken.params, sizeof(float) * (size_t)plain.params_alloc) && loss_plain == loss_taken,
          "max rel diff %.3g, loss %.17g vs %.17g", check_max_rel_err(taken.params, plain.params, plain.params_alloc),
          loss_taken, loss_plain);
    cnn_free(&plain); cnn_free(&taken);
    free(d.x); free(d.y); free(idx);
}

/* matmul_continue: a sum over K split in two calls is the one-call sum, bit for bit
 * (partial tiles in both directions: M = 10, N = 70) */
static void test_continue_kernel(void) {
    int M = 10, N = 70, K = 37, split_at = 13;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *whole = malloc(sizeof(float) * M * N), *parts = malloc(sizeof(float) * M * N);
    fill(A, (long)M * K, 3, -1.0f, 1.0f);
    fill(B, (long)K * N, 4, -1.0f, 1.0f);
    matmul(M, N, K, A, K, 1, B, N, whole, N, &EPI_PLAIN);
    matmul(M, N, split_at, A, K, 1, B, N, parts, N, &EPI_PLAIN);
    matmul_continue(M, N, K - split_at, A + split_at, K, 1, B + (long)split_at * N, N, parts, N);
    CHECK("matmul_continue: K split 13 + 24 is bit-identical to one product over K = 37",
          !memcmp(whole, parts, sizeof(float) * M * N), "max rel diff %.3g", check_max_rel_err(parts, whole, (long)M * N));
    free(A); free(B); free(whole); free(parts);
}

/* the shared PRNG scheme: conv = dense layer 1 (He, fan_in 9), FC = layer 2 (Xavier) */
static void test_init(void) {
    cnn m;
    if (make(&m, 28, 8, 1)) return;
    float *w = malloc(sizeof(float) * 1352 * 10);
    prng_init_dense(w, 9, 8, 1, 0, 42);
    int conv_ok = !memcmp(w, m.Wc, sizeof(float) * 72);
    prng_init_dense(w, 1352, 10, 2, 1, 42);
    int fc_ok = !memcmp(w, m.WdT, sizeof(float) * 13520);
    int t_ok = 1;
    for (int j = 0; j < 1352; j++)
        for (int c = 0; c < 10; c++) t_ok &= m.Wd[c * 1352 + j] == w[j * 10 + c];
    CHECK("init: conv = prng_init_dense(9, F, layer 1, He), dense = (1352, 10, layer 2, Xavier), zero biases",
          conv_ok && fc_ok && t_ok && m.bc[0] == 0 && m.bd[9] == 0, "conv %d dense %d transposed %d", conv_ok, fc_ok, t_ok);
    CHECK("default CNN: 1352 features, 13,610 parameters, 275,808 FLOP per sample",
          m.features == 1352 && m.n_params == 13610 && cnn_flops_per_sample(&m) == 275808.0,
          "features %d, params %ld, flops %.0f", m.features, m.n_params, cnn_flops_per_sample(&m));
    free(w);
    cnn_free(&m);
}

int main(int argc, char **argv) {
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        printf("FAIL MPI_Init_thread: singleton MPI start failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK("MPI provides MPI_THREAD_FUNNELED", provided >= MPI_THREAD_FUNNELED, "provided %d", provided);
    omp_set_dynamic(0);
    test_forward_hand();
    test_pool_ties();
    test_backward_hand();
    test_pool_backward_ties();
    test_kernels_vs_reference();
    test_gradient_check();
    test_threads();
    test_taken_pieces();
    test_continue_kernel();
    test_init();
    MPI_Finalize();
    CHECK_EXIT();
}
