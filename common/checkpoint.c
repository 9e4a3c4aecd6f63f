/*
 * common/checkpoint.c — --checkpoint / --resume; see checkpoint.h for the file's layout.
 */
#define _GNU_SOURCE
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "idx.h"
#include "results.h"
#include "timer.h"

#define CKPT_MAGIC "PARTCKPT"
#define CKPT_VERSION 2u   /* 2: the loaded data's hash after the configuration's */

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

void checkpoint_init(checkpoint *c, const char *program, const char *variant, int ranks, int threads,
                     const train_options *o, int side, long train_n, long test_n, const char *extra,
                     float *params, long n_floats, double **series, int n_series) {
    memset(c, 0, sizeof *c);
    char data[256], hidden[128];
    snprintf(c->config, sizeof c->config,
             "program=%s variant=%s ranks=%d threads=%d data=%s train=%ld test=%ld image-size=%d hidden=%s "
             "activation=%s batch=%ld lr=%.17g seed=%llu%s%s floats=%ld",
             program, variant, ranks, threads, options_dataset_name(o, data, sizeof data), train_n, test_n, side,
             options_hidden_string(o, hidden, sizeof hidden), options_activation_name(o->activation), o->batch, o->lr,
             (unsigned long long)o->seed, extra ? " " : "", extra ? extra : "", n_floats);
    c->data_hash = dataset_loaded_hash();
    if (o->lr_scaling) {   /* the schedule (schedule.h) changes the maths; absent when off */
        size_t len = strlen(c->config);
        snprintf(c->config + len, sizeof c->config - len, " lr-scaling=linear lr-base-batch=%ld warmup-epochs=%d",
                 o->lr_base_batch, o->warmup_epochs);
    }
    c->params = params;
    c->n_floats = n_floats;
    c->n_series = n_series < CKPT_MAX_SERIES ? n_series : CKPT_MAX_SERIES;
    for (int k = 0; k < c->n_series; k++) c->series[k] = series[k];
}

/* the directory part of path ("." when none) */
static void dir_of(const char *path, char *dir, size_t len) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, len, ".");
    else if (slash == path) snprintf(dir, len, "/");
    else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Whether path and other name one file: device and inode when both exist; when neither
 * does, their resolved directories and last names (a file about to be created). */
static int same_file(const char *path, const char *other) {
    struct stat a, b;
    int ha = stat(path, &a) == 0, hb = stat(other, &b) == 0;
    if (ha && hb) return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    if (ha || hb) return 0;
    char da[4352], db[4352], ra[PATH_MAX], rb[PATH_MAX];
    dir_of(path, da, sizeof da);
    dir_of(other, db, sizeof db);
    const char *na = strrchr(path, '/'), *nb = strrchr(other, '/');
    na = na ? na + 1 : path;
    nb = nb ? nb + 1 : other;
    return realpath(da, ra) && realpath(db, rb) && !strcmp(ra, rb) && !strcmp(na, nb);
}

/* Whether the file at path starts with the checkpoint magic (opened without following a
 * last symbolic link: a link is not a checkpoint, checkpoint_check_flags() refuses it). */
static int holds_checkpoint(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    char magic[8];
    int ok = read(fd, magic, 8) == 8 && !memcmp(magic, CKPT_MAGIC, 8);
    close(fd);
    return ok;
}

/* A new temporary name in path's directory that nobody else uses: "path.tmp.PID.RANDOM",
 * created with O_EXCL and O_NOFOLLOW (a link or another run's file there is never
 * followed or shared). The open descriptor, or -1 with errno. */
