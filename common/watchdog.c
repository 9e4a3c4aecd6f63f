/*
 * common/watchdog.c — the stuck-rank watchdog's thread, sockets and roll call
 * (common/watchdog.h says what it does and how a trainer uses it).
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "options.h"
#include "program.h"
#include "siphash.h"
#include "watchdog.h"

#define WD_MAX_ADDRS 8          /* IPv4 addresses per rank */
#define WD_GRACE 2.5            /* seconds a roll call waits for the answers */
#define WD_SENDS 3              /* roll-call datagrams per rank within the grace */
#define WD_MAGIC 0x70774448u    /* "pwDH": the authenticated format */
enum { WD_HELLO = 1, WD_HELLO_ACK, WD_ROLLCALL, WD_ANSWER, WD_DONE };

typedef struct {                /* one rank, as the MPI_Allgathers of watchdog_start() share it */
    int32_t pid;
    uint16_t port;              /* network order; 0: this rank has no watchdog socket */
    uint16_t n_addrs;
    uint32_t addrs[WD_MAX_ADDRS];   /* IPv4, network order: the host's, then the bound one alone */
    char host[64];
} wd_peer;

typedef struct {                /* a datagram; every field in network order */
    uint32_t magic, kind, from, counter_hi, counter_lo, round, epoch, step, idle_ms;
    uint32_t tag[2];            /* SipHash-2-4 under the job's key of everything before it */
} wd_msg;

typedef struct {                /* what the watchdog thread knows of another rank */
    int heard, done, answered, mark;
    double idle;
    uint32_t epoch, step;
    uint64_t counter;           /* the last counter accepted from it */
} wd_rank_state;

static double wd_timeout = 60.0;   /* --timeout-step seconds (0: off) */
static struct {
    int verbose;                /* PARTRAIN_WATCHDOG_VERBOSE=1 (test hook): every verdict on stderr */
    int running, stop, me, n, fd, wake[2];
    pthread_t thread;
    uint64_t key[2];            /* the job's SipHash key (rank 0's, by MPI_Bcast) */
    uint64_t sent;              /* this rank's datagram counter */
    wd_peer *peers;
    wd_rank_state *ranks;
} wd;   /* set by watchdog_start() */

int watchdog_parse(const char *prog, int argc, char **argv, int *i) {
    if (strcmp(argv[*i], "--timeout-step")) return 0;
    wd_timeout = options_double(prog, "--timeout-step", options_value(prog, argc, argv, i), 0.0, 86400.0);
    return 1;
}

void watchdog_usage(void) {
    printf("  --timeout-step S      abort the job when a rank makes no progress for S seconds\n"
           "                        (stopped or hung), naming the silent rank; 0: off [60]\n");
}

watchdog_position watchdog_now = { 0, 0, 0 };

static double wd_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the tag of a datagram: SipHash of every field before it (as sent, network order) */
static void wd_tag(const wd_msg *m, uint32_t tag[2]) {
    uint64_t h = wd_siphash(wd.key, (const unsigned char *)m, offsetof(wd_msg, tag));
    tag[0] = htonl((uint32_t)(h >> 32));
    tag[1] = htonl((uint32_t)h);
}

static void wd_send_to(const struct sockaddr_in *to, uint32_t kind, uint32_t round, double idle) {
    wd_msg m;
    double ms = idle * 1000.0;
    uint64_t counter = ++wd.sent;   /* only one thread sends at a time (the watchdog's, then stop's) */
    m.magic = htonl(WD_MAGIC);
    m.counter_hi = htonl((uint32_t)(counter >> 32));
    m.counter_lo = htonl((uint32_t)counter);
    m.kind = htonl(kind);
    m.from = htonl((uint32_t)wd.me);
    m.round = htonl(round);
    m.epoch = htonl((uint32_t)__atomic_load_n(&watchdog_now.epoch, __ATOMIC_RELAXED));
    m.step = htonl((uint32_t)__atomic_load_n(&watchdog_now.step, __ATOMIC_RELAXED));
    m.idle_ms = htonl(ms < 0 ? 0u : ms > 4e9 ? 4000000000u : (uint32_t)ms);
    wd_tag(&m, m.tag);
    /* best effort: an address that does not route just fails */
    (void)!sendto(wd.fd, &m, sizeof m, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof *to);
}

