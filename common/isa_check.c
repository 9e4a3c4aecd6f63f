/*
 * common/isa_check.c — a build meets a CPU without the instruction sets it was compiled
 * for: one line instead of "Illegal instruction".
 *
 * The trainers are built with -march=native. A cluster whose login node (where make runs)
 * has AVX-512 and whose compute nodes do not, or a binary copied to an older machine,
 * would die at the first such instruction with SIGILL and no word of why. This
 * constructor runs before main, itself compiled for the x86-64 baseline, checks every
 * instruction set the build's flags enabled that the kernel paths and the vectorizer use,
 * and exits 1 naming the first one missing and the two fixes: rebuild on the machine
 * that runs the program, or use the portable build (make PORTABLE=1: AVX2 + FMA).
 * Linked into every CPU program with the other common .c files. Other architectures:
 * nothing to check.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define _GNU_SOURCE
#include <errno.h>   /* program_invocation_short_name */
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor, target("arch=x86-64"))) static void isa_check(void) {
    __builtin_cpu_init();
    /* __builtin_cpu_supports takes a string literal only: one row per set */
    const struct { int has; const char *name; } sets[] = {
#ifdef __AVX512FP16__
        { __builtin_cpu_supports("avx512fp16"), "avx512fp16" },
#endif
#ifdef __AVX512BF16__
        { __builtin_cpu_supports("avx512bf16"), "avx512bf16" },
#endif
#ifdef __AVX512F__
        { __builtin_cpu_supports("avx512f"), "avx512f" },
#endif
#ifdef __AVX512VL__
        { __builtin_cpu_supports("avx512vl"), "avx512vl" },
#endif
#ifdef __AVX512BW__
        { __builtin_cpu_supports("avx512bw"), "avx512bw" },
#endif
#ifdef __AVX512DQ__
        { __builtin_cpu_supports("avx512dq"), "avx512dq" },
#endif
#ifdef __AVX2__
        { __builtin_cpu_supports("avx2"), "avx2" },
#endif
#ifdef __FMA__
        { __builtin_cpu_supports("fma"), "fma" },
#endif
#ifdef __AVX__
        { __builtin_cpu_supports("avx"), "avx" },
#endif
        { 1, NULL },
    };
    for (int i = 0; sets[i].name; i++)
        if (!sets[i].has) {
            fprintf(stderr, "%s: this build uses %s instructions, which this CPU does not have (built with "
                            "-march=native on another CPU?): rebuild it on this machine (make clean all), or use "
                            "the portable build (make PORTABLE=1)\n", program_invocation_short_name, sets[i].name);
            exit(1);
        }
}
#endif
