/*
 * common/idx.h — MNIST/IDX data set loader shared by every partrain trainer.
 *
 * Reads the standard IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), raw or gzip-compressed (zlib
 * detects the compression from the content, not the name; "name.gz" and the
 * "train-images.idx3-ubyte" spelling are also tried). Everything in the header is
 * validated: magic numbers, dimensions, image count == label count, label range
 * 0..9, and that the file holds exactly the bytes the header promises (sizes are
 * computed in 64 bits with overflow checks, so absurd headers fail cleanly).
 *
 * Pixels are float32 in [0,1] (byte / 255, pixel_floats()). At the file's own size the
 * bytes are kept as they are, a quarter of the floats' memory and memory traffic; a
 * batch is converted when it is gathered (common/data.h). Images can be resampled to
 * S x S with bilinear interpolation (align-corners = false, as PyTorch's interpolate)
 * for the image-size sweeps (28 -> 56 -> 112: 784 -> 12544 inputs); those are kept as
 * the floats the interpolation gives.
 *
 * Slices: dataset_load(first, count) reads only samples [first, first+count) —
 * an MPI rank loads only its contiguous shard. dataset_count() reads only the
 * headers, so a rank can compute its shard before loading.
 *
 * Errors: every function returns 0 on success, -1 on failure with a one-line
 * message in err that names the file and the problem.
 */
#ifndef PARTRAIN_IDX_H
#define PARTRAIN_IDX_H

#include <stddef.h>
#include <stdint.h>

#define IDX_PATH_LEN 4352    /* a file name: PATH_MAX and the longest IDX suffix */
#define IDX_ERR_LEN (IDX_PATH_LEN * 2 + 256)   /* two file names and the reason */
#define IDX_MAX_SIDE 1024      /* larger images are rejected as absurd */
#define IDX_CLASSES 10

typedef struct {
    long n;                /* samples held in x/y */
    int side;              /* image side after resampling: features = side * side */
    int features;
    unsigned char *pixels; /* n x features bytes, row-major, at the file's own size; else NULL */
    float *x;              /* n x features floats in [0,1], row-major, resampled; else NULL */
    unsigned char *y;      /* n labels in 0..9 */
} dataset;

/* Number of samples in "<dir>/<prefix>-images..." after checking that the image
 * and label headers agree; prefix is "train" or "t10k". Reads headers only. */
int dataset_count(const char *dir, const char *prefix, long *count,
                  char *err, size_t errlen);

/* The image side of "<dir>/<prefix>-images..." from its header (square images only;
 * a non-square file gives 0: it must be resampled). Reads headers only. */
int dataset_side(const char *dir, const char *prefix, int *side, char *err, size_t errlen);

/* Loads samples [first, first + count) (count < 0: to the end of the file),
 * resampled to side x side (side <= 0: the file's own size, which must then be
 * square). The whole file is still validated (size, labels). */
int dataset_load(const char *dir, const char *prefix, long first, long count,
                 int side, dataset *out, char *err, size_t errlen);

void dataset_free(dataset *d);

/* The one conversion of pixel bytes to the floats the trainers compute with: byte / 255
 * (a division, not a product with 1/255, which rounds some bytes differently). */
static inline void pixel_floats(const unsigned char *p, long n, float *x) {
    for (long k = 0; k < n; k++) x[k] = p[k] / 255.0f;
}

/* A 64-bit hash of the data this process loaded last as "train" and "t10k" (the slices,
 * pixels after resampling, labels; 0 for a split not loaded): --checkpoint records it and
 * --resume compares it, so changed files or another data set under the same name are
 * refused. Computed once per dataset_load(). */
uint64_t dataset_loaded_hash(void);

/* The training and test sets of one run must have one image size (each trainer's input
 * layer has one width): 0, or -1 with one line in err naming both sets. The sides are
 * the files' own (dataset_side) or the loaded sets'. */
int dataset_check_sides(const char *dir, int train_side, int test_side, char *err, size_t errlen);

/* Bilinear resample of one in_side x in_side image to out_side x out_side. */
void idx_resample(const float *src, int in_side, float *dst, int out_side);

#endif