/* a datagram to every address of rank r */
static void wd_send_rank(int r, uint32_t kind, uint32_t round, double idle) {
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
static void wd_name_ranks(char *buf, size_t len, int count) {
    size_t used = (size_t)snprintf(buf, len, "rank%s ", count > 1 ? "s" : "");
    for (int r = 0, k = 0; r < wd.n && used < len; r++) {
        if (!wd.ranks[r].mark) continue;
        if (k == 4) { snprintf(buf + used, len - used, ", and %d more", count - 4); break; }
        used += (size_t)snprintf(buf + used, len - used, "%s%d (host %s, pid %d)", k ? ", " : "", r,
                                 wd.peers[r].host, (int)wd.peers[r].pid);
        k++;
    }
}

static void wd_abort(void) {
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);   /* OpenMPI ends the job from any thread */
    _exit(1);
}

/* The watchdog thread: progress seen, roll calls, answers to the others. */
static void *wd_main(void *arg) {
    (void)arg;
    int n = wd.n, me = wd.me;
    unsigned long seen = __atomic_load_n(&watchdog_now.beat, __ATOMIC_RELAXED);
    double now = wd_now(), last_progress = now, next_roll = now + wd_timeout;
    double roll_idle = 0, roll_end = 0, next_send = 0, deferred_since = 0;
    unsigned long roll_beat = 0;
    uint32_t round = 0;
    int rolling = 0, sends = 0, deadlocks = 0, noted = 0;
    for (int r = 0; r < n; r++) if (r != me) wd_send_rank(r, WD_HELLO, 0, 0);
    while (!__atomic_load_n(&wd.stop, __ATOMIC_ACQUIRE)) {
        now = wd_now();
        unsigned long b = __atomic_load_n(&watchdog_now.beat, __ATOMIC_RELAXED);
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
                            __atomic_load_n(&watchdog_now.epoch, __ATOMIC_RELAXED), __atomic_load_n(&watchdog_now.step, __ATOMIC_RELAXED), wd_timeout);
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
                            __atomic_load_n(&watchdog_now.epoch, __ATOMIC_RELAXED), __atomic_load_n(&watchdog_now.step, __ATOMIC_RELAXED));
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
            if (got != (ssize_t)sizeof m || ntohl(m.magic) != WD_MAGIC || ntohl(m.from) >= (uint32_t)n ||
                (int)ntohl(m.from) == me)
                continue;   /* not this job's */
            uint32_t tag[2];
            wd_tag(&m, tag);
            if (((tag[0] ^ m.tag[0]) | (tag[1] ^ m.tag[1])) != 0) {
                if (wd.verbose) fprintf(stderr, "%s: rank %d: watchdog: a datagram with a wrong tag dropped\n", program_name, me);
                continue;   /* forged, or another job's key */
            }
            int r = (int)ntohl(m.from);
            uint32_t kind = ntohl(m.kind);
            wd_rank_state *s = &wd.ranks[r];
            uint64_t counter = ((uint64_t)ntohl(m.counter_hi) << 32) | ntohl(m.counter_lo);
            if (counter <= s->counter) {
                if (wd.verbose) fprintf(stderr, "%s: rank %d: watchdog: a replayed datagram dropped\n", program_name, me);
                continue;
            }
            s->counter = counter;
            s->heard = 1;
            now = wd_now();
            b = __atomic_load_n(&watchdog_now.beat, __ATOMIC_RELAXED);
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
static void watchdog_stop(void) {
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

/* Whether two ranks have the same IPv4 addresses: one host and one network namespace. */
static int wd_same_addrs(const wd_peer *a, const wd_peer *b) {
    return a->n_addrs == b->n_addrs && !memcmp(a->addrs, b->addrs, sizeof(uint32_t) * a->n_addrs);
}

/* The local address the kernel would send from to reach `to` (a UDP connect sends
 * nothing); 0 when there is no route or it is a loopback address. */
static uint32_t wd_route_from(uint32_t to) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    struct sockaddr_in dst, src;
    memset(&dst, 0, sizeof dst);
    dst.sin_family = AF_INET;
    dst.sin_port = htons(9);
    dst.sin_addr.s_addr = to;
    socklen_t len = sizeof src;
    uint32_t found = 0;
    if (!connect(s, (struct sockaddr *)&dst, sizeof dst) && !getsockname(s, (struct sockaddr *)&src, &len) &&
        (ntohl(src.sin_addr.s_addr) >> 24) != 127)
        found = src.sin_addr.s_addr;
    close(s);
    return found;
}

/* Collective (every rank, after set-up, before the first step): the addresses (first
 * MPI_Allgather), the key (MPI_Bcast from rank 0), the socket bound to loopback or to
 * the address that reaches the other hosts, the bound addresses and ports (second
 * MPI_Allgather), the thread. Nothing with one rank or --timeout-step 0. */
