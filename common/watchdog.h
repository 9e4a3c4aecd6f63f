/*
 * common/watchdog.h — the stuck-rank watchdog of the MPI trainers (--timeout-step S).
 *
 * A rank stopped by SIGSTOP, or a hung node, leaves the other ranks spinning inside a
 * collective forever. With --timeout-step S (default 60; 0: off) every rank runs one
 * watchdog thread that wakes once a second and looks at a progress counter, which the
 * trainer bumps once per training step and per evaluation chunk (watchdog_progress(),
 * watchdog_beat(): a few relaxed stores, no MPI call, no system call). When its own rank
 * has made no progress for S seconds, the thread holds a roll call over UDP (the main
 * thread is blocked in MPI, and the thread levels in use forbid MPI calls from another
 * thread): every rank's watchdog thread answers with its rank, position and seconds since
 * its last progress. After a grace of 2.5 s (three sends):
 *   - a rank that did not answer (and did not say it finished) is stopped or hung: the
 *     lowest-numbered rank that answered prints one line naming it, and MPI_Abort ends
 *     the job (exit status 1);
 *   - every rank answered and one of them made progress within S seconds: a slow step
 *     or an unbalanced phase, not a hang; nothing happens;
 *   - every rank answered and none made progress for S seconds, twice in a row: a
 *     deadlock (or a step slower than S): one line, MPI_Abort.
 * The addresses: at watchdog_start() (once, after set-up, collective) one MPI_Allgather
 * exchanges every rank's pid, host name and IPv4 addresses (getifaddrs). When every rank
 * has this rank's addresses (one host, one network namespace) the socket binds 127.0.0.1;
 * else it binds the address the kernel routes to the first rank elsewhere (the interface
 * between the nodes, as MPI's own traffic), never 0.0.0.0; a second MPI_Allgather
 * exchanges the bound address and port. A rank never heard over UDP (a firewall) is not
 * judged: one note, no abort.
 * Authentication: rank 0 draws a 128-bit key (getrandom) and MPI_Bcast shares it: it
 * travels only inside the job's own MPI traffic (between hosts as clear as MPI's TCP
 * transport is), never in a watchdog datagram. Every datagram carries the sender's rank, a counter
 * that grows with every datagram it sends, and SipHash-2-4 under the key over all of it;
 * a receiver drops a datagram whose tag is wrong (forged, or another job's) or whose
 * counter is not above the last one it accepted from that rank (a replay).
 * The thread stops before MPI_Finalize (an atexit handler registered after the trainer's
 * finalize_at_exit runs first) and tells the others it finished.
 *
 * Messages start with common/program.h's program_name. The implementation is
 * common/watchdog.c (link it into every MPI program, with -pthread). Use:
 *   parse loop:   if (watchdog_parse(program_name, argc, argv, &i)) continue;
 *   usage():      watchdog_usage();
 *   after set-up: watchdog_start();
 *   per step:     watchdog_progress(epoch, step);  per evaluation chunk: watchdog_beat();
 */
#ifndef PARTRAIN_WATCHDOG_H
#define PARTRAIN_WATCHDOG_H

#include <mpi.h>   /* the watchdog belongs to MPI programs: watchdog_start() is collective */

/* --timeout-step S: 1 if argv[*i] is the flag (its value consumed); a bad value: one line, exit 2 */
int watchdog_parse(const char *prog, int argc, char **argv, int *i);
void watchdog_usage(void);
/* after set-up, on every rank (collective): addresses, key, socket, the thread */
void watchdog_start(void);

/* where the trainer is: written by its main thread, read by the watchdog thread (relaxed) */
typedef struct { unsigned long beat; int epoch; long step; } watchdog_position;
extern watchdog_position watchdog_now;

/* the trainer, once per training step (epoch and step of the step it starts) */
static inline void watchdog_progress(int epoch, long step) {
    __atomic_store_n(&watchdog_now.epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&watchdog_now.step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&watchdog_now.beat, __atomic_load_n(&watchdog_now.beat, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}
/* the trainer, once per chunk of any other long phase (evaluation) */
static inline void watchdog_beat(void) {
    __atomic_store_n(&watchdog_now.beat, __atomic_load_n(&watchdog_now.beat, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

#endif
