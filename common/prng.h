/*
 * common/prng.h — the one seeded random scheme of every partrain trainer.
 *
 * Every trainer must start from bit-identical weights and visit the samples in the
 * same order for the same --seed, so both are defined here, once:
 *   generator   xoshiro256** seeded through splitmix64 from (seed, stream);
 *               independent streams for "weights of layer l" and "order of epoch e",
 *               so any rank can compute any of them without replaying the others.
 *   weights     dense layer l (1-based) is stored [fan_in][fan_out] row-major and
 *               filled in storage order: hidden layers He-normal, std = sqrt(2/fan_in);
 *               the output layer Xavier/Glorot-uniform, U(-a, a), a = sqrt(6/(in+out)).
 *               Biases start at zero. Normal deviates: Box-Muller on two uniforms,
 *               one deviate per pair (no caching, so no hidden state).
 *   order       epoch e (1-based) visits prng_permutation(n, seed, e): Fisher-Yates
 *               with Lemire's unbiased bounded integers.
 * Header-only: all functions are static inline.
 */
#ifndef PARTRAIN_PRNG_H
#define PARTRAIN_PRNG_H

#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } prng;

#define PRNG_STREAM_INIT(layer)   (0x1000u + (uint64_t)(layer))
#define PRNG_STREAM_SHUFFLE(epoch) (0x100000u + (uint64_t)(epoch))

static inline uint64_t prng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void prng_init(prng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = prng_splitmix64(&x);
}

static inline uint64_t prng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t prng_u64(prng *r) {
    uint64_t *s = r->s;
    uint64_t result = prng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = prng_rotl(s[3], 45);
    return result;
}

/* uniform in [0, 1) with 53 random bits */
static inline double prng_uniform(prng *r) { return (double)(prng_u64(r) >> 11) * 0x1.0p-53; }

/* standard normal deviate (Box-Muller, cosine branch only) */
static inline double prng_normal(prng *r) {
    double u1 = 1.0 - prng_uniform(r);           /* (0, 1]: log is finite */
    double u2 = prng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* unbiased integer in [0, n), n >= 1 (Lemire's multiply-and-reject) */
static inline uint32_t prng_below(prng *r, uint32_t n) {
    uint64_t m = (uint64_t)(uint32_t)(prng_u64(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(prng_u64(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* order of the n training samples in epoch `epoch` (1-based) */
static inline void prng_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t epoch) {
    prng r;
    prng_init(&r, seed, PRNG_STREAM_SHUFFLE(epoch));
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = prng_below(&r, i);
        uint32_t t = perm[i - 1]; perm[i - 1] = perm[j]; perm[j] = t;
    }
}

/* initial weights of dense layer `layer` (1-based), stored [fan_in][fan_out] with rows ld
 * floats apart (ld >= fan_out; the floats between are left alone): the same values, in
 * the same order, whatever ld */
static inline void prng_init_dense_ld(float *w, long ld, int fan_in, int fan_out, int layer,
                                      int is_output_layer, uint64_t seed) {
    prng r;
    prng_init(&r, seed, PRNG_STREAM_INIT(layer));
    double a = sqrt(6.0 / (double)(fan_in + fan_out)), sd = sqrt(2.0 / (double)fan_in);
    for (int i = 0; i < fan_in; i++)
        for (int j = 0; j < fan_out; j++)
            w[(long)i * ld + j] = is_output_layer ? (float)((2.0 * prng_uniform(&r) - 1.0) * a)
                                                  : (float)(prng_normal(&r) * sd);
}

/* the same, rows fan_out floats apart */
static inline void prng_init_dense(float *w, int fan_in, int fan_out, int layer,
                                   int is_output_layer, uint64_t seed) {
    prng_init_dense_ld(w, fan_out, fan_in, fan_out, layer, is_output_layer, seed);
}

#endif
