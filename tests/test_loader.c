/*
 * tests/test_loader.c — tests of common/idx.h (the IDX data set loader).
 *
 * Writes its own IDX files, raw and gzip-compressed (zlib gzwrite), into a fresh
 * directory from mkdtemp under /tmp (removed at the end), then checks:
 *   - valid files load (raw; gzip named .gz; gzip without the .gz name; images and
 *     labels compressed differently): n, side, features, the bytes kept as they are
 *     (no floats at the file's own size) and pixel_floats() of them == byte/255.0f,
 *     labels; slices (first=3,count=4 of 10; count=-1 to the end; across the
 *     loader's 1024-sample chunks); dataset_count();
 *   - every malformed input fails with -1 and a message that names the offending
 *     file and says what is wrong (a keyword per case): missing files, bad magic,
 *     truncated header, truncated data (raw and gzip), trailing bytes, zero count,
 *     absurd dimensions and counts (no huge allocation), image/label count
 *     mismatch, label out of range, slice beyond the end, corrupt or cut gzip (also
 *     a large file cut inside its trailer), non-square images;
 *   - idx_resample against hand-computed bilinear values (align_corners = false,
 *     PyTorch's convention), identity at the same size, and dataset_load(side=56)
 *     of a 28 x 28 file.
 * Each failure case runs in a forked child, so a crash, an ASan report or a UBSan
 * "runtime error" in the loader shows up as a FAIL of that case instead of ending
 * the whole test. Output follows tests/check.h: PASS / FAIL / SKIP lines, exit 1
 * if anything failed; TEST_LOADER_VERBOSE=1 also prints each failure message.
 *
 * Build: cc -std=c11 -O1 -g -Wall -Wextra -fsanitize=address,undefined -Icommon \
 *          tests/test_loader.c common/idx.c -lz -lm -o tests/test_loader
 */
#define _POSIX_C_SOURCE 200809L
#include "idx.h"
#include "check.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#define MAGIC_IMAGES 0x00000803u
#define MAGIC_LABELS 0x00000801u

static char root[256];          /* the mkdtemp directory */

/* ---------------------------------------------------------------- helpers */

static unsigned char pix(long s, long p) { return (unsigned char)((s * 31 + p * 7 + 1) & 255); }
static unsigned char lab(long s) { return (unsigned char)((s * 3 + 1) % 10); }

static void die(const char *what) {
    fprintf(stderr, "test_loader: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);  p[3] = (unsigned char)v;
}

/* An image file: 16-byte header (magic, n, rows, cols) followed by data_len bytes
 * of pixels (pix() of the flat index; data_len may be short or long on purpose). */
static unsigned char *image_file(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                                 size_t data_len, size_t *len) {
    unsigned char *b = malloc(16 + data_len + 1);
    if (!b) die("malloc");
    put_be32(b, magic); put_be32(b + 4, n); put_be32(b + 8, rows); put_be32(b + 12, cols);
    size_t per = (size_t)rows * cols;
    for (size_t f = 0; f < data_len; f++)
        b[16 + f] = per ? pix((long)(f / per), (long)(f % per)) : 0;
    *len = 16 + data_len;
    return b;
}

/* A label file: 8-byte header (magic, n) followed by data_len labels lab(i). */
static unsigned char *label_file(uint32_t magic, uint32_t n, size_t data_len, size_t *len) {
    unsigned char *b = malloc(8 + data_len + 1);
    if (!b) die("malloc");
    put_be32(b, magic); put_be32(b + 4, n);
    for (size_t i = 0; i < data_len; i++) b[8 + i] = lab((long)i);
    *len = 8 + data_len;
    return b;
}

/* root/<dir>, created if needed; returns a static path */
static const char *case_dir(const char *dir) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) die(path);
    return path;
}

/* Writes buf to root/<dir>/<name>, raw or through gzwrite. */
static void put_file(const char *dir, const char *name, const unsigned char *buf, size_t len, int gz) {
    char path[768];
    snprintf(path, sizeof path, "%s/%s", case_dir(dir), name);
    if (gz) {
        gzFile g = gzopen(path, "wb9");
        if (!g) die(path);
        if (len && gzwrite(g, buf, (unsigned)len) != (int)len) die(path);
        if (gzclose(g) != Z_OK) die(path);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f) die(path);
        if (len && fwrite(buf, 1, len, f) != len) die(path);
        if (fclose(f) != 0) die(path);
    }
}