static int create_temp(const char *path, char *tmp, size_t len) {
    for (int attempt = 0; attempt < 16; attempt++) {
        uint32_t r;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = (uint32_t)time(NULL) ^ (uint32_t)clock() ^ ((uint32_t)attempt << 24);
        snprintf(tmp, len, "%s.tmp.%d.%08x", path, (int)getpid(), r);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

int checkpoint_check_flags(const train_options *o, char *err, size_t errlen) {
    struct stat st;
    /* a file over the size limit (ulimit -f) fails the write instead of killing the run */
    signal(SIGXFSZ, SIG_IGN);
    if (o->checkpoint_every && !o->checkpoint)
        return fail(err, errlen, "--checkpoint-every: needs --checkpoint FILE");
    if (o->resume) {
        if (stat(o->resume, &st) != 0) return fail(err, errlen, "--resume %s: %s", o->resume, strerror(errno));
        if (!S_ISREG(st.st_mode)) return fail(err, errlen, "--resume %s: not a regular file", o->resume);
        if (access(o->resume, R_OK) != 0) return fail(err, errlen, "--resume %s: cannot be read: %s", o->resume, strerror(errno));
    }
    const char *path = o->checkpoint;
    if (!path) return 0;
    if (!*path) return fail(err, errlen, "--checkpoint: empty file name");
    if (strlen(path) + 32 > 4096) return fail(err, errlen, "--checkpoint: the file name is too long");
    if (o->csv && *o->csv && strcmp(o->csv, "none") && same_file(path, o->csv))
        return fail(err, errlen, "--checkpoint %s: the same file as --csv %s", path, o->csv);
    /* a symbolic link is the user's: the rename would replace it by a file */
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        return fail(err, errlen, "--checkpoint %s: is a symbolic link; it is not replaced (give the file's own "
                    "name)", path);
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return fail(err, errlen, "--checkpoint %s: is a directory", path);
        if (!S_ISREG(st.st_mode))
            return fail(err, errlen, "--checkpoint %s: not a regular file (a FIFO or device; give a file name)", path);
        if (!holds_checkpoint(path))
            return fail(err, errlen, "--checkpoint %s: the file exists and is not a partrain checkpoint; it is not "
                        "overwritten (give another name, or remove it)", path);
    } else if (errno != ENOENT) return fail(err, errlen, "--checkpoint %s: %s", path, strerror(errno));
    char dir[4352];
    dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) != 0) return fail(err, errlen, "--checkpoint %s: directory %s does not exist", path, dir);
    if (!S_ISDIR(st.st_mode)) return fail(err, errlen, "--checkpoint %s: %s is not a directory", path, dir);
    /* the file is replaced by a rename: the directory must take a new file */
    char tmp[4400];
    int fd = create_temp(path, tmp, sizeof tmp);
    if (fd < 0) return fail(err, errlen, "--checkpoint %s: cannot write in %s: %s", path, dir, strerror(errno));
    close(fd);
    unlink(tmp);
    return 0;
}

/* writes n bytes and folds them into the CRC */
static int put(FILE *f, const void *p, size_t n, uLong *crc) {
    const unsigned char *b = p;
    for (size_t done = 0; done < n;) {   /* crc32() takes a uInt length */
        size_t part = n - done < (1u << 30) ? n - done : (1u << 30);
        *crc = crc32(*crc, b + done, (uInt)part);
        done += part;
    }
    return fwrite(p, 1, n, f) == n;
}

