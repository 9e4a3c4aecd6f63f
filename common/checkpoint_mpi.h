/*
 * common/checkpoint_mpi.h — common/checkpoint.h over MPI ranks (header-only): --resume
 * read by rank 0 and sent to every rank, and the after-epoch write by rank 0 alone.
 */
#ifndef PARTRAIN_CHECKPOINT_MPI_H
#define PARTRAIN_CHECKPOINT_MPI_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* POSIX calls under -std=c11, when this is the first include */
#endif

#include <mpi.h>

#include "checkpoint.h"
#include "idx.h"
#include "mpi_util.h"
#include "options.h"
#include "program.h"
#include "timer.h"

/* --resume: rank 0 reads and checks the file (another node's ranks may not see it); if it
 * is bad, every rank exits 2; else rank 0 sends the state to every rank (the parameters
 * too when with_params: the replicas of data parallelism). */
static inline void resume_on_every_rank(checkpoint *c, const train_options *o, int with_params) {
    if (!o->resume) return;
    char err[IDX_ERR_LEN] = "";
    agree_or_die(rank == 0 && checkpoint_load(o->resume, c, o->epochs, err, sizeof err), err, 2);
    double state[2] = { (double)c->epochs_done, c->seconds };
    mpi_check(MPI_Bcast(state, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    c->epochs_done = (int)state[0];
    c->seconds = state[1];
    if (with_params) mpi_check(MPI_Bcast(c->params, (int)c->n_floats, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    for (int k = 0; k < c->n_series; k++)
        mpi_check(MPI_Bcast(c->series[k], c->epochs_done, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

/* After an epoch: rank 0 writes the checkpoint when one is due (the replicas are equal)
 * while the others wait, so that no epoch's time holds the write. Returns its seconds. */
static inline double checkpoint_after_epoch_root(const checkpoint *c, const train_options *o, int epoch, double seconds) {
    if (!checkpoint_due(o, epoch)) return 0.0;
    double t0 = timer_now();
    if (rank == 0) checkpoint_after_epoch(c, program_name, o, epoch, seconds);
    mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return timer_now() - t0;
}

#endif