/* Reads a whole file (to corrupt a gzip file after writing it). */
static unsigned char *slurp(const char *dir, const char *name, size_t *len) {
    char path[768];
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    if (fseek(f, 0, SEEK_END) != 0) die(path);
    long sz = ftell(f);
    if (sz < 0) die(path);
    rewind(f);
    unsigned char *b = malloc((size_t)sz + 1);
    if (!b) die("malloc");
    if (fread(b, 1, (size_t)sz, f) != (size_t)sz) die(path);
    fclose(f);
    *len = (size_t)sz;
    return b;
}

/* A valid pair "<prefix>-images-idx3-ubyte[.gz]" + labels with n side x side images. */
static void valid_pair(const char *dir, const char *prefix, long n, int side, int gz_img, int gz_lab,
                       const char *img_suffix, const char *lab_suffix) {
    size_t len;
    char name[256];
    unsigned char *b = image_file(MAGIC_IMAGES, (uint32_t)n, (uint32_t)side, (uint32_t)side,
                                  (size_t)n * (size_t)side * (size_t)side, &len);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", prefix, img_suffix);
    put_file(dir, name, b, len, gz_img);
    free(b);
    b = label_file(MAGIC_LABELS, (uint32_t)n, (size_t)n, &len);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", prefix, lab_suffix);
    put_file(dir, name, b, len, gz_lab);
    free(b);
}

static void rm_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* case-insensitive substring */
static int contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return n == 0;
}

/* keywords: alternatives separated by '|'; true if msg contains any of them */
static int contains_any(const char *msg, const char *keywords) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", keywords);
    char *save = NULL;
    for (char *k = strtok_r(buf, "|", &save); k; k = strtok_r(NULL, "|", &save))
        if (contains_ci(msg, k)) return 1;
    return 0;
}

/* ------------------------------------------------- valid files and slices */

/* Checks a loaded slice against pix()/lab() for samples first .. first+n-1 at the native side. */
static void check_slice(const char *name, const dataset *d, long first, long n, int side) {
    char cname[256];
    snprintf(cname, sizeof cname, "%s: n=%ld side=%d features=%d", name, n, side, side * side);
    CHECK(cname, d->n == n && d->side == side && d->features == side * side && d->pixels && !d->x && d->y,
          "got n=%ld side=%d features=%d pixels=%p x=%p y=%p", d->n, d->side, d->features,
          (void *)d->pixels, (void *)d->x, (void *)d->y);
    if (!(d->n == n && d->features == side * side && d->pixels && d->y)) return;
    long bad = -1, badlab = -1;
    float got = 0;
    for (long s = 0; s < n && bad < 0; s++)
        for (long p = 0; p < (long)side * side; p++) {
            pixel_floats(d->pixels + s * side * side + p, 1, &got);
            if (d->pixels[s * side * side + p] != pix(first + s, p) || got != pix(first + s, p) / 255.0f) {
                bad = s * side * side + p;
                break;
            }
        }
    for (long s = 0; s < n; s++)
        if (d->y[s] != lab(first + s)) { badlab = s; break; }
    snprintf(cname, sizeof cname, "%s: pixels == the bytes, as floats byte/255.0f", name);
    CHECK(cname, bad < 0, "first mismatch at flat index %ld: byte %d want %d, float %.9g want %.9g", bad,
          bad >= 0 ? d->pixels[bad] : 0, bad >= 0 ? pix(first + bad / (side * side), bad % (side * side)) : 0, got,
          bad >= 0 ? pix(first + bad / (side * side), bad % (side * side)) / 255.0f : 0.0);
    snprintf(cname, sizeof cname, "%s: labels", name);
    CHECK(cname, badlab < 0, "label %ld: got %d want %d", badlab, badlab >= 0 ? d->y[badlab] : 0,
          badlab >= 0 ? lab(first + badlab) : 0);
}

static void load_ok(const char *name, const char *dir, const char *prefix, long first, long count,
                    long want_n, int side) {
    char err[IDX_ERR_LEN] = "";
    dataset d;
    char path[512], cname[256];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    int rc = dataset_load(path, prefix, first, count, 0, &d, err, sizeof err);
    snprintf(cname, sizeof cname, "%s: load returns 0", name);
    CHECK(cname, rc == 0, "rc=%d: %s", rc, err);
    if (rc == 0) check_slice(name, &d, first, want_n, side);
    dataset_free(&d);
}