int checkpoint_save(const char *path, const checkpoint *c, int epochs_done, double seconds,
                    char *err, size_t errlen) {
    char tmp[4400];
    int fd = create_temp(path, tmp, sizeof tmp);
    if (fd < 0) return fail(err, errlen, "--checkpoint %s: cannot create a temporary file beside it: %s", path,
                            strerror(errno));
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return fail(err, errlen, "--checkpoint %s: %s", path, strerror(e));
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    uint32_t version = CKPT_VERSION, config_len = (uint32_t)strlen(c->config), done = (uint32_t)epochs_done,
             n_series = (uint32_t)c->n_series;
    uint64_t hash = fnv1a(c->config, config_len), data_hash = c->data_hash, floats = (uint64_t)c->n_floats;
    int ok = put(f, CKPT_MAGIC, 8, &crc) && put(f, &version, 4, &crc) && put(f, &config_len, 4, &crc) &&
             put(f, c->config, config_len, &crc) && put(f, &hash, 8, &crc) && put(f, &data_hash, 8, &crc) &&
             put(f, &done, 4, &crc) && put(f, &n_series, 4, &crc) && put(f, &seconds, 8, &crc) &&
             put(f, &floats, 8, &crc) && put(f, c->params, sizeof(float) * (size_t)c->n_floats, &crc);
    for (int k = 0; ok && k < c->n_series; k++) ok = put(f, c->series[k], sizeof(double) * (size_t)epochs_done, &crc);
    uint32_t crc32v = (uint32_t)crc;
    ok = ok && fwrite(&crc32v, 4, 1, f) == 1 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved_errno = errno;
    if (fclose(f) != 0 && ok) { ok = 0; saved_errno = errno; }
    if (!ok) {
        unlink(tmp);
        return fail(err, errlen, "--checkpoint %s: writing %s failed: %s (removed)", path, tmp,
                    strerror(saved_errno));
    }
    /* a file put there since the start that is not a checkpoint is not replaced either */
    struct stat st;
    if (lstat(path, &st) == 0 && !holds_checkpoint(path)) {
        unlink(tmp);
        return fail(err, errlen, "--checkpoint %s: the file is no longer a partrain checkpoint; not replaced", path);
    }
    if (rename(tmp, path) != 0) {
        saved_errno = errno;
        unlink(tmp);
        return fail(err, errlen, "--checkpoint %s: rename from %s failed: %s", path, tmp, strerror(saved_errno));
    }
    /* the rename itself reaches the disk with the directory */
    char dir[4352];
    dir_of(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
    return 0;
}

/* reads exactly n bytes, folding them into the CRC */
static int get(FILE *f, void *p, size_t n, uLong *crc) {
    if (fread(p, 1, n, f) != n) return 0;
    const unsigned char *b = p;
    for (size_t done = 0; done < n;) {
        size_t part = n - done < (1u << 30) ? n - done : (1u << 30);
        *crc = crc32(*crc, b + done, (uInt)part);
        done += part;
    }
    return 1;
}

/* the value of key in a "k=v k=v" config ("?" when absent) */
static void config_value(const char *config, const char *key, char *out, size_t len) {
    size_t klen = strlen(key);
    for (const char *p = config; *p;) {
        const char *end = strchr(p, ' ');
        if (!end) end = p + strlen(p);
        if ((size_t)(end - p) > klen && !strncmp(p, key, klen) && p[klen] == '=') {
            snprintf(out, len, "%.*s", (int)(end - p - klen - 1), p + klen + 1);
            return;
        }
        p = *end ? end + 1 : end;
    }
    snprintf(out, len, "?");
}

/* names the first setting in which two configs differ */
static int config_differs(const char *path, const char *theirs, const char *ours, char *err, size_t errlen) {
    for (const char *p = ours; *p;) {
        const char *eq = strchr(p, '=');
        if (!eq) break;
        char key[64], a[256], b[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p < 63 ? eq - p : 63), p);
        config_value(theirs, key, a, sizeof a);
        config_value(ours, key, b, sizeof b);
        if (strcmp(a, b))
            return fail(err, errlen, "--resume %s: a checkpoint of another run: %s %s there, %s here (resume with "
                        "the flags it was written with)", path, key, a, b);
        const char *end = strchr(p, ' ');
        if (!end) break;
        p = end + 1;
    }
    return fail(err, errlen, "--resume %s: a checkpoint of another run (configuration '%.200s')", path, theirs);
}

