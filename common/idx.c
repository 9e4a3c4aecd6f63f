/*
 * common/idx.c — IDX (MNIST format) loader; see idx.h for the contract.
 *
 * All reads go through zlib's gz* functions, which read gzip and plain files alike
 * (gzdirect() tells which). Sizes are checked in 64-bit arithmetic before anything
 * is allocated, so a header that promises 2^31 images of 1000x1000 fails with a
 * message instead of an allocation of terabytes.
 */
#define _POSIX_C_SOURCE 200809L
#include "idx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u   /* unsigned byte, 3 dimensions */
#define IDX_MAGIC_LABELS 0x00000801u   /* unsigned byte, 1 dimension */
#define IDX_MAX_COUNT    100000000L    /* 1e8 samples: anything above is absurd here */

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* First existing spelling of "<dir>/<prefix>-<kind>-idx<d>-ubyte": plain, ".gz",
 * and the "<prefix>-<kind>.idx<d>-ubyte" variant some mirrors use. */
static int find_file(const char *dir, const char *prefix, const char *kind, int dims,
                     char *path, size_t pathlen, char *err, size_t errlen) {
    const char *forms[] = { "%s/%s-%s-idx%d-ubyte", "%s/%s-%s-idx%d-ubyte.gz",
                            "%s/%s-%s.idx%d-ubyte", "%s/%s-%s.idx%d-ubyte.gz" };
    struct stat st;
    if (strlen(dir) + 64 >= pathlen) return fail(err, errlen, "%.200s...: the directory name is too long (%zu characters)", dir, strlen(dir));
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        snprintf(path, pathlen, forms[f], dir, prefix, kind, dims);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return 0;
    }
    snprintf(path, pathlen, forms[0], dir, prefix, kind, dims);
    return fail(err, errlen, "%s: not found (also tried .gz; run 'make data' or pass --data DIR)", path);
}

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

typedef struct {
    gzFile gz;
    char path[IDX_PATH_LEN];
    uint32_t magic;
    long count;                 /* items in the file */
    long rows, cols;            /* images only */
    long item_bytes;            /* bytes per item */
    long header_bytes;
} idx_file;

/* Reads exactly len bytes; returns bytes read, or -1 on a stream error (message in err). */
static long read_bytes(idx_file *f, void *buf, long len, char *err, size_t errlen) {
    long done = 0;
    while (done < len) {
        unsigned chunk = (unsigned)((len - done) > (1L << 30) ? (1L << 30) : (len - done));
        int got = gzread(f->gz, (char *)buf + done, chunk);
        if (got < 0) {
            int code;
            const char *msg = gzerror(f->gz, &code);
            if (code == Z_ERRNO) return fail(err, errlen, "%s: read error: %s", f->path, strerror(errno));
            return fail(err, errlen, "%s: corrupt gzip stream: %s", f->path, msg);
        }
        if (got == 0) {
            int code;
            const char *msg = gzerror(f->gz, &code);
            if (code == Z_OK && !gzdirect(f->gz)) {
                /* zlib also reports a clean end (Z_OK) for a gzip stream cut short when an
                 * earlier read filled its buffer exactly as the input ran out (a file missing
                 * only its trailer, read in one piece): it inflates nothing more after that.
                 * With the end-of-file flag cleared, one more read inflates, and a cut stream
                 * then says Z_BUF_ERROR (found by tests/fuzz/fuzz_idx.c). */
                gzclearerr(f->gz);
                got = gzread(f->gz, (char *)buf + done, 1);
                if (got > 0) { done += got; continue; }
                msg = gzerror(f->gz, &code);
            }
            if (code == Z_BUF_ERROR)   /* input ended inside the gzip stream */
                return fail(err, errlen, "%s: truncated gzip stream: %s", f->path, msg);
            if (code != Z_OK)
                return fail(err, errlen, "%s: corrupt gzip stream: %s", f->path, msg);
            break;
        }
        done += got;
    }
    return done;
}

/* Compares the promised length with what the stream holds from the current position
 * on, by decompressing to the end (gzip files only; about 0.1 s for 60k images). */
static int idx_check_rest(idx_file *f, char *err, size_t errlen) {
    static char sink[1 << 16];
    long long total = gztell(f->gz);
    long long promised = (long long)f->header_bytes + (long long)f->count * f->item_bytes;
    for (;;) {
        long r = read_bytes(f, sink, sizeof sink, err, errlen);
        if (r < 0) return -1;
        if (r == 0) break;
        total += r;
    }
    if (total < promised)
        return fail(err, errlen, "%s: truncated: header promises %ld items (%lld bytes uncompressed) but the stream holds %lld",
                    f->path, f->count, promised, total);
    if (total > promised)
        return fail(err, errlen, "%s: %lld trailing bytes after the %ld items the header promises",
                    f->path, total - promised, f->count);
    return 0;
}