static void test_valid(void) {
    char path[512], err[IDX_ERR_LEN];
    long count;

    /* 10 images of 6x6, four storage variants */
    valid_pair("raw", "train", 10, 6, 0, 0, "", "");
    valid_pair("gz", "train", 10, 6, 1, 1, ".gz", ".gz");
    valid_pair("gz-noext", "train", 10, 6, 1, 1, "", "");
    valid_pair("mixed", "train", 10, 6, 1, 0, ".gz", "");
    const char *variants[] = { "raw", "gz", "gz-noext", "mixed" };
    for (int v = 0; v < 4; v++) {
        char name[128];
        snprintf(name, sizeof name, "valid %s whole", variants[v]);
        load_ok(name, variants[v], "train", 0, -1, 10, 6);
        snprintf(name, sizeof name, "valid %s slice 3+4", variants[v]);
        load_ok(name, variants[v], "train", 3, 4, 4, 6);
        snprintf(name, sizeof name, "valid %s slice 3..end", variants[v]);
        load_ok(name, variants[v], "train", 3, -1, 7, 6);
        snprintf(name, sizeof name, "valid %s slice last one", variants[v]);
        load_ok(name, variants[v], "train", 9, 1, 1, 6);

        snprintf(path, sizeof path, "%s/%s", root, variants[v]);
        count = -7;
        err[0] = 0;
        int rc = dataset_count(path, "train", &count, err, sizeof err);
        snprintf(name, sizeof name, "valid %s dataset_count", variants[v]);
        CHECK(name, rc == 0 && count == 10, "rc=%d count=%ld: %s", rc, count, err);
    }

    /* the "train-images.idx3-ubyte" spelling some mirrors use */
    {
        size_t len;
        unsigned char *b = image_file(MAGIC_IMAGES, 10, 6, 6, 10 * 36, &len);
        put_file("dotted", "train-images.idx3-ubyte", b, len, 0);
        free(b);
        b = label_file(MAGIC_LABELS, 10, 10, &len);
        put_file("dotted", "train-labels.idx1-ubyte", b, len, 0);
        free(b);
        load_ok("valid dotted spelling", "dotted", "train", 0, -1, 10, 6);
    }

    /* a second prefix in the same directory is independent */
    valid_pair("raw", "t10k", 5, 6, 0, 0, "", "");
    load_ok("valid t10k prefix", "raw", "t10k", 0, -1, 5, 6);

    /* 2500 images of 4x4: slices across the loader's internal chunks, raw and gzip */
    valid_pair("big-raw", "train", 2500, 4, 0, 0, "", "");
    valid_pair("big-gz", "train", 2500, 4, 1, 1, ".gz", ".gz");
    load_ok("valid big raw slice 1000+1500", "big-raw", "train", 1000, 1500, 1500, 4);
    load_ok("valid big raw whole", "big-raw", "train", 0, -1, 2500, 4);
    load_ok("valid big gz slice 1000+1500", "big-gz", "train", 1000, 1500, 1500, 4);
    load_ok("valid big gz slice 2047..end", "big-gz", "train", 2047, -1, 453, 4);
}

/* ------------------------------------------------------- failure cases */

enum { OP_LOAD, OP_COUNT };

/* Runs dataset_load (or dataset_count) in a forked child and checks that it returns
 * -1 with a message that contains root/<dir>, the name of file `names` ("": any
 * file of the directory; NULL: no file check, for a bad argument rather than a bad
 * file) and one of the '|'-separated keywords; after a failed load the
 * dataset must be empty. A crash, sanitizer report or UBSan "runtime error" in the
 * child is a FAIL. */
