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
 * The addresses: at watchdog_start() (once, after set-up, collective) every rank opens a
 * UDP socket on port 0 and one MPI_Allgather exchanges rank, pid, host name, port, all
 * of the host's IPv4 addresses (getifaddrs: ranks may be on other hosts, or in other
 * network namespaces of one host) and rank 0's random job nonce, which every datagram
 * carries. A rank never heard over UDP (a firewall) is not judged: one note, no abort.
 * The thread stops before MPI_Finalize (an atexit handler registered after the trainer's
 * finalize_at_exit runs first) and tells the others it finished.
 *
 * Messages start with common/program.h's program_name. Without <mpi.h> included first
 * (cuda/cuda, cuda/cuda-emu) every function here is an empty stub and the flag is not
 * accepted. Use:
 *   parse loop:   if (watchdog_parse(program_name, argc, argv, &i)) continue;
 *   usage():      watchdog_usage();
 *   after set-up: watchdog_start();
 *   per step:     watchdog_progress(epoch, step);  per evaluation chunk: watchdog_beat();
 */
#ifndef PARTRAIN_WATCHDOG_H
#define PARTRAIN_WATCHDOG_H

#ifndef MPI_VERSION

static inline int watchdog_parse(const char *prog, int argc, char **argv, int *i) {
    (void)prog; (void)argc; (void)argv; (void)i;
    return 0;
}
static inline void watchdog_usage(void) {}
static inline void watchdog_start(void) {}
static inline void watchdog_progress(int epoch, long step) { (void)epoch; (void)step; }
static inline void watchdog_beat(void) {}

#else

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "options.h"
#include "program.h"

#define WD_MAX_ADDRS 8          /* IPv4 addresses per rank */
#define WD_GRACE 2.5            /* seconds a roll call waits for the answers */
#define WD_SENDS 3              /* roll-call datagrams per rank within the grace */
#define WD_MAGIC 0x70774447u    /* "pwDG" */
enum { WD_HELLO = 1, WD_HELLO_ACK, WD_ROLLCALL, WD_ANSWER, WD_DONE };

typedef struct {                /* one rank, as the MPI_Allgather of watchdog_start() shares it */
    uint32_t nonce[2];          /* rank 0's is the job's */
    int32_t pid;
    uint16_t port;              /* network order; 0: this rank has no watchdog socket */
    uint16_t n_addrs;
    uint32_t addrs[WD_MAX_ADDRS];   /* IPv4, network order */
    char host[64];
} wd_peer;

typedef struct {                /* a datagram; every field in network order */
    uint32_t magic, nonce0, nonce1, kind, from, round, epoch, step, idle_ms;
} wd_msg;

typedef struct {                /* what the watchdog thread knows of another rank */
    int heard, done, answered, mark;
    double idle;
    uint32_t epoch, step;
} wd_rank_state;

static double wd_timeout __attribute__((unused)) = 60.0;   /* --timeout-step seconds (0: off) */
static struct {
    int verbose;                /* PARTRAIN_WATCHDOG_VERBOSE=1 (test hook): every verdict on stderr */
    int running, stop, me, n, fd, wake[2];
    pthread_t thread;
    wd_peer *peers;
    wd_rank_state *ranks;
    /* the trainer's side: written by its main thread, read by the watchdog (relaxed) */
    unsigned long beat;
    int epoch;
    long step;
} wd __attribute__((unused));   /* set by watchdog_start() */

/* --timeout-step S: 1 if argv[*i] is the flag (its value consumed); a bad value: one line, exit 2 */
static inline int watchdog_parse(const char *prog, int argc, char **argv, int *i) {
    if (strcmp(argv[*i], "--timeout-step")) return 0;
    wd_timeout = options_double(prog, "--timeout-step", options_value(prog, argc, argv, i), 0.0, 86400.0);
    return 1;
}

static inline void watchdog_usage(void) {
    printf("  --timeout-step S      abort the job when a rank makes no progress for S seconds\n"
           "                        (stopped or hung), naming the silent rank; 0: off [60]\n");
}