/* Opens and validates the header; checks that the file holds exactly the promised
 * bytes: plain files by their size, gzip files by decompressing to the end (every entry
 * point the same way, so count, side and load always agree on a file). */
static int idx_open(idx_file *f, const char *path, uint32_t want_magic, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->gz = gzopen(path, "rb");
    if (!f->gz) return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    gzbuffer(f->gz, 1 << 17);

    int dims = want_magic == IDX_MAGIC_IMAGES ? 3 : 1;
    long want_header = 4 + 4L * dims;
    unsigned char h[16];
    long got = read_bytes(f, h, want_header, err, errlen);
    if (got < 0) goto bad;
    if (got < want_header) {
        fail(err, errlen, "%s: truncated header (%ld of %ld bytes)", path, got, want_header);
        goto bad;
    }
    f->magic = be32(h);
    if (f->magic != want_magic) {
        fail(err, errlen, "%s: bad magic 0x%08x (expected 0x%08x for an idx%d %s file)", path,
             f->magic, want_magic, dims, dims == 3 ? "image" : "label");
        goto bad;
    }
    uint32_t n = be32(h + 4);
    if (n == 0 || n > IDX_MAX_COUNT) {
        fail(err, errlen, "%s: absurd item count %u in header", path, n);
        goto bad;
    }
    f->count = n;
    f->header_bytes = want_header;
    f->item_bytes = 1;
    if (dims == 3) {
        uint32_t r = be32(h + 8), c = be32(h + 12);
        if (r == 0 || c == 0 || r > IDX_MAX_SIDE || c > IDX_MAX_SIDE) {
            fail(err, errlen, "%s: absurd image dimensions %ux%u in header (1..%d allowed)", path,
                 r, c, IDX_MAX_SIDE);
            goto bad;
        }
        f->rows = r; f->cols = c;
        f->item_bytes = (long)r * c;
    }
    /* count <= 1e8 and item_bytes <= 2^20: the product fits easily in 64 bits */
    long long promised = (long long)f->header_bytes + (long long)f->count * f->item_bytes;

    if (gzdirect(f->gz)) {
        struct stat st;
        if (stat(path, &st) != 0) {
            fail(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
            goto bad;
        }
        if ((long long)st.st_size < promised) {
            fail(err, errlen, "%s: truncated: header promises %ld items (%lld bytes) but the file has %lld bytes",
                 path, f->count, promised, (long long)st.st_size);
            goto bad;
        }
        if ((long long)st.st_size > promised) {
            fail(err, errlen, "%s: %lld trailing bytes after the %ld items the header promises",
                 path, (long long)st.st_size - promised, f->count);
            goto bad;
        }
    } else if (idx_check_rest(f, err, errlen)) {
        goto bad;
    }
    return 0;
bad:
    gzclose(f->gz);
    f->gz = NULL;
    return -1;
}

/* Positions at item `first` and reads `count` items into buf. */
static int idx_read_items(idx_file *f, long first, long count, unsigned char *buf,
                          char *err, size_t errlen) {
    z_off_t off = (z_off_t)(f->header_bytes + first * f->item_bytes);
    if (gzseek(f->gz, off, SEEK_SET) != off) {
        int code;
        return fail(err, errlen, "%s: cannot seek to item %ld: %s", f->path, first, gzerror(f->gz, &code));
    }
    long want = count * f->item_bytes;
    long got = read_bytes(f, buf, want, err, errlen);
    if (got < 0) return -1;
    if (got < want)
        return fail(err, errlen, "%s: truncated: expected %ld bytes at item %ld, got %ld", f->path, want, first, got);
    return 0;
}

static void idx_close(idx_file *f) {
    if (f->gz) gzclose(f->gz);
    f->gz = NULL;
}

/* Opens both files of a split and checks that they agree. */
static int open_pair(const char *dir, const char *prefix, idx_file *img, idx_file *lab,
                     char *err, size_t errlen) {
    char ipath[IDX_PATH_LEN], lpath[IDX_PATH_LEN];
    if (find_file(dir, prefix, "images", 3, ipath, sizeof ipath, err, errlen)) return -1;
    if (find_file(dir, prefix, "labels", 1, lpath, sizeof lpath, err, errlen)) return -1;
    if (idx_open(img, ipath, IDX_MAGIC_IMAGES, err, errlen)) return -1;
    if (idx_open(lab, lpath, IDX_MAGIC_LABELS, err, errlen)) { idx_close(img); return -1; }
    if (img->count != lab->count) {
        fail(err, errlen, "%s: %ld images but %s has %ld labels", ipath, img->count, lpath, lab->count);
        idx_close(img); idx_close(lab);
        return -1;
    }
    return 0;
}

int dataset_count(const char *dir, const char *prefix, long *count, char *err, size_t errlen) {
    idx_file img, lab;
    if (open_pair(dir, prefix, &img, &lab, err, errlen)) return -1;
    *count = img.count;
    idx_close(&img); idx_close(&lab);
    return 0;
}

int dataset_side(const char *dir, const char *prefix, int *side, char *err, size_t errlen) {
    idx_file img, lab;
    if (open_pair(dir, prefix, &img, &lab, err, errlen)) return -1;
    *side = img.rows == img.cols ? (int)img.rows : 0;
    idx_close(&img); idx_close(&lab);
    return 0;
}

/* Bilinear, align-corners = false: source coordinate (d + 0.5) * in / out - 0.5,
 * clamped to the image, as torch.nn.functional.interpolate(mode="bilinear"). */
void idx_resample(const float *src, int in_side, float *dst, int out_side) {
    double scale = (double)in_side / out_side;
    for (int oy = 0; oy < out_side; oy++) {
        double sy = (oy + 0.5) * scale - 0.5;
        if (sy < 0) sy = 0;
        int y0 = (int)sy;
        if (y0 > in_side - 1) y0 = in_side - 1;
        int y1 = y0 + 1 < in_side ? y0 + 1 : in_side - 1;
        float wy = (float)(sy - y0);
        for (int ox = 0; ox < out_side; ox++) {
            double sx = (ox + 0.5) * scale - 0.5;
            if (sx < 0) sx = 0;
            int x0 = (int)sx;
            if (x0 > in_side - 1) x0 = in_side - 1;
            int x1 = x0 + 1 < in_side ? x0 + 1 : in_side - 1;
            float wx = (float)(sx - x0);
            float top = src[y0 * in_side + x0] * (1 - wx) + src[y0 * in_side + x1] * wx;
            float bot = src[y1 * in_side + x0] * (1 - wx) + src[y1 * in_side + x1] * wx;
            dst[oy * out_side + ox] = top * (1 - wy) + bot * wy;
        }
    }
}

/* 64-bit hash of a byte sequence, 8 bytes at a time (FNV-1a's prime on words, then a
 * final mix): identifies the data a run trained on, not a defence against forgery. Fed
 * in pieces (hash_feed) it gives the hash of the pieces joined. */
typedef struct { uint64_t h; unsigned char tail[8]; size_t n_tail; } hash_state;
static void hash_word(hash_state *s, const unsigned char *b) {
    uint64_t w;
    memcpy(&w, b, 8);
    s->h = (s->h ^ w) * 0x100000001b3ull;
    s->h ^= s->h >> 29;
}
static void hash_feed(hash_state *s, const void *p, size_t n) {
    const unsigned char *b = p;
    if (s->n_tail) {                       /* complete the word the last piece left open */
        size_t take = 8 - s->n_tail < n ? 8 - s->n_tail : n;
        memcpy(s->tail + s->n_tail, b, take);
        s->n_tail += take;
        b += take;
        n -= take;
        if (s->n_tail < 8) return;
        hash_word(s, s->tail);
        s->n_tail = 0;
    }
    for (; n >= 8; b += 8, n -= 8) hash_word(s, b);
    memcpy(s->tail, b, n);
    s->n_tail = n;
}
static uint64_t hash_end(const hash_state *s) {
    uint64_t h = s->h;
    for (size_t i = 0; i < s->n_tail; i++) h = (h ^ s->tail[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    hash_state s = { h, { 0 }, 0 };
    hash_feed(&s, p, n);
    return hash_end(&s);
}

/* the hashes of the last "train" and "t10k" loads of this process (0: none) */
static uint64_t loaded_hash[2];

uint64_t dataset_loaded_hash(void) {
    return hash_bytes(0xcbf29ce484222325ull, loaded_hash, sizeof loaded_hash);
}

int dataset_load(const char *dir, const char *prefix, long first, long count, int side,
                 dataset *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    idx_file img, lab;
    /* The files are checked exactly as dataset_count() checks them (decompressed from the
     * header to the end before anything is read): zlib's handling of bytes after a gzip
     * member depends on how the stream is read (found by tests/fuzz/fuzz_idx.c: a member
     * followed by a corrupt one was refused by count and accepted by a load that read the
     * items first), so one procedure decides for both. */
    if (open_pair(dir, prefix, &img, &lab, err, errlen)) return -1;
    int rc = -1;
    unsigned char *raw = NULL, *labels = NULL;

    if (count < 0) count = (first >= 0 && first < img.count) ? img.count - first : 0;
    if (first < 0 || count <= 0 || first > img.count - count) {
        fail(err, errlen, "%s: slice first=%ld count=%ld is outside the %ld samples the file holds", img.path,
             first, count, img.count);
        goto done;
    }
    if (side <= 0) {
        if (img.rows != img.cols) {
            fail(err, errlen, "%s: images are %ldx%ld, not square; pass --image-size", img.path, img.rows, img.cols);
            goto done;
        }
        side = (int)img.rows;
    }
    if (side > IDX_MAX_SIDE) {
        fail(err, errlen, "%s: image size %d is larger than %d", img.path, side, IDX_MAX_SIDE);
        goto done;
    }
    if (img.rows != img.cols) {
        fail(err, errlen, "%s: images are %ldx%ld; only square images can be resampled", img.path, img.rows, img.cols);
        goto done;
    }

    /* Labels: the whole file is small, check every label, keep the slice. */
    labels = malloc((size_t)lab.count);
    if (!labels) { fail(err, errlen, "%s: out of memory for %ld labels", lab.path, lab.count); goto done; }
    if (idx_read_items(&lab, 0, lab.count, labels, err, errlen)) goto done;
    for (long i = 0; i < lab.count; i++)
        if (labels[i] >= IDX_CLASSES) {
            fail(err, errlen, "%s: label %u at index %ld is out of range 0..%d", lab.path, labels[i], i, IDX_CLASSES - 1);
            goto done;
        }

    size_t features = (size_t)side * side;
    int own_size = side == img.rows;   /* keep the bytes; else the resampled floats */
    if (own_size) out->pixels = malloc((size_t)count * features);
    else out->x = malloc((size_t)count * features * sizeof(float));
    out->y = malloc((size_t)count);
    raw = own_size ? NULL : malloc((size_t)img.item_bytes * (count < 1024 ? count : 1024));
    float *floats = malloc((size_t)(own_size ? 1024 : 1) * img.item_bytes * sizeof(float));
    if (!(out->pixels || out->x) || !out->y || !(own_size || raw) || !floats) {
        free(floats);
        fail(err, errlen, "out of memory for %ld samples of %dx%d", count, side, side);
        goto done;
    }
    memcpy(out->y, labels + first, (size_t)count);
    /* what was loaded, for dataset_loaded_hash(): the slice, its pixels as floats after
     * resampling (one hash whether the bytes or the floats are kept), its labels */
    long where[2] = { first, count };
    hash_state hs = { hash_bytes(0xcbf29ce484222325ull, where, sizeof where), { 0 }, 0 };
    /* Images in chunks of 1024: the bytes straight into pixels, or through a small byte
     * buffer into the resampled floats. */
    for (long done_n = 0; done_n < count;) {
        long chunk = count - done_n < 1024 ? count - done_n : 1024;
        unsigned char *bytes = own_size ? out->pixels + (size_t)done_n * features : raw;
        if (idx_read_items(&img, first + done_n, chunk, bytes, err, errlen)) { free(floats); goto done; }
        if (own_size) {
            pixel_floats(bytes, chunk * img.item_bytes, floats);
            hash_feed(&hs, floats, (size_t)chunk * features * sizeof(float));
        } else {
            for (long i = 0; i < chunk; i++) {
                float *dst = out->x + (size_t)(done_n + i) * features;
                pixel_floats(raw + i * img.item_bytes, img.item_bytes, floats);
                idx_resample(floats, (int)img.rows, dst, side);
            }
            hash_feed(&hs, out->x + (size_t)done_n * features, (size_t)chunk * features * sizeof(float));
        }
        done_n += chunk;
    }
    free(floats);
    out->n = count;
    out->side = side;
    out->features = (int)features;
    if (!strcmp(prefix, "train") || !strcmp(prefix, "t10k"))
        loaded_hash[prefix[0] == 't' && prefix[1] == '1'] = hash_bytes(hash_end(&hs), out->y, (size_t)count);
    rc = 0;
done:
    free(raw);
    free(labels);
    idx_close(&img);
    idx_close(&lab);
    if (rc) dataset_free(out);
    return rc;
}

void dataset_free(dataset *d) {
    free(d->pixels);
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

int dataset_check_sides(const char *dir, int train_side, int test_side, char *err, size_t errlen) {
    if (test_side == train_side) return 0;
    return fail(err, errlen, "%s/t10k-images holds %dx%d images but %s/train-images %dx%d: one size for both "
                "(or --image-size S to resample both)", dir, test_side, test_side, dir, train_side, train_side);
}
