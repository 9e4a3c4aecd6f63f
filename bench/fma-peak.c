/*
 * bench/fma-peak.c — one core's fp32 fused multiply-add ceiling, the reference for docs/NOTES.md.
 *
 * Twelve independent chains of FMAs of the widest vectors the build targets (512-bit with
 * AVX-512, else 256-bit with AVX2 + FMA: the widths common/gemm.h's kernel uses; more
 * chains than latency x pipes, so the FMA units, not the dependency chains, set the pace),
 * counted as 2 FLOP per lane. Prints the rate of every quarter
 * second, so a VM's slow stretches show as a drop in the row. Run one per core at once to
 * see whether two cores keep the rate together.
 *
 *   cc -std=c11 -O2 -march=native bench/fma-peak.c -o /tmp/fma-peak
 *   taskset -c 0 /tmp/fma-peak 3                  # GFLOP/s of core 0, every 0.25 s for 3 s
 */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMADD _mm512_fmadd_ps
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMADD _mm256_fmadd_ps
#else
#error "bench/fma-peak.c needs AVX-512 or AVX2 + FMA (-march=native on such a machine)"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define FMA(x) x = FMADD(x, m, c);

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    if (!(seconds > 0 && seconds <= 3600)) {
        fprintf(stderr, "fma-peak: usage: fma-peak [SECONDS], 0 < SECONDS <= 3600\n");
        return 2;
    }
    const vec m = SET1(0.999999f), c = SET1(1e-7f);
    vec a0 = SET1(1.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
           a9 = a0, a10 = a0, a11 = a0;
    double start = now(), best = 0;
    while (now() - start < seconds) {
        long iters = 0;
        double t0 = now(), dt;
        do {
            for (int r = 0; r < 10000; r++) {
                FMA(a0) FMA(a1) FMA(a2) FMA(a3) FMA(a4) FMA(a5) FMA(a6) FMA(a7) FMA(a8) FMA(a9) FMA(a10) FMA(a11)
                /* keeps the twelve chains in registers and alive: no instruction */
                __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7),
                                      "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
            }
            iters += 10000;
        } while ((dt = now() - t0) < 0.25);
        double gflops = (double)iters * 12 * LANES * 2 / dt / 1e9;
        if (gflops > best) best = gflops;
        printf("%.0f ", gflops);
        fflush(stdout);
    }
    printf("\nfma-peak: best %.0f GFLOP/s (fp32, 12 chains of %d-bit FMAs)\n", best, LANES * 32);
    return 0;
}