/* the trainer, once per training step (epoch and step of the step it starts) */
static inline void watchdog_progress(int epoch, long step) {
    __atomic_store_n(&wd.epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&wd.step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&wd.beat, __atomic_load_n(&wd.beat, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}
/* the trainer, once per chunk of any other long phase (evaluation) */
static inline void watchdog_beat(void) {
    __atomic_store_n(&wd.beat, __atomic_load_n(&wd.beat, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static inline double wd_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void wd_send_to(const struct sockaddr_in *to, uint32_t kind, uint32_t round, double idle) {
    wd_msg m;
    double ms = idle * 1000.0;
    m.magic = htonl(WD_MAGIC);
    m.nonce0 = htonl(wd.peers[0].nonce[0]);
    m.nonce1 = htonl(wd.peers[0].nonce[1]);
    m.kind = htonl(kind);
    m.from = htonl((uint32_t)wd.me);
    m.round = htonl(round);
    m.epoch = htonl((uint32_t)__atomic_load_n(&wd.epoch, __ATOMIC_RELAXED));
    m.step = htonl((uint32_t)__atomic_load_n(&wd.step, __ATOMIC_RELAXED));
    m.idle_ms = htonl(ms < 0 ? 0u : ms > 4e9 ? 4000000000u : (uint32_t)ms);
    /* best effort: an address that does not route just fails */
    (void)!sendto(wd.fd, &m, sizeof m, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof *to);
}

/* a datagram to every address of rank r */
static inline void wd_send_rank(int r, uint32_t kind, uint32_t round, double idle) {
    const wd_peer *p = &wd.peers[r];
    if (!p->port) return;
    for (int a = 0; a < p->n_addrs && a < WD_MAX_ADDRS; a++) {
        struct sockaddr_in to;
        memset(&to, 0, sizeof to);
        to.sin_family = AF_INET;
        to.sin_port = p->port;
        to.sin_addr.s_addr = p->addrs[a];
        wd_send_to(&to, kind, round, idle);
    }
}

/* "rank 1 (host h, pid 12)" or "ranks 1 (host h, pid 12), 3 (...)": the marked ranks */
static inline void wd_name_ranks(char *buf, size_t len, int count) {
    size_t used = (size_t)snprintf(buf, len, "rank%s ", count > 1 ? "s" : "");
    for (int r = 0, k = 0; r < wd.n && used < len; r++) {
        if (!wd.ranks[r].mark) continue;
        if (k == 4) { snprintf(buf + used, len - used, ", and %d more", count - 4); break; }
        used += (size_t)snprintf(buf + used, len - used, "%s%d (host %s, pid %d)", k ? ", " : "", r,
                                 wd.peers[r].host, (int)wd.peers[r].pid);
        k++;
    }
}

static inline void wd_abort(void) {
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);   /* OpenMPI ends the job from any thread */
    _exit(1);
}

/* The watchdog thread: progress seen, roll calls, answers to the others. */
static inline void *wd_main(void *arg) {
    (void)arg;
    int n = wd.n, me = wd.me;
    unsigned long seen = __atomic_load_n(&wd.beat, __ATOMIC_RELAXED);
    double now = wd_now(), last_progress = now, next_roll = now + wd_timeout;
    double roll_idle = 0, roll_end = 0, next_send = 0, deferred_since = 0;
    unsigned long roll_beat = 0;
    uint32_t round = 0;
    int rolling = 0, sends = 0, deadlocks = 0, noted = 0;
    for (int r = 0; r < n; r++) if (r != me) wd_send_rank(r, WD_HELLO, 0, 0);
    while (!__atomic_load_n(&wd.stop, __ATOMIC_ACQUIRE)) {
        now = wd_now();
        unsigned long b = __atomic_load_n(&wd.beat, __ATOMIC_RELAXED);
        if (b != seen) { seen = b; last_progress = now; }
        double idle = now - last_progress;
        if (!rolling && now >= next_roll && idle >= wd_timeout) {   /* start a roll call */
            rolling = 1;
            round++;
            sends = 0;
            roll_end = now + WD_GRACE;
            roll_idle = idle;
            next_send = now;
            roll_beat = seen;
            for (int r = 0; r < n; r++) wd.ranks[r].answered = 0;
        }
        if (rolling && sends < WD_SENDS && now >= next_send) {
            for (int r = 0; r < n; r++)
                if (r != me && !wd.ranks[r].done && !wd.ranks[r].answered) wd_send_rank(r, WD_ROLLCALL, round, 0);
            sends++;
            next_send = now + WD_GRACE / WD_SENDS;
        }
        if (rolling && now >= roll_end) {   /* the verdict */
            rolling = 0;
            next_roll = now + 1.0;
            int silent = 0, unheard = 0, answered = 0, lowest = me, others_idle = 1;
            double least_idle = 1e30;   /* of the ranks that answered */
            for (int r = 0; r < n; r++) {
                wd_rank_state *s = &wd.ranks[r];
                wd.ranks[r].mark = 0;
                if (r == me || s->done) continue;
                if (s->answered) {
                    answered++;
                    if (r < lowest) lowest = r;
                    if (s->idle < wd_timeout) others_idle = 0;
                    if (s->idle < least_idle) least_idle = s->idle;
                } else if (s->heard) { wd.ranks[r].mark = 1; silent++; }
                else unheard++;
            }
            if (seen != roll_beat || !(answered && others_idle && !silent && !unheard)) deadlocks = 0;
            if (wd.verbose)
                fprintf(stderr, "%s: rank %d: watchdog: roll call after %.1f s without progress: %d answered "
                        "(least idle %.1f s), %d silent, %d unheard: %s\n", program_name, me, roll_idle, answered, answered ? least_idle : 0.0, silent,
                        unheard, seen != roll_beat ? "this rank moved on" : silent ? "stopped or hung" : unheard ? "unreachable"
                        : answered && others_idle ? "no rank progresses" : answered ? "a slow step elsewhere" : "the others finished");
            if (seen != roll_beat) {
                /* this rank moved on during the roll call: no verdict */
            } else if (silent) {
                char who[512];
                wd_name_ranks(who, sizeof who, silent);
                if (lowest == me || (deferred_since > 0 && now - deferred_since > (wd_timeout > 10 ? wd_timeout : 10))) {
                    fprintf(stderr, "%s: %s %s (stopped or hung); rank %d has made no progress for %.0f s "
                            "(waiting since epoch %d step %ld); aborting (--timeout-step %g)\n",
                            program_name, who, silent > 1 ? "do not answer" : "does not answer", me, now - last_progress,
                            __atomic_load_n(&wd.epoch, __ATOMIC_RELAXED), __atomic_load_n(&wd.step, __ATOMIC_RELAXED), wd_timeout);
                    wd_abort();
                }
                if (deferred_since == 0) deferred_since = now;   /* rank `lowest` reports it */
            } else if (unheard) {
                if (!noted) {
                    for (int r = 0; r < n; r++) wd.ranks[r].mark = r != me && !wd.ranks[r].done && !wd.ranks[r].heard;
                    char who[512];
                    wd_name_ranks(who, sizeof who, unheard);
                    fprintf(stderr, "%s: rank %d: watchdog: %s never answered over UDP (blocked?): a stopped "
                            "rank cannot be told from a slow one\n", program_name, me, who);
                    noted = 1;
                }
                next_roll = now + wd_timeout;
            } else if (answered && others_idle) {
                /* every rank answered, none progressed: a deadlock, if the next roll call agrees */
                if (++deadlocks >= 2 && lowest == me) {
                    fprintf(stderr, "%s: no rank has made progress for %.0f s, and all %d answer: a deadlock, or a "
                            "step slower than --timeout-step %g; rank %d waits since epoch %d step %ld; aborting\n",
                            program_name, now - last_progress, answered + 1, wd_timeout, me,
                            __atomic_load_n(&wd.epoch, __ATOMIC_RELAXED), __atomic_load_n(&wd.step, __ATOMIC_RELAXED));
                    wd_abort();
                }
            } else {
                /* a slow step elsewhere, or every other rank finished: look again when the
                 * rank that progressed last would reach the timeout */
                deferred_since = 0;
                if (answered) next_roll = now + (wd_timeout - least_idle > 1.0 ? wd_timeout - least_idle : 1.0);
                else next_roll = now + wd_timeout;
            }
        }
        /* sleep until the next event (at most 1 s), or a datagram, or the stop */
        double wake_at = now + 1.0;
        if (rolling) wake_at = sends < WD_SENDS && next_send < roll_end ? next_send : roll_end;
        int ms = (int)((wake_at - now) * 1000.0) + 1;
        struct pollfd pf[2];
        pf[0].fd = wd.fd; pf[0].events = POLLIN; pf[0].revents = 0;
        pf[1].fd = wd.wake[0]; pf[1].events = POLLIN; pf[1].revents = 0;
        if (poll(pf, 2, ms < 1 ? 1 : ms) <= 0 || !(pf[0].revents & POLLIN)) continue;
        for (;;) {   /* every datagram waiting */
            wd_msg m;
            struct sockaddr_in from;
            socklen_t fromlen = sizeof from;
            ssize_t got = recvfrom(wd.fd, &m, sizeof m, MSG_DONTWAIT, (struct sockaddr *)&from, &fromlen);
            if (got < 0) break;
            if (got != (ssize_t)sizeof m || ntohl(m.magic) != WD_MAGIC || ntohl(m.nonce0) != wd.peers[0].nonce[0] ||
                ntohl(m.nonce1) != wd.peers[0].nonce[1] || ntohl(m.from) >= (uint32_t)n || (int)ntohl(m.from) == me)
                continue;   /* not this job's */
            int r = (int)ntohl(m.from);
            uint32_t kind = ntohl(m.kind);
            wd_rank_state *s = &wd.ranks[r];
            s->heard = 1;
            now = wd_now();
            b = __atomic_load_n(&wd.beat, __ATOMIC_RELAXED);
            if (b != seen) { seen = b; last_progress = now; }
            if (kind == WD_HELLO) wd_send_to(&from, WD_HELLO_ACK, 0, 0);
            else if (kind == WD_ROLLCALL) wd_send_to(&from, WD_ANSWER, ntohl(m.round), now - last_progress);
            else if (kind == WD_DONE) s->done = 1;
            else if (kind == WD_ANSWER && rolling && ntohl(m.round) == round) {
                s->answered = 1;   /* the latest answer counts (resends) */
                s->idle = ntohl(m.idle_ms) / 1000.0;
                s->epoch = ntohl(m.epoch);
                s->step = ntohl(m.step);
            }
        }
    }
    return NULL;
}

/* Stops the thread (atexit, or any exit before MPI_Finalize) and tells the others. */
static inline void watchdog_stop(void) {
    if (!wd.running) return;
    wd.running = 0;
    if (pthread_equal(pthread_self(), wd.thread)) return;   /* exit() from the watchdog itself */
    __atomic_store_n(&wd.stop, 1, __ATOMIC_RELEASE);
    (void)!write(wd.wake[1], "x", 1);
    pthread_join(wd.thread, NULL);
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < wd.n; r++) if (r != wd.me) wd_send_rank(r, WD_DONE, 0, 0);
    close(wd.fd);
    close(wd.wake[0]);
    close(wd.wake[1]);
    free(wd.peers);
    free(wd.ranks);
    wd.peers = NULL;
    wd.ranks = NULL;
}

/* Collective (every rank, after set-up, before the first step): the socket, the
 * MPI_Allgather of the addresses, the thread. Nothing with one rank or --timeout-step 0. */
static inline void watchdog_start(void) {
    int me = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n < 2 || wd_timeout <= 0 || wd.running) return;
    wd_peer mine;
    memset(&mine, 0, sizeof mine);
    mine.pid = (int32_t)getpid();
    gethostname(mine.host, sizeof mine.host - 1);
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, mine.nonce, sizeof mine.nonce) != (ssize_t)sizeof mine.nonce) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        mine.nonce[0] = (uint32_t)(t.tv_sec & 0xffffffff) ^ ((uint32_t)getpid() << 12);
        mine.nonce[1] = (uint32_t)t.tv_nsec;
    }
    if (fd >= 0) close(fd);
    const char *why = NULL;
    wd.fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in any;
    memset(&any, 0, sizeof any);
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof any;
    if (wd.fd < 0) why = "socket";
    else if (bind(wd.fd, (struct sockaddr *)&any, sizeof any)) why = "bind";
    else if (getsockname(wd.fd, (struct sockaddr *)&any, &len)) why = "getsockname";
    else if (pipe(wd.wake)) why = "pipe";
    if (!why) {
        fcntl(wd.fd, F_SETFD, FD_CLOEXEC);
        fcntl(wd.wake[0], F_SETFD, FD_CLOEXEC);
        fcntl(wd.wake[1], F_SETFD, FD_CLOEXEC);
        mine.port = any.sin_port;
        struct ifaddrs *ifs = NULL;
        if (!getifaddrs(&ifs)) {
            for (struct ifaddrs *i = ifs; i && mine.n_addrs < WD_MAX_ADDRS; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
                    mine.addrs[mine.n_addrs++] = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr;
            freeifaddrs(ifs);
        }
        if (!mine.n_addrs) mine.addrs[mine.n_addrs++] = htonl(INADDR_LOOPBACK);
    } else {
        fprintf(stderr, "%s: rank %d: watchdog off on this rank: %s: %s\n", program_name, me, why, strerror(errno));
        if (wd.fd >= 0) close(wd.fd);
        wd.fd = -1;
    }
    wd.peers = (wd_peer *)calloc((size_t)n, sizeof(wd_peer));
    wd.ranks = (wd_rank_state *)calloc((size_t)n, sizeof(wd_rank_state));
    if (!wd.peers || !wd.ranks) { fprintf(stderr, "%s: rank %d: out of memory\n", program_name, me); wd_abort(); }
    int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, wd.peers, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) { fprintf(stderr, "%s: rank %d: MPI_Allgather failed\n", program_name, me); wd_abort(); }
    wd.me = me;
    wd.n = n;
    wd.verbose = getenv("PARTRAIN_WATCHDOG_VERBOSE") && !strcmp(getenv("PARTRAIN_WATCHDOG_VERBOSE"), "1");
    if (why) { free(wd.peers); free(wd.ranks); wd.peers = NULL; wd.ranks = NULL; return; }
    /* the thread takes no signal: Ctrl-C and mpirun's signals go to the trainer as before */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&wd.thread, NULL, wd_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fprintf(stderr, "%s: rank %d: watchdog off on this rank: pthread_create: %s\n", program_name, me, strerror(rc));
        close(wd.fd); close(wd.wake[0]); close(wd.wake[1]);
        free(wd.peers); free(wd.ranks); wd.peers = NULL; wd.ranks = NULL;
        return;
    }
    wd.running = 1;
    atexit(watchdog_stop);
}

#endif /* MPI_VERSION */
#endif
