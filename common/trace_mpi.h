/*
 * common/trace_mpi.h — --trace over MPI ranks (header-only): the clock's zero at one
 * barrier's exit, and every rank's events gathered to rank 0 (MPI_Gatherv of each rank's
 * JSON text), which writes the one file (common/trace.h). Nothing happens without --trace.
 * Needs only <mpi.h> (not mpi_util.h: cuda/cuda.cu's MPI build has its own plumbing); a
 * failed MPI call prints one line and ends the job (MPI_Abort), as mpi_util.h's do.
 */
#ifndef PARTRAIN_TRACE_MPI_H
#define PARTRAIN_TRACE_MPI_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* POSIX calls under -std=c11, when this is the first include */
#endif

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "program.h"
#include "trace.h"

static inline void trace_mpi_check(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error code %d", rc);
    fprintf(stderr, "%s: rank %d: %s failed (--trace): %s\n", program_name, trace_state.rank, call, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Collective when --trace is given (every rank has the same flags): t0 = a barrier's exit */
static inline void trace_start_mpi(void) {
    if (!trace_state.on) return;
    trace_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    trace_start();
}

/* Collective when --trace is given: rank 0 writes the file with every rank's events.
 * Returns 0, or 1 on rank 0 when the file could not be written (the message printed). */
static inline int trace_finish_mpi(const char *program, const char *variant, const train_options *o) {
    if (!trace_state.on) return 0;
    __atomic_store_n(&trace_state.active, 0, __ATOMIC_RELAXED);
    int rank = 0, nranks = 1;
    trace_mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    trace_mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
    size_t len = 0;
    char *events = trace_events_json(&len), *all = NULL, err[4400] = "";
    int mine = events && len < INT_MAX ? (int)len : -1, *lens = NULL, *displs = NULL, bad = 0;
    if (rank == 0) {
        lens = (int *)malloc(sizeof(int) * (size_t)nranks);
        displs = (int *)malloc(sizeof(int) * (size_t)nranks);
        bad = !lens || !displs;
    }
    trace_mpi_check(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    if (!bad) trace_mpi_check(MPI_Gather(&mine, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    long total = 0;
    if (rank == 0 && !bad) {
        for (int r = 0; r < nranks; r++) {
            if (lens[r] < 0) bad = 1, lens[r] = 0;
            displs[r] = (int)total;
            total += lens[r];
        }
        if (total >= INT_MAX) bad = 1;
        all = bad ? NULL : (char *)malloc((size_t)total + 1);
        if (!all) bad = 1;
    }
    trace_mpi_check(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    int status = 0;
    if (!bad) {
        trace_mpi_check(MPI_Gatherv(events, mine, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Gatherv");
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
