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
    /* __builtin_cpu_supports takes a string literal only: one row per set the flags enabled */
#define SET(name) { __builtin_cpu_supports(name), name },
    const struct { int has; const char *name; } sets[] = {
#ifdef __AVX512FP16__
        SET("avx512fp16")
#endif
#ifdef __AVX512BF16__
        SET("avx512bf16")
#endif
#ifdef __AVX512F__
        SET("avx512f")
#endif
#ifdef __AVX512VL__
        SET("avx512vl")
#endif
#ifdef __AVX512BW__
        SET("avx512bw")
#endif
#ifdef __AVX512DQ__
        SET("avx512dq")
#endif
#ifdef __AVX2__
        SET("avx2")
#endif
#ifdef __FMA__
        SET("fma")
#endif
#ifdef __AVX__
        SET("avx")
#endif
        { 1, NULL },
    };
#undef SET
    for (int i = 0; sets[i].name; i++)
        if (!sets[i].has) {
            fprintf(stderr, "%s: this build uses %s instructions, which this CPU does not have (built with "
                            "-march=native on another CPU?): rebuild it on this machine (make clean all), or use "
                            "the portable build (make PORTABLE=1)\n", program_invocation_short_name, sets[i].name);
            exit(1);
        }
}
#endif