static void expect_fail(const char *name, const char *dir, int op, long first, long count, int side,
                        const char *names, const char *keywords) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    int res[2], errp[2];
    if (pipe(res) != 0 || pipe(errp) != 0) die("pipe");
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(res[0]); close(errp[0]);
        dup2(errp[1], 2);
        char err[IDX_ERR_LEN];
        memset(err, 0, sizeof err);
        int rc, empty = 1;
        long got = -7;
        if (op == OP_LOAD) {
            dataset d;
            rc = dataset_load(path, "train", first, count, side, &d, err, sizeof err);
            empty = d.pixels == NULL && d.x == NULL && d.y == NULL && d.n == 0;
            if (rc == 0) dataset_free(&d);
        } else {
            rc = dataset_count(path, "train", &got, err, sizeof err);
        }
        char msg[IDX_ERR_LEN + 64];
        int len = snprintf(msg, sizeof msg, "%d %d %ld ", rc, empty, got);
        memcpy(msg + len, err, strnlen(err, sizeof err - 1));
        len += (int)strnlen(err, sizeof err - 1);
        if (write(res[1], msg, (size_t)len) != len) _exit(3);
        _exit(0);
    }
    close(res[1]); close(errp[1]);
    /* child's stderr: collect until EOF (small: a sanitizer report at most) */
    static char cerr[1 << 16];
    size_t clen = 0;
    for (;;) {
        ssize_t r = read(errp[0], cerr + clen, sizeof cerr - 1 - clen);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        clen += (size_t)r;
        if (clen >= sizeof cerr - 1) break;
    }
    cerr[clen] = 0;
    close(errp[0]);
    char msg[IDX_ERR_LEN + 64];
    size_t mlen = 0;
    for (;;) {
        ssize_t r = read(res[0], msg + mlen, sizeof msg - 1 - mlen);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        mlen += (size_t)r;
    }
    msg[mlen] = 0;
    close(res[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (clen) fprintf(stderr, "--- stderr of case '%s':\n%s---\n", name, cerr);

    char cname[256];
    snprintf(cname, sizeof cname, "%s (%s)", name, op == OP_LOAD ? "load" : "count");
    if (WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        CHECK(cname, 0, "child crashed or a sanitizer stopped it (status 0x%x); see stderr", status);
        return;
    }
    if (strstr(cerr, "runtime error") || strstr(cerr, "Sanitizer")) {
        CHECK(cname, 0, "sanitizer report in the loader; see stderr");
        return;
    }
    int rc = 0, empty = 0, off = 0;
    long got = 0;
    if (sscanf(msg, "%d %d %ld %n", &rc, &empty, &got, &off) < 3) {
        CHECK(cname, 0, "no result from the child");
        return;
    }
    const char *err = msg + off;
    if (rc != -1) {
        CHECK(cname, 0, "returned %d (count=%ld), expected -1", rc, got);
        return;
    }
    if (names && (!strstr(err, path) || (names[0] && !strstr(err, names)))) {
        CHECK(cname, 0, "message does not name the file %s/%s: \"%s\"", path, names, err);
        return;
    }
    if (!contains_any(err, keywords)) {
        CHECK(cname, 0, "message lacks a keyword of \"%s\": \"%s\"", keywords, err);
        return;
    }
    CHECK(cname, empty, "failed load left a non-empty dataset: \"%s\"", err);
    if (getenv("TEST_LOADER_VERBOSE")) printf("    message: %s\n", err);
}

static void expect_fail_both(const char *name, const char *dir, const char *names, const char *keywords) {
    expect_fail(name, dir, OP_LOAD, 0, -1, 0, names, keywords);
    expect_fail(name, dir, OP_COUNT, 0, -1, 0, names, keywords);
}

#define IMG "train-images-idx3-ubyte"
#define LAB "train-labels-idx1-ubyte"

/* good labels for n images */
static void good_labels(const char *dir, uint32_t n, int gz) {
    size_t len;
    unsigned char *b = label_file(MAGIC_LABELS, n, n, &len);
    put_file(dir, gz ? LAB ".gz" : LAB, b, len, gz);
    free(b);
}

static void good_images(const char *dir, uint32_t n, int gz) {
    size_t len;
    unsigned char *b = image_file(MAGIC_IMAGES, n, 6, 6, (size_t)n * 36, &len);
    put_file(dir, gz ? IMG ".gz" : IMG, b, len, gz);
    free(b);
}

/* images file with an arbitrary header and data length, plus good labels for `labels_n` */
static void bad_images(const char *dir, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                       size_t data_len, uint32_t labels_n, int gz) {
    size_t len;
    unsigned char *b = image_file(magic, n, rows, cols, data_len, &len);
    put_file(dir, gz ? IMG ".gz" : IMG, b, len, gz);
    free(b);
    good_labels(dir, labels_n, 0);
}

static void test_failures(void) {
    size_t len;
    unsigned char *b;

    /* missing files */
    case_dir("missing-both");
    expect_fail_both("missing images", "missing-both", "train-images", "not found");
    good_images("missing-labels", 10, 0);
    expect_fail_both("missing labels", "missing-labels", "train-labels", "not found");

    /* bad magic */
    bad_images("magic-img", MAGIC_LABELS, 10, 6, 6, 360, 10, 0);
    expect_fail_both("bad magic in images (labels magic)", "magic-img", IMG, "magic");
    bad_images("magic-img-float", 0x00000D03u, 10, 6, 6, 360, 10, 0);
    expect_fail_both("bad magic in images (float type)", "magic-img-float", IMG, "magic");
    bad_images("magic-img-gz", 0x12345678u, 10, 6, 6, 360, 10, 1);
    expect_fail_both("bad magic in gz images", "magic-img-gz", IMG, "magic");
    good_images("magic-lab", 10, 0);
    b = image_file(MAGIC_IMAGES, 10, 6, 6, 360, &len);        /* an images file as labels */
    put_file("magic-lab", LAB, b, len, 0);
    free(b);
    expect_fail_both("bad magic in labels (images magic)", "magic-lab", LAB, "magic");

    /* truncated header */
    good_labels("hdr-img", 10, 0);
    b = image_file(MAGIC_IMAGES, 10, 6, 6, 0, &len);
    put_file("hdr-img", IMG, b, 10, 0);
    expect_fail_both("truncated images header (10 bytes)", "hdr-img", IMG, "header|truncated");
    good_labels("hdr-img-gz", 10, 0);
    put_file("hdr-img-gz", IMG ".gz", b, 13, 1);
    expect_fail_both("truncated gz images header (13 bytes)", "hdr-img-gz", IMG, "header|truncated");
    good_labels("hdr-img-empty", 10, 0);
    put_file("hdr-img-empty", IMG, b, 0, 0);
    expect_fail_both("empty images file", "hdr-img-empty", IMG, "header|truncated|empty");
    free(b);
    good_images("hdr-lab", 10, 0);
    b = label_file(MAGIC_LABELS, 10, 0, &len);
    put_file("hdr-lab", LAB, b, 6, 0);
    free(b);
    expect_fail_both("truncated labels header (6 bytes)", "hdr-lab", LAB, "header|truncated");

    /* data shorter than the header promises */
    bad_images("short-img", MAGIC_IMAGES, 10, 6, 6, 9 * 36 + 20, 10, 0);
    expect_fail_both("truncated image data (raw)", "short-img", IMG, "truncated");
    bad_images("short-img-gz", MAGIC_IMAGES, 10, 6, 6, 9 * 36 + 20, 10, 1);
    expect_fail_both("truncated image data (gz)", "short-img-gz", IMG, "truncated");
    good_images("short-lab", 10, 0);
    b = label_file(MAGIC_LABELS, 10, 7, &len);
    put_file("short-lab", LAB, b, len, 0);
    free(b);
    expect_fail_both("truncated label data (raw)", "short-lab", LAB, "truncated");

    /* trailing bytes */
    bad_images("long-img", MAGIC_IMAGES, 10, 6, 6, 10 * 36 + 3, 10, 0);
    expect_fail_both("trailing bytes in images (raw)", "long-img", IMG, "trailing");
    bad_images("long-img-gz", MAGIC_IMAGES, 10, 6, 6, 10 * 36 + 3, 10, 1);
    expect_fail_both("trailing bytes in images (gz)", "long-img-gz", IMG, "trailing");
    good_images("long-lab", 10, 0);
    b = label_file(MAGIC_LABELS, 10, 11, &len);
    put_file("long-lab", LAB, b, len, 0);
    free(b);
    expect_fail_both("trailing bytes in labels (raw)", "long-lab", LAB, "trailing");

    /* zero count */
    bad_images("zero-img", MAGIC_IMAGES, 0, 6, 6, 0, 10, 0);
    expect_fail_both("zero image count", "zero-img", IMG, "count|empty|zero|no images");
    good_images("zero-lab", 10, 0);
    b = label_file(MAGIC_LABELS, 0, 0, &len);
    put_file("zero-lab", LAB, b, len, 0);
    free(b);
    expect_fail_both("zero label count", "zero-lab", LAB, "count|empty|zero|no labels");

    /* absurd dimensions and counts */
    bad_images("rows0", MAGIC_IMAGES, 10, 0, 6, 0, 10, 0);
    expect_fail_both("rows = 0", "rows0", IMG, "dimension");
    bad_images("cols0", MAGIC_IMAGES, 10, 6, 0, 0, 10, 0);
    expect_fail_both("cols = 0", "cols0", IMG, "dimension");
    bad_images("rows-huge", MAGIC_IMAGES, 10, 100000, 6, 360, 10, 0);
    expect_fail_both("rows = 100000", "rows-huge", IMG, "dimension");
    bad_images("rows-max", MAGIC_IMAGES, 10, 0xFFFFFFFFu, 0xFFFFFFFFu, 360, 10, 0);
    expect_fail_both("rows = cols = 2^32-1", "rows-max", IMG, "dimension");
    bad_images("n-2g", MAGIC_IMAGES, 0x7FFFFFFFu, 28, 28, 784, 10, 0);
    expect_fail_both("n = 2^31-1 with a tiny file", "n-2g", IMG, "absurd|count|truncated");
    bad_images("n-4g", MAGIC_IMAGES, 0xFFFFFFFFu, 1024, 1024, 784, 10, 0);
    expect_fail_both("n = 2^32-1 of 1024x1024 with a tiny file", "n-4g", IMG, "absurd|count|truncated");
    bad_images("n-1e8", MAGIC_IMAGES, 100000000u, 1024, 1024, 784, 10, 0);
    expect_fail_both("n = 1e8 of 1024x1024 (10^14 bytes) with a tiny file", "n-1e8", IMG, "absurd|count|truncated");
    bad_images("n-1e8-gz", MAGIC_IMAGES, 100000000u, 1024, 1024, 784, 10, 1);
    expect_fail_both("n = 1e8 of 1024x1024 with a tiny gz file", "n-1e8-gz", IMG, "absurd|count|truncated|images but");
    good_images("labn-2g", 10, 0);
    b = label_file(MAGIC_LABELS, 0x7FFFFFFFu, 10, &len);
    put_file("labn-2g", LAB, b, len, 0);
    free(b);
    expect_fail_both("labels n = 2^31-1 with a tiny file", "labn-2g", LAB, "absurd|count|truncated");

    /* count mismatch: 10 images, 9 labels (both files valid on their own) */
    bad_images("mismatch", MAGIC_IMAGES, 10, 6, 6, 360, 9, 0);
    expect_fail_both("10 images but 9 labels", "mismatch", "", "images but|mismatch|differ|disagree|!=");

    /* label out of range */
    good_images("label10", 10, 0);
    b = label_file(MAGIC_LABELS, 10, 10, &len);
    b[8 + 7] = 10;
    put_file("label10", LAB, b, len, 0);
    expect_fail("label value 10", "label10", OP_LOAD, 0, -1, 0, LAB, "range");
    expect_fail("label value 10 outside the slice", "label10", OP_LOAD, 0, 3, 0, LAB, "range");
    good_images("label255-gz", 10, 1);
    b[8 + 7] = 255;
    put_file("label255-gz", LAB ".gz", b, len, 1);
    free(b);
    expect_fail("label value 255 (gz)", "label255-gz", OP_LOAD, 0, -1, 0, LAB, "range");

    /* slices outside the file (the valid 10-image "raw" pair) */
    expect_fail("slice first=8 count=4 of 10", "raw", OP_LOAD, 8, 4, 0, IMG, "outside|beyond|range|exceed");
    expect_fail("slice first=10 count=-1 of 10 (empty)", "raw", OP_LOAD, 10, -1, 0, IMG, "outside|beyond|range|exceed|empty");
    expect_fail("slice first=11 count=-1 of 10", "raw", OP_LOAD, 11, -1, 0, IMG, "outside|beyond|range|exceed");
    expect_fail("slice first=-1 count=2", "raw", OP_LOAD, -1, 2, 0, IMG, "outside|beyond|range|negative");
    expect_fail("slice count=0", "raw", OP_LOAD, 0, 0, 0, IMG, "outside|beyond|range|empty|zero");
    expect_fail("slice first=LONG_MAX count=5", "raw", OP_LOAD, LONG_MAX, 5, 0, IMG, "outside|beyond|range|exceed");
    expect_fail("slice first=5 count=LONG_MAX", "raw", OP_LOAD, 5, LONG_MAX, 0, IMG, "outside|beyond|range|exceed");
    expect_fail("slice first=LONG_MIN count=-1", "raw", OP_LOAD, LONG_MIN, -1, 0, IMG, "outside|beyond|range|negative");
    expect_fail("slice first=LONG_MIN count=5", "raw", OP_LOAD, LONG_MIN, 5, 0, IMG, "outside|beyond|range|negative");

    /* requested side above IDX_MAX_SIDE */
    expect_fail("side 2000 > IDX_MAX_SIDE", "raw", OP_LOAD, 0, -1, 2000, NULL, "larger|too large|size");

    /* corrupt gzip: a valid .gz with bytes flipped inside the deflate data */
    valid_pair("gz-corrupt", "train", 10, 6, 1, 0, ".gz", "");
    b = slurp("gz-corrupt", IMG ".gz", &len);
    for (size_t i = 12; i < 24 && i < len - 8; i++) b[i] ^= 0x5a;
    put_file("gz-corrupt", IMG ".gz", b, len, 0);
    free(b);
    expect_fail_both("corrupt gzip stream (flipped deflate bytes)", "gz-corrupt", IMG,
                     "corrupt");
    /* ... with the CRC in the trailer wrong (data intact) */
    valid_pair("gz-crc", "train", 10, 6, 1, 0, ".gz", "");
    b = slurp("gz-crc", IMG ".gz", &len);
    b[len - 8] ^= 0xff;
    put_file("gz-crc", IMG ".gz", b, len, 0);
    free(b);
    expect_fail_both("corrupt gzip stream (bad CRC)", "gz-crc", IMG, "corrupt");
    /* ... cut in the middle of the compressed data */
    valid_pair("gz-cut", "train", 10, 6, 1, 0, ".gz", "");
    b = slurp("gz-cut", IMG ".gz", &len);
    put_file("gz-cut", IMG ".gz", b, len / 2, 0);
    free(b);
    expect_fail_both("gzip cut in half", "gz-cut", IMG, "truncated|unexpected end|corrupt");
    /* ... missing its 8-byte trailer (CRC and length): all data present, unverifiable */
    valid_pair("gz-notrailer", "train", 10, 6, 1, 0, ".gz", "");
    b = slurp("gz-notrailer", IMG ".gz", &len);
    put_file("gz-notrailer", IMG ".gz", b, len - 8, 0);
    free(b);
    expect_fail_both("gzip without its trailer", "gz-notrailer", IMG, "truncated|unexpected end|corrupt");
    /* ... the same, 1 to 8 bytes cut, from a file large enough (1000 images of 28x28: 766 KiB)
     * that the loader inflates most of it straight into its own buffer: zlib then reported a clean
     * end and the load succeeded (found by tests/fuzz/fuzz_idx.c, 2026-11-25) */
    valid_pair("gz-big-notrailer", "train", 1000, 28, 1, 0, ".gz", "");
    b = slurp("gz-big-notrailer", IMG ".gz", &len);
    for (size_t cut = 1; cut <= 8; cut++) {
        char cname[96];
        snprintf(cname, sizeof cname, "gzip of 766 KiB without the last %zu of its 8 trailer bytes", cut);
        put_file("gz-big-notrailer", IMG ".gz", b, len - cut, 0);
        expect_fail_both(cname, "gz-big-notrailer", IMG, "truncated|unexpected end|corrupt");
    }
    free(b);

    /* non-square images: no side given, and side == rows (a 2x3 image is not 2x2) */
    bad_images("nonsquare", MAGIC_IMAGES, 10, 2, 3, 60, 10, 0);
    expect_fail("non-square 2x3, side 0", "nonsquare", OP_LOAD, 0, -1, 0, IMG, "square");
    expect_fail("non-square 2x3, side 2", "nonsquare", OP_LOAD, 0, -1, 2, IMG, "square");
    expect_fail("non-square 2x3, side 3", "nonsquare", OP_LOAD, 0, -1, 3, IMG, "square");
    expect_fail("non-square 2x3, side 8", "nonsquare", OP_LOAD, 0, -1, 8, IMG, "square");
}

/* ------------------------------------------------------------ resampling */

static void test_resample(void) {
    /* 2x2 -> 4x4. Per axis, src = (d + 0.5) * 2/4 - 0.5 = -0.25, 0.25, 0.75, 1.25,
     * clamped to 0, 0.25, 0.75, 1 (the last: x0 = x1 = 1). The image is the linear
     * function v(r, c) = 2r + c ([0 1; 2 3]), which bilinear interpolation reproduces
     * exactly: out[y][x] = 2 * t[y] + t[x] with t = {0, 0.25, 0.75, 1}. */
    const float in2[4] = { 0, 1, 2, 3 };
    const float t[4] = { 0.0f, 0.25f, 0.75f, 1.0f };
    float want[16], got[16];
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) want[y * 4 + x] = 2 * t[y] + t[x];
    idx_resample(in2, 2, got, 4);
    CHECK_CLOSE("resample 2x2 -> 4x4 (hand-computed)", got, want, 16, 1e-6);

    /* a non-linear 2x2 [a b; c d] = [0 1; 1 0] -> 4x4: interior point (0.25, 0.25):
     * (1-.25)(1-.25)*0 + (1-.25)(.25)*1 + (.25)(1-.25)*1 + (.25)(.25)*0 = 0.375 */
    const float xo[4] = { 0, 1, 1, 0 };
    idx_resample(xo, 2, got, 4);
    const float want_xo[16] = {
        0.0f,   0.25f,  0.75f,  1.0f,
        0.25f,  0.375f, 0.625f, 0.75f,
        0.75f,  0.625f, 0.375f, 0.25f,
        1.0f,   0.75f,  0.25f,  0.0f,
    };
    CHECK_CLOSE("resample 2x2 xor -> 4x4 (hand-computed)", got, want_xo, 16, 1e-6);

    /* 4x4 -> 2x2: src = (d + 0.5) * 2 - 0.5 = 0.5, 2.5: means of the 2x2 blocks */
    float in4[16];
    for (int i = 0; i < 16; i++) in4[i] = (float)i;
    const float want_down[4] = { (0 + 1 + 4 + 5) / 4.0f, (2 + 3 + 6 + 7) / 4.0f,
                                 (8 + 9 + 12 + 13) / 4.0f, (10 + 11 + 14 + 15) / 4.0f };
    idx_resample(in4, 4, got, 2);
    CHECK_CLOSE("resample 4x4 -> 2x2 (block means)", got, want_down, 4, 1e-6);

    /* constant image stays constant at any size */
    float c3[9], c7[49], want7[49];
    for (int i = 0; i < 9; i++) c3[i] = 0.4f;
    for (int i = 0; i < 49; i++) want7[i] = 0.4f;
    idx_resample(c3, 3, c7, 7);
    CHECK_CLOSE("resample constant 3x3 -> 7x7", c7, want7, 49, 1e-6);
    idx_resample(c7, 7, c3, 3);
    CHECK_CLOSE("resample constant 7x7 -> 3x3", c3, want7, 9, 1e-6);

    /* same size: identity, bit for bit */
    float src28[784], dst28[784];
    for (int i = 0; i < 784; i++) src28[i] = pix(5, i) / 255.0f;
    idx_resample(src28, 28, dst28, 28);
    CHECK("resample 28 -> 28 is the identity", memcmp(src28, dst28, sizeof src28) == 0,
          "values differ");

    /* dataset_load(side = 56) of a 28x28 file */
    valid_pair("side28", "train", 3, 28, 0, 0, "", "");
    char path[512], err[IDX_ERR_LEN] = "";
    snprintf(path, sizeof path, "%s/side28", root);
    dataset d;
    int rc = dataset_load(path, "train", 0, -1, 56, &d, err, sizeof err);
    CHECK("load 28x28 at side 56: features 3136, as floats", rc == 0 && d.n == 3 && d.side == 56 && d.features == 3136 &&
          d.x && !d.pixels, "rc=%d n=%ld side=%d features=%d x=%p pixels=%p: %s", rc, d.n, d.side, d.features,
          (void *)d.x, (void *)d.pixels, err);
    if (rc == 0 && d.features == 3136 && d.x) {
        float native[784], up[3136];
        double worst = 0;
        for (int s = 0; s < 3; s++) {
            for (int p = 0; p < 784; p++) native[p] = pix(s, p) / 255.0f;
            idx_resample(native, 28, up, 56);
            double e = check_max_rel_err(d.x + (size_t)s * 3136, up, 3136);
            if (!(e <= worst)) worst = e;
        }
        CHECK("load at side 56 == idx_resample of the native image", worst <= 1e-6, "max rel err %.3g", worst);
    }
    dataset_free(&d);
    rc = dataset_load(path, "train", 1, 1, 14, &d, err, sizeof err);
    CHECK("load 28x28 at side 14: features 196", rc == 0 && d.n == 1 && d.side == 14 && d.features == 196,
          "rc=%d n=%ld side=%d features=%d: %s", rc, d.n, d.side, d.features, err);
    dataset_free(&d);
    rc = dataset_load(path, "train", 0, -1, 28, &d, err, sizeof err);
    CHECK("load 28x28 at explicit side 28", rc == 0, "rc=%d: %s", rc, err);
    if (rc == 0) check_slice("load 28x28 at explicit side 28", &d, 0, 3, 28);
    dataset_free(&d);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/partrain-test-loader-XXXXXX");
    if (!mkdtemp(root)) die("mkdtemp");
    test_valid();
    test_failures();
    test_resample();
    rm_tree(root);
    struct stat st;
    CHECK("temporary directory removed", stat(root, &st) != 0, "%s still exists", root);
    CHECK_EXIT();
}
