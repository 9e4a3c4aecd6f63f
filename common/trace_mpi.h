/*
 * common/trace_mpi.h — --trace over MPI ranks (header-only): the clock's zero at one
 * barrier's exit, and every rank's events gathered to rank 0 (MPI_Gatherv of each rank's
 * JSON text), which writes the one file (common/trace.h). Nothing happens without --trace.
 */
#ifndef PARTRAIN_TRACE_MPI_H
#define PARTRAIN_TRACE_MPI_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* POSIX calls under -std=c11, when this is the first include */
#endif

#include <limits.h>

#include <mpi.h>

#include "mpi_util.h"
#include "trace.h"

/* Collective when --trace is given (every rank has the same flags): t0 = a barrier's exit */
static inline void trace_start_mpi(void) {
    if (!trace_state.on) return;
    mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    trace_start();
}

/* Collective when --trace is given: rank 0 writes the file with every rank's events.
 * Returns 0, or 1 on rank 0 when the file could not be written (the message printed). */
static inline int trace_finish_mpi(const char *program, const char *variant, const train_options *o) {
    if (!trace_state.on) return 0;
    trace_state.active = 0;
    size_t len = 0;
    char *events = trace_events_json(&len);
    int mine = events && len < INT_MAX ? (int)len : -1, *lens = NULL, *displs = NULL;
    if (rank == 0) {
        lens = (int *)malloc(sizeof(int) * (size_t)nranks);
        displs = (int *)malloc(sizeof(int) * (size_t)nranks);
    }
    agree_or_die(rank == 0 && (!lens || !displs), "--trace: out of memory", 1);
    mpi_check(MPI_Gather(&mine, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    char *all = NULL, err[IDX_ERR_LEN] = "";
    int bad = 0;
    long total = 0;
    if (rank == 0) {
        for (int r = 0; r < nranks; r++) {
            if (lens[r] < 0) bad = 1, lens[r] = 0;
            displs[r] = (int)total;
            total += lens[r];
        }
        if (total >= INT_MAX) bad = 1;
        all = bad ? NULL : (char *)malloc((size_t)total + 1);
        if (!all) bad = 1;
    }
    mpi_check(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    int status = 0;
    if (!bad) {
        mpi_check(MPI_Gatherv(events, mine, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Gatherv");
        if (rank == 0) {
            char header[1024];
            trace_header(header, sizeof header, program, variant, nranks, o);
            status = trace_write_file(o->trace, header, all, (size_t)total, err, sizeof err) ? 1 : 0;
        }
    } else if (rank == 0) {
        snprintf(err, sizeof err, "--trace %s: out of memory gathering the ranks' events", o->trace);
        status = 1;
    }
    if (status) fprintf(stderr, "%s: %s\n", program_name, err);
    free(events); free(all); free(lens); free(displs);
    trace_free();
    return status;
}

#endif