void watchdog_start(void) {
    int me = 0, n = 1;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &me) != MPI_SUCCESS || MPI_Comm_size(MPI_COMM_WORLD, &n) != MPI_SUCCESS) {
        fprintf(stderr, "%s: watchdog: MPI_Comm_rank/size failed\n", program_name);
        wd_abort();
    }
    if (n < 2 || wd_timeout <= 0 || wd.running) return;
    wd_peer mine;
    memset(&mine, 0, sizeof mine);
    mine.pid = (int32_t)getpid();
    gethostname(mine.host, sizeof mine.host - 1);
    struct ifaddrs *ifs = NULL;
    if (!getifaddrs(&ifs)) {
        for (struct ifaddrs *i = ifs; i && mine.n_addrs < WD_MAX_ADDRS; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
                mine.addrs[mine.n_addrs++] = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr;
        freeifaddrs(ifs);
    }
    wd.peers = (wd_peer *)calloc((size_t)n, sizeof(wd_peer));
    wd.ranks = (wd_rank_state *)calloc((size_t)n, sizeof(wd_rank_state));
    if (!wd.peers || !wd.ranks) { fprintf(stderr, "%s: rank %d: out of memory\n", program_name, me); wd_abort(); }
    /* 1. every rank's addresses */
    if (MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, wd.peers, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
        fprintf(stderr, "%s: rank %d: watchdog: MPI_Allgather failed\n", program_name, me);
        wd_abort();
    }
    /* 2. the key: drawn on rank 0, shared through MPI, never sent over UDP */
    uint64_t shared[3] = { 0, 0, 1 };   /* key, and whether rank 0 has one */
    if (me == 0 && getrandom(shared, 2 * sizeof(uint64_t), 0) != (ssize_t)(2 * sizeof(uint64_t))) shared[2] = 0;
    if (MPI_Bcast(shared, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "%s: rank %d: watchdog: MPI_Bcast failed\n", program_name, me);
        wd_abort();
    }
    wd.key[0] = shared[0];
    wd.key[1] = shared[1];
    int have_key = shared[2] != 0;
    memset(shared, 0, sizeof shared);
    /* 3. the address: loopback when every rank is here, else the one that reaches the others */
    uint32_t bind_to = htonl(INADDR_LOOPBACK);
    for (int r = 0; r < n; r++) {
        if (r == me || wd_same_addrs(&wd.peers[r], &mine)) continue;
        uint32_t from = 0;
        for (int a = 0; a < wd.peers[r].n_addrs && a < WD_MAX_ADDRS && !from; a++)
            if ((ntohl(wd.peers[r].addrs[a]) >> 24) != 127) from = wd_route_from(wd.peers[r].addrs[a]);
        if (from) { bind_to = from; break; }
    }
    const char *why = have_key ? NULL : "no key (getrandom failed on rank 0)";
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = bind_to;
    socklen_t len = sizeof addr;
    wd.fd = -1;
    wd.wake[0] = wd.wake[1] = -1;
    if (!why && (wd.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) why = "socket";
    else if (!why && bind(wd.fd, (struct sockaddr *)&addr, sizeof addr)) why = "bind";
    else if (!why && getsockname(wd.fd, (struct sockaddr *)&addr, &len)) why = "getsockname";
    else if (!why && pipe(wd.wake)) why = "pipe";
    if (!why) { fcntl(wd.wake[0], F_SETFD, FD_CLOEXEC); fcntl(wd.wake[1], F_SETFD, FD_CLOEXEC); }
    mine.n_addrs = 0;
    mine.port = 0;
    if (why) {
        fprintf(stderr, "%s: rank %d: watchdog off on this rank: %s: %s\n", program_name, me, why, strerror(errno));
        if (wd.fd >= 0) close(wd.fd);
        wd.fd = -1;
    } else {
        mine.port = addr.sin_port;
        mine.addrs[mine.n_addrs++] = bind_to;
    }
    /* 4. every rank's bound address and port */
    if (MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, wd.peers, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
        fprintf(stderr, "%s: rank %d: watchdog: MPI_Allgather failed\n", program_name, me);
        wd_abort();
    }
    wd.me = me;
    wd.n = n;
    wd.verbose = getenv("PARTRAIN_WATCHDOG_VERBOSE") && !strcmp(getenv("PARTRAIN_WATCHDOG_VERBOSE"), "1");
    if (why) { free(wd.peers); free(wd.ranks); wd.peers = NULL; wd.ranks = NULL; return; }
    if (wd.verbose) {   /* test hook: where this rank listens */
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
        fprintf(stderr, "%s: rank %d: watchdog: pid %d listens on %s:%u\n", program_name, me, (int)getpid(), ip,
                (unsigned)ntohs(addr.sin_port));
    }
    /* the thread takes no signal: Ctrl-C and mpirun's signals go to the trainer as before */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&wd.thread, NULL, wd_main, NULL);
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
