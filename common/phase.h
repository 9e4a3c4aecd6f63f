/*
 * common/phase.h — where a trainer's time goes: named phases (compute, comm, wait, update,
 * eval, checkpoint) marked with phase_begin()/phase_end(), seconds per phase since the
 * last phase_reset() (a trainer resets once per epoch). Header-only, one state per
 * program, for the thread that marks (the trainers' main or MPI thread).
 * Cost: a mark is one clock read and one add; nothing is timed that a trainer does not
 * mark. phase_hook, when set, is called with every mark (a timeline writer: the seconds
 * of each begin and end, e.g. into a Chrome trace); NULL by default.
 * Phases may nest (an MPI_Testall inside backward's compute): each phase counts its own
 * wall time.
 */
#ifndef PARTRAIN_PHASE_H
#define PARTRAIN_PHASE_H

#include "timer.h"

enum phase_id { PHASE_COMPUTE, PHASE_COMM, PHASE_WAIT, PHASE_UPDATE, PHASE_EVAL, PHASE_CHECKPOINT, N_PHASES };

/* called at every mark: the phase, 1 at its begin or 0 at its end, and timer_now() */
typedef void (*phase_hook_fn)(enum phase_id phase, int begin, double seconds);

static struct {
    double seconds[N_PHASES];   /* per phase, since phase_reset() */
    double since[N_PHASES];     /* the open phase's begin */
    phase_hook_fn hook;
} phase_state __attribute__((unused));

static inline const char *phase_name(enum phase_id p) {
    static const char *const names[N_PHASES] = { "compute", "comm", "wait", "update", "eval", "checkpoint" };
    return names[p];
}

static inline void phase_begin(enum phase_id p) {
    double t = timer_now();
    phase_state.since[p] = t;
    if (phase_state.hook) phase_state.hook(p, 1, t);
}

static inline void phase_end(enum phase_id p) {
    double t = timer_now();
    phase_state.seconds[p] += t - phase_state.since[p];
    if (phase_state.hook) phase_state.hook(p, 0, t);
}

static inline void phase_reset(void) {
    for (int p = 0; p < N_PHASES; p++) phase_state.seconds[p] = 0.0;
}

static inline double phase_seconds(enum phase_id p) { return phase_state.seconds[p]; }

static inline void phase_set_hook(phase_hook_fn hook) { phase_state.hook = hook; }

#endif
