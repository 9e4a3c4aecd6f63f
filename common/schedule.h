/*
 * common/schedule.h — the learning rate of every step, and the time-to-accuracy stop.
 *
 * Every trainer takes its step's rate from lr_at(), so serial, OpenMP, MPI, hybrid, CNN
 * and CUDA keep equal maths under any schedule. Defaults (--lr-scaling none) give
 * (float)--lr for every step: today's bits.
 *
 * --lr-scaling linear (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): the rate
 * is --lr x batch / --lr-base-batch, batch the global mini-batch. --warmup-epochs W
 * ramps it linearly per step from --lr to that rate over the first W epochs (gradual
 * warm-up): step s of the run (0-based, S steps per epoch) takes
 *   lr + (lr x batch / B0 - lr) x s / (W x S)   while s < W x S, then lr x batch / B0.
 *
 * --target-accuracy A: the run stops at the end of the first epoch whose test accuracy
 * is >= A percent (MLPerf's time-to-accuracy). The result row then counts the epochs
 * run; results_fill() fills epochs_to_target and seconds_to_target (= total_seconds:
 * the training loop up to the end of that epoch's evaluation).
 */
#ifndef PARTRAIN_SCHEDULE_H
#define PARTRAIN_SCHEDULE_H

#include <stdio.h>

#include "options.h"

/* The rate of step `step` (0-based) of epoch `epoch` (1-based), S steps per epoch. */
static inline float lr_at(const train_options *o, int epoch, long step, long steps_per_epoch) {
    if (o->lr_scaling == LR_SCALING_NONE) return (float)o->lr;
    double peak = o->lr * (double)o->batch / (double)o->lr_base_batch;
    double ramp = (double)o->warmup_epochs * (double)steps_per_epoch;
    double s = (double)(epoch - 1) * (double)steps_per_epoch + (double)step;
    if (s >= ramp) return (float)peak;
    return (float)(o->lr + (peak - o->lr) * s / ramp);
}

/* Global mini-batches per epoch of train_n samples: the S of lr_at(). */
static inline long steps_per_epoch(const train_options *o, long train_n) {
    return (train_n + o->batch - 1) / o->batch;
}

/* After epoch `epoch`'s evaluation (test_acc in percent): 1 when --target-accuracy is
 * reached, and the run then ends with this epoch (o->epochs = epoch, so that the last
 * checkpoint and the row count the epochs run); 0 otherwise. In MPI trainers every rank
 * passes the same reduced accuracy, so all ranks stop together. */
static inline int target_reached(train_options *o, int epoch, double test_acc) {
    if (!(o->target_accuracy > 0 && test_acc >= o->target_accuracy)) return 0;
    o->epochs = epoch;
    return 1;
}

/* --resume: the target reached at the checkpoint's last epoch ends the run there (the
 * row is that run's); reached at an earlier epoch, the seconds to it are unknown:
 * -1 with one line in err. acc: the loaded accuracy curve (percent). */
static inline int target_resumed(train_options *o, const double *acc, int epochs_done, char *err, size_t errlen) {
    for (int e = 1; o->target_accuracy > 0 && e <= epochs_done; e++)
        if (acc[e - 1] >= o->target_accuracy) {
            if (e == epochs_done) { o->epochs = e; return 0; }
            snprintf(err, errlen, "--resume: the checkpoint reached --target-accuracy %g%% at epoch %d of its %d; "
                     "resume without --target-accuracy", o->target_accuracy, e, epochs_done);
            return -1;
        }
    return 0;
}

/* Before the work: --warmup-epochs needs --lr-scaling linear. 0, or -1 + one line in err. */
static inline int schedule_check_flags(const train_options *o, char *err, size_t errlen) {
    if (o->warmup_epochs > 0 && o->lr_scaling == LR_SCALING_NONE) {
        snprintf(err, errlen, "--warmup-epochs: needs --lr-scaling linear (it ramps --lr to the scaled rate)");
        return -1;
    }
    return 0;
}

#endif
