/*
 * common/memcheck.h — will this run fit in memory? Checked before anything large is
 * allocated (header-only).
 *
 * "Available" is the smaller of the machine's MemAvailable (/proc/meminfo) and what the
 * process's memory cgroup still allows (v2: memory.max - memory.current; v1:
 * memory.limit_in_bytes - memory.usage_in_bytes): on a Slurm node the job's cgroup is
 * the real limit. The process's own limits count too: RLIMIT_AS (ulimit -v) less the
 * address space in use (VmSize), RLIMIT_DATA less VmData. PARTRAIN_MEM_AVAILABLE=BYTES (suffix K, M or G allowed) replaces the
 * figure, for tests. A trainer adds up what it will allocate (data after resampling,
 * parameters, gradients, activations, per-thread and per-rank buffers) and calls
 * mem_refuse_if_short(): too much is one line with both figures and exit 2.
 */
#ifndef PARTRAIN_MEMCHECK_H
#define PARTRAIN_MEMCHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* the first number in FILE (a single-value cgroup file; "max" reads as no limit: -1) */
static inline double mem_read_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = "";
    double v = -1;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3) != 0) v = strtod(buf, NULL);
    fclose(f);
    return v;
}

/* what the process's memory cgroup still allows, or -1 when there is no limit to read */
static inline double mem_cgroup_room(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return -1;
    char line[4096], path[4352];
    double room = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *v2 = strncmp(line, "0::", 3) == 0 ? line + 3 : NULL;
        const char *v1 = strstr(line, ":memory:");
        const char *limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
        const char *usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
        const char *root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
        const char *rel = v2 ? v2 : v1 ? v1 + 8 : NULL;
        if (!rel) continue;
        snprintf(path, sizeof path, "%s%s/%s", root, rel, limit_file);
        double limit = mem_read_number(path);
        snprintf(path, sizeof path, "%s%s/%s", root, rel, usage_file);
        double usage = mem_read_number(path);
        if (limit > 0 && limit < 1e18 && usage >= 0) {   /* v1 writes "no limit" as a huge number */
            double r = limit - usage;
            if (room < 0 || r < room) room = r;
        }
    }
    fclose(f);
    return room;
}

/* "VmSize:" of /proc/self/status in bytes, -1 when not there */
static inline double mem_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) v = strtod(line + klen, NULL) * 1024.0;
    fclose(f);
    return v;
}

/* what ulimit -v (RLIMIT_AS) and RLIMIT_DATA still leave this process; -1: no limit */
static inline double mem_rlimit_room(void) {
    static const int which[2] = { RLIMIT_AS, RLIMIT_DATA };
    static const char *const used_key[2] = { "VmSize:", "VmData:" };
    double room = -1;
    for (int k = 0; k < 2; k++) {
        struct rlimit rl;
        if (getrlimit(which[k], &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) continue;
        double used = mem_status_bytes(used_key[k]);
        double r = (double)rl.rlim_cur - (used > 0 ? used : 0);
        if (r < 0) r = 0;
        if (room < 0 || r < room) room = r;
    }
    return room;
}

/* bytes this process can still allocate (see the header); -1 when nothing can be read */
static inline double mem_available_bytes(void) {
    const char *fake = getenv("PARTRAIN_MEM_AVAILABLE");
    if (fake && *fake) {
        char *end;
        double v = strtod(fake, &end);
        double unit = *end == 'K' || *end == 'k' ? 1024.0 : *end == 'M' || *end == 'm' ? 1048576.0
                    : *end == 'G' || *end == 'g' ? 1073741824.0 : 1.0;
        return v * unit;
    }
    double avail = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "MemAvailable:", 13) == 0) avail = strtod(line + 13, NULL) * 1024.0;
        fclose(f);
    }
    double room = mem_cgroup_room();
    if (room >= 0 && (avail < 0 || room < avail)) avail = room;
    return avail;
}

/* "21.3 GiB", "512.0 MiB" */
static inline const char *mem_human(double bytes, char *buf, size_t len) {
    if (bytes >= 1073741824.0) snprintf(buf, len, "%.1f GiB", bytes / 1073741824.0);
    else snprintf(buf, len, "%.1f MiB", bytes / 1048576.0);
    return buf;
}

/* 0 when `need` bytes fit (in the process's own limits, and `share` x need in what the
 * machine or cgroup has); else one line in msg ("needs 21.3 GiB (what), 18.2 GiB
 * available") and 1. `share` > 1: that many processes of this run share the machine
 * (ranks on one node), each needing `need`. */
static inline int mem_short(double need, int share, const char *what, char *msg, size_t len) {
    char a[32], b[32], c[32];
    double own = mem_rlimit_room();   /* per process: ulimit -v, RLIMIT_DATA */
    if (own >= 0 && need > own) {
        snprintf(msg, len, "not enough memory: needs %s (%s), the process's limit (ulimit -v, RLIMIT_AS or "
                 "RLIMIT_DATA) leaves %s", mem_human(need, a, sizeof a), what, mem_human(own, b, sizeof b));
        return 1;
    }
    double avail = mem_available_bytes();
    double total = need * (share > 1 ? share : 1);
    if (avail < 0 || total <= avail) return 0;
    if (share > 1)
        snprintf(msg, len, "not enough memory: %d processes on this node need %s each (%s: %s), %s available",
                 share, mem_human(need, a, sizeof a), what, mem_human(total, c, sizeof c), mem_human(avail, b, sizeof b));
    else
        snprintf(msg, len, "not enough memory: needs %s (%s), %s available", mem_human(need, a, sizeof a), what,
                 mem_human(avail, b, sizeof b));
    return 1;
}

/* bytes of a data set of n samples of side x side after loading, from files of
 * file_side x file_side images: the bytes at the file's size, else the resampled floats
 * (common/idx.h); and the labels */
static inline double mem_dataset_bytes(long n, int side, int file_side) {
    return (double)n * ((double)side * side * (side == file_side ? 1 : sizeof(float)) + 1.0);
}

#endif