int checkpoint_load(const char *path, checkpoint *c, int max_epochs, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "--resume %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return fail(err, errlen, "--resume %s: not a regular file", path);
    }
    int rc = -1;
    uLong crc = crc32(0L, Z_NULL, 0);
    char magic[8];
    uint32_t version, config_len, done, n_series, stored_crc;
    uint64_t hash, data_hash, floats;
    double seconds;
    char theirs[CKPT_CONFIG_LEN];
    const long long size = (long long)st.st_size;
    /* 1. the fixed header and the configuration (bounded before anything is allocated) */
    if (size < 8 || !get(f, magic, 8, &crc) || memcmp(magic, CKPT_MAGIC, 8)) {
        fail(err, errlen, "--resume %s: not a partrain checkpoint (no PARTCKPT header)", path);
        goto out;
    }
    if (!get(f, &version, 4, &crc) || !get(f, &config_len, 4, &crc)) goto truncated;
    if (version != CKPT_VERSION) {
        fail(err, errlen, "--resume %s: checkpoint format version %u; this build reads version %u%s", path, version,
             CKPT_VERSION, version < CKPT_VERSION ? " (an older file, without the data's hash: train again from the "
             "start)" : " (written by a newer build)");
        goto out;
    }
    if (config_len >= CKPT_CONFIG_LEN) {
        fail(err, errlen, "--resume %s: corrupted (a %u-byte configuration)", path, config_len);
        goto out;
    }
    if (!get(f, theirs, config_len, &crc) || !get(f, &hash, 8, &crc) || !get(f, &data_hash, 8, &crc) ||
        !get(f, &done, 4, &crc) ||
        !get(f, &n_series, 4, &crc) || !get(f, &seconds, 8, &crc) || !get(f, &floats, 8, &crc))
        goto truncated;
    theirs[config_len] = '\0';
    /* 2. the size the header promises, then the checksum over the whole file */
    long long header = 8 + 4 + 4 + (long long)config_len + 8 + 8 + 4 + 4 + 8 + 8;
    if (n_series > CKPT_MAX_SERIES || done > 100000 || floats > (uint64_t)1 << 40) {
        fail(err, errlen, "--resume %s: corrupted (%u epochs, %u series, %llu parameters)", path, done, n_series,
             (unsigned long long)floats);
        goto out;
    }
    long long expect = header + 4 * (long long)floats + 8LL * n_series * done + 4;
    if (size != expect) {
        fail(err, errlen, "--resume %s: %s (%lld bytes, the header promises %lld)", path,
             size < expect ? "truncated" : "corrupted: bytes after the end", size, expect);
        goto out;
    }
    {
        unsigned char buf[1 << 16];
        long long left = expect - header - 4;
        while (left > 0) {
            size_t part = left < (long long)sizeof buf ? (size_t)left : sizeof buf;
            if (!get(f, buf, part, &crc)) goto truncated;
            left -= (long long)part;
        }
        if (fread(&stored_crc, 4, 1, f) != 1) goto truncated;
    }
    if (stored_crc != (uint32_t)crc || hash != fnv1a(theirs, config_len)) {
        fail(err, errlen, "--resume %s: corrupted (checksum mismatch)", path);
        goto out;
    }
    /* 3. this run's configuration, then the state into the trainer's buffers */
    if (strcmp(theirs, c->config)) { config_differs(path, theirs, c->config, err, errlen); goto out; }
    if (data_hash != c->data_hash) {
        fail(err, errlen, "--resume %s: the data differ from the data the checkpoint was trained on (hash %016llx "
             "there, %016llx here): other or changed files under --data", path, (unsigned long long)data_hash,
             (unsigned long long)c->data_hash);
        goto out;
    }
    if (floats != (uint64_t)c->n_floats || (int)n_series != c->n_series) {
        fail(err, errlen, "--resume %s: %llu parameters and %u series, this run has %ld and %d", path,
             (unsigned long long)floats, n_series, c->n_floats, c->n_series);
        goto out;
    }
    if ((int)done > max_epochs) {
        fail(err, errlen, "--resume %s: %u epochs done already, more than --epochs %d", path, done, max_epochs);
        goto out;
    }
    if (fseek(f, (long)header, SEEK_SET) != 0 ||
        fread(c->params, sizeof(float), (size_t)floats, f) != (size_t)floats)
        goto truncated;
    for (uint32_t k = 0; k < n_series; k++)
        if (fread(c->series[k], sizeof(double), done, f) != done) goto truncated;
    c->epochs_done = (int)done;
    c->seconds = seconds;
    if ((int)done == max_epochs) {
        /* nothing left to train: the row of this run was written when it finished */
        fprintf(stderr, "checkpoint: %s holds all %d epochs already: nothing left to train, no new CSV row "
                "(give a larger --epochs to train on)\n", path, max_epochs);
        results_skip_row();
    }
    rc = 0;
    goto out;
truncated:
    fail(err, errlen, "--resume %s: truncated or unreadable", path);
out:
    fclose(f);
    return rc;
}

int checkpoint_due(const train_options *o, int epoch) {
    int every = o->checkpoint_every ? o->checkpoint_every : 1;
    return o->checkpoint && (epoch % every == 0 || epoch == o->epochs);
}

/* whether a checkpoint was ever written by this process, and the reminder at exit */
static int saved_any, reminder_set;
static char reminder_program[64], reminder_path[512];

static void remind_unsaved(void) {
    if (!saved_any)
        fprintf(stderr, "%s: no checkpoint was written to %s (every write failed; see the warnings above)\n",
                reminder_program, reminder_path);
}

double checkpoint_after_epoch(const checkpoint *c, const char *program, const train_options *o,
                              int epoch, double seconds) {
    if (!checkpoint_due(o, epoch)) return 0.0;
    double t0 = timer_now();
    char err[4600];
    if (checkpoint_save(o->checkpoint, c, epoch, seconds, err, sizeof err)) {
        fprintf(stderr, "%s: warning: %s; training goes on (the previous checkpoint is kept)\n", program, err);
        if (!reminder_set) {
            reminder_set = 1;
            snprintf(reminder_program, sizeof reminder_program, "%s", program);
            snprintf(reminder_path, sizeof reminder_path, "%s", o->checkpoint);
            atexit(remind_unsaved);
        }
    } else saved_any = 1;
    return timer_now() - t0;
}
