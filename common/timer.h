/* common/timer.h — monotonic wall clock (seconds, double). Header-only. */
#ifndef PARTRAIN_TIMER_H
#define PARTRAIN_TIMER_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* clock_gettime() under -std=c11, when this is the first include */
#endif
#include <time.h>
static inline double timer_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif
