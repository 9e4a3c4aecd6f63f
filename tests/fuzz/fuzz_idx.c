/*
 * tests/fuzz/fuzz_idx.c — libFuzzer harness of the IDX loader (common/idx.c).
 *
 * One fuzz input becomes an image file and a label file, and the loader's three entry
 * points read them: dataset_count(), dataset_side() and dataset_load(). The input is
 *   byte 0     flags: bit 0 gzip the images, bit 1 gzip the labels (the harness compresses
 *              them; without the bit the bytes are written as given, so a gzip stream in
 *              the input, whole or cut, is read as such); bits 2-4 (% 5) the spelling of
 *              the names: 0 train-images-idx3-ubyte, 1 the same + .gz, 2 train-images.idx3-ubyte,
 *              3 that + .gz, 4 the images alone (no label file: "not found"); bits 5-7, k,
 *              zlib's buffer size: 16 << k bytes for k < 7, the loader's own (128 KiB) for 7
 *   byte 1     the requested side: byte % 33, 0 = the file's own (small, so runs stay fast)
 *   byte 2, 3  first and count of the slice, as signed bytes (count < 0: to the end)
 *   byte 4, 5  the length of the image file, little-endian (cut to what the input holds)
 *   the rest   the image file's bytes, then the label file's.
 * Beyond what the sanitizers catch, every result is checked against the contract of
 * common/idx.h (abort() when one does not hold): count, side and load agree, a failure leaves
 * a message and an empty dataset, a loaded set has the requested shape, pixels in [0,1],
 * labels 0..9, and (where the harness knows the files' uncompressed bytes) each label
 * and, at the file's own size, each pixel (byte / 255) is that of its sample.
 *
 * zlib's buffer size: the loader asks gzbuffer() for 128 KiB, which under ASan costs a
 * fresh mapping of 384 KiB per open (up to six opens per input: about 6 ms). gzbuffer() is
 * interposed here (the harness's definition wins at link time and calls zlib's through
 * dlsym(RTLD_NEXT)) so that most inputs read through 16..1024-byte buffers instead: fast,
 * and the loader's reads then cross buffer boundaries, which files of a few KiB never do
 * with 128 KiB. One input in eight keeps the loader's own size.
 *
 * The files are two memfds (rewritten in place per input, nothing created or deleted),
 * reached by symlinks to /proc/self/fd/N in a per-process directory
 * /dev/shm/partrain-fuzz-idx.PID (removed at exit; a killed run's directory is removed by
 * the next run).
 *
 * Build: make fuzz   (clang -fsanitize=fuzzer,address,undefined ... -DPARTRAIN_FUZZ)
 * Run:   build/fuzz/fuzz_idx -dict=tests/fuzz/idx.dict build/fuzz/corpus/idx tests/fuzz/corpus/idx
 *        (bench/fuzz.sh does this with its limits and prints the figures)
 */
#define _GNU_SOURCE                /* memfd_create, RTLD_NEXT */
#include "idx.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define WORK_PREFIX "partrain-fuzz-idx."
#define HEADER_BYTES 6
#define MAX_FUZZ_SIDE 32

/* the name spellings find_file() tries, one directory each; the last has no label file */
static const char *const FORMS[] = { "plain", "gz", "dot", "dotgz", "nolabels" };
static const char *const IMAGE_NAMES[] = { "train-images-idx3-ubyte", "train-images-idx3-ubyte.gz",
                                           "train-images.idx3-ubyte", "train-images.idx3-ubyte.gz",
                                           "train-images-idx3-ubyte" };
static const char *const LABEL_NAMES[] = { "train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz",
                                           "train-labels.idx1-ubyte", "train-labels.idx1-ubyte.gz", NULL };
#define N_FORMS (int)(sizeof FORMS / sizeof FORMS[0])

static char work_dir[256];
static int image_fd = -1, label_fd = -1;
static unsigned gz_buffer_size;          /* 0: what the loader asks for */
static int (*zlib_gzbuffer)(gzFile, unsigned);

/* the loader's gzbuffer() calls land here (see the header comment) */
int gzbuffer(gzFile file, unsigned size) {
    return zlib_gzbuffer(file, gz_buffer_size ? gz_buffer_size : size);
}

static void fatal(const char *what) {
    fprintf(stderr, "fuzz_idx: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* A broken promise of common/idx.h: say which and abort, so libFuzzer saves the input. */
static void contract(int holds, const char *what) {
    if (holds) return;
    char line[256];
    snprintf(line, sizeof line, "fuzz_idx: contract broken: %s", what);
    __sanitizer_report_error_summary(line);   /* where the sanitizers report: still open
                                                  under libFuzzer's -close_fd_mask=2 */
    abort();
}

/* Removes work_dir/<form>/<names> and the directories (what LLVMFuzzerInitialize made). */
static void remove_work_dir_at(const char *dir) {
    char path[512];
    for (int f = 0; f < N_FORMS; f++) {
        snprintf(path, sizeof path, "%s/%s/%s", dir, FORMS[f], IMAGE_NAMES[f]);
        unlink(path);
        if (LABEL_NAMES[f]) {
            snprintf(path, sizeof path, "%s/%s/%s", dir, FORMS[f], LABEL_NAMES[f]);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/%s", dir, FORMS[f]);
        rmdir(path);
    }
    rmdir(dir);
}

static void remove_work_dir(void) { remove_work_dir_at(work_dir); }

/* The directories of runs that ended without their atexit (a crash, a timeout, a kill). */
static void remove_stale_work_dirs(const char *base) {
    DIR *d = opendir(base);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, WORK_PREFIX, strlen(WORK_PREFIX))) continue;
        char *end;
        long pid = strtol(e->d_name + strlen(WORK_PREFIX), &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* still running */
        char path[512];
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        remove_work_dir_at(path);
    }
    closedir(d);
}

static void link_fd(const char *form, const char *name, int fd) {
    char target[64], path[512];
    snprintf(target, sizeof target, "/proc/self/fd/%d", fd);
    snprintf(path, sizeof path, "%s/%s/%s", work_dir, form, name);
    if (symlink(target, path) != 0) fatal(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    zlib_gzbuffer = (int (*)(gzFile, unsigned))dlsym(RTLD_NEXT, "gzbuffer");
    if (!zlib_gzbuffer) { fprintf(stderr, "fuzz_idx: zlib's gzbuffer not found: %s\n", dlerror()); exit(1); }
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    remove_stale_work_dirs(base);
    snprintf(work_dir, sizeof work_dir, "%s/" WORK_PREFIX "%ld", base, (long)getpid());
    remove_work_dir();                        /* a leftover of an earlier process with this pid */
    if (mkdir(work_dir, 0700) != 0) fatal(work_dir);
    atexit(remove_work_dir);
    image_fd = memfd_create("fuzz-idx-images", 0);
    label_fd = memfd_create("fuzz-idx-labels", 0);
    if (image_fd < 0 || label_fd < 0) fatal("memfd_create");
    for (int f = 0; f < N_FORMS; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", work_dir, FORMS[f]);
        if (mkdir(path, 0700) != 0) fatal(path);
        link_fd(FORMS[f], IMAGE_NAMES[f], image_fd);
        if (LABEL_NAMES[f]) link_fd(FORMS[f], LABEL_NAMES[f], label_fd);
    }
    return 0;
}

/* Replaces the memfd's content with buf (gzip-compressed first if gz). */
static void put_file(int fd, const uint8_t *buf, size_t len, int gz) {
    unsigned char *packed = NULL;
    if (gz) {
        z_stream z;
        memset(&z, 0, sizeof z);
        /* a 512-byte window, gzip wrapper (+16), the least memory: inputs are a few KiB */
        if (deflateInit2(&z, 1, Z_DEFLATED, 9 + 16, 1, Z_DEFAULT_STRATEGY) != Z_OK) fatal("deflateInit2");
        size_t cap = deflateBound(&z, (uLong)len);
        packed = malloc(cap);
        if (!packed) fatal("malloc");
        z.next_in = (Bytef *)buf;
        z.avail_in = (uInt)len;
        z.next_out = packed;
        z.avail_out = (uInt)cap;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) fatal("deflate");
        len = cap - z.avail_out;
        buf = packed;
        deflateEnd(&z);
    }
    if (ftruncate(fd, 0) != 0) fatal("ftruncate");
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fd, buf + done, len - done, (off_t)done);
        if (w <= 0) fatal("pwrite");
        done += (size_t)w;
    }
    free(packed);
}

/* The loaded set against what was asked: shape, pixel range, labels. */
static void check_loaded(const dataset *d, long want_n, int want_side) {
    contract(d->n == want_n, "dataset_load returned another number of samples than asked");
    contract(d->side == want_side && d->features == want_side * want_side,
             "dataset_load returned another image size than asked");
    contract((d->x || d->pixels) && d->y, "dataset_load succeeded without data");
    contract(!(d->x && d->pixels), "dataset_load kept both the bytes and floats");
    for (long i = 0; d->x && i < d->n * d->features; i++)
        contract(d->x[i] >= 0.0f && d->x[i] <= 1.0f + 1e-6f, "a pixel outside [0,1]");
    for (long i = 0; i < d->n; i++) contract(d->y[i] < IDX_CLASSES, "a label outside 0..9");
}

/* The uncompressed bytes of a file the harness wrote: known unless the input itself held
 * a gzip stream (zlib inflates what starts with 1f 8b; anything else is read as it is). */
static const uint8_t *known_content(const uint8_t *bytes, size_t len, int harness_gzipped) {
    int gzip_in_input = !harness_gzipped && len >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
    return gzip_in_input ? NULL : bytes;
}

/* The loaded slice against the files' bytes: at the file's own size the bytes of its
 * images are kept, each becoming exactly byte / 255 (pixel_floats), and every label is the
 * byte of its sample. */
static void check_content(const dataset *d, long first, const uint8_t *images, const uint8_t *labels) {
    if (images && d->features) {
        const uint8_t *pixels = images + 16 + first * d->features;
        contract(d->pixels && !d->x, "the images at the file's own size were not kept as bytes");
        for (long i = 0; i < d->n * d->features; i++) {
            float f;
            pixel_floats(d->pixels + i, 1, &f);
            contract(d->pixels[i] == pixels[i] && f == pixels[i] / 255.0f,
                     "a pixel at the file's own size is not its byte, or its float not byte / 255");
        }
    }
    if (labels)
        for (long i = 0; i < d->n; i++)
            contract(d->y[i] == labels[8 + first + i], "a label is not the byte of its sample");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < HEADER_BYTES) return -1;      /* not an input of this format: not kept */
    int flags = data[0];
    int form = ((flags >> 2) & 7) % N_FORMS;
    int buffer_log = flags >> 5;
    gz_buffer_size = buffer_log < 7 ? 16u << buffer_log : 0;
    int side = data[1] % (MAX_FUZZ_SIDE + 1);
    long first = (int8_t)data[2], count = (int8_t)data[3];
    size_t image_len = (size_t)data[4] | (size_t)data[5] << 8;
    const uint8_t *files = data + HEADER_BYTES;
    size_t files_len = size - HEADER_BYTES;
    if (image_len > files_len) image_len = files_len;
    put_file(image_fd, files, image_len, flags & 1);
    put_file(label_fd, files + image_len, files_len - image_len, flags & 2);

    char dir[300], err[IDX_ERR_LEN];
    snprintf(dir, sizeof dir, "%s/%s", work_dir, FORMS[form]);

    long n = -1;
    err[0] = 0;
    int count_rc = dataset_count(dir, "train", &n, err, sizeof err);
    contract(count_rc == 0 || (count_rc == -1 && err[0]), "dataset_count failed without a message");
    contract(count_rc != 0 || (n >= 1 && n <= 100000000L), "dataset_count gave an absurd count");

    /* dataset_side validates as dataset_count does (the same code): asked only when that
     * succeeded, which saves a third of the time of the many inputs that fail */
    int own_side = -1;
    if (count_rc == 0) {
        err[0] = 0;
        int side_rc = dataset_side(dir, "train", &own_side, err, sizeof err);
        contract(side_rc == 0, "dataset_side rejects files that dataset_count accepts");
        contract(own_side >= 0 && own_side <= IDX_MAX_SIDE, "dataset_side gave an absurd side");
    }

    dataset d;
    err[0] = 0;
    int load_rc = dataset_load(dir, "train", first, count, side, &d, err, sizeof err);
    if (load_rc == 0) {
        contract(count_rc == 0, "dataset_load accepted files that dataset_count rejects");
        contract(own_side > 0, "dataset_load accepted non-square images");
        contract(first >= 0 && first < n, "dataset_load accepted a slice that starts outside the file");
        long want_n = count < 0 ? n - first : count;
        contract(want_n >= 1 && first + want_n <= n, "dataset_load accepted a slice that ends outside the file");
        check_loaded(&d, want_n, side > 0 ? side : own_side);
        const uint8_t *labels = known_content(files + image_len, files_len - image_len, flags & 2);
        const uint8_t *images = known_content(files, image_len, flags & 1);
        check_content(&d, first, d.side == own_side ? images : NULL, labels);
        contract(dataset_check_sides(dir, d.side, own_side, err, sizeof err) == (d.side == own_side ? 0 : -1),
                 "dataset_check_sides");
        dataset_free(&d);
    } else {
        contract(load_rc == -1 && err[0], "dataset_load failed without a message");
        contract(!d.pixels && !d.x && !d.y && d.n == 0, "a failed dataset_load left data behind");
    }
    return 0;
}
