/*
 * common/siphash.h — SipHash-2-4 (Aumasson and Bernstein), the keyed hash that tags the
 * watchdog's datagrams (common/watchdog.c). Header-only.
 */
#ifndef PARTRAIN_SIPHASH_H
#define PARTRAIN_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 (Aumasson and Bernstein) of n bytes under a 128-bit key */
#define WD_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define WD_SIPROUND                                                                      \
    do {                                                                                 \
        v0 += v1; v1 = WD_ROTL(v1, 13); v1 ^= v0; v0 = WD_ROTL(v0, 32);                 \
        v2 += v3; v3 = WD_ROTL(v3, 16); v3 ^= v2;                                        \
        v0 += v3; v3 = WD_ROTL(v3, 21); v3 ^= v0;                                        \
        v2 += v1; v1 = WD_ROTL(v1, 17); v1 ^= v2; v2 = WD_ROTL(v2, 32);                 \
    } while (0)
static inline uint64_t wd_siphash(const uint64_t key[2], const unsigned char *in, size_t n) {
    uint64_t v0 = 0x736f6d6570736575ull ^ key[0], v1 = 0x646f72616e646f6dull ^ key[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ key[0], v3 = 0x7465646279746573ull ^ key[1];
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m = 0;
        for (int k = 7; k >= 0; k--) m = (m << 8) | in[i + (size_t)k];   /* little-endian word */
        v3 ^= m; WD_SIPROUND; WD_SIPROUND; v0 ^= m;
    }
    uint64_t last = (uint64_t)(n & 0xff) << 56;
    for (int k = (int)(n - i) - 1; k >= 0; k--) last |= (uint64_t)in[i + (size_t)k] << (8 * k);
    v3 ^= last; WD_SIPROUND; WD_SIPROUND; v0 ^= last;
    v2 ^= 0xff;
    WD_SIPROUND; WD_SIPROUND; WD_SIPROUND; WD_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

#endif
