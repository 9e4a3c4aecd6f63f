/*
 * common/sharded_data.h — the data of a data-parallel MPI run (header-only), checked
 * alike on every rank: the whole training set on every rank, this rank's shard of the
 * test set, the memory check for the ranks of a node, and the same files on every rank.
 */
#ifndef PARTRAIN_SHARDED_DATA_H
#define PARTRAIN_SHARDED_DATA_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* POSIX calls under -std=c11, when this is the first include */
#endif

#include <stdint.h>
#include <string.h>

#include <mpi.h>

#include "data.h"
#include "idx.h"
#include "memcheck.h"
#include "mpi_util.h"
#include "options.h"

/* The data of a data-parallel run, checked alike on every rank: the whole training set
 * (the shuffle is global, so every rank touches every sample) and this rank's contiguous
 * shard of the test set (empty when there are more ranks than test samples). Resolves
 * --batch full, and --batch-per-rank B (0: not given) into a global batch of P * B.
 * Flags that do not fit the data: one line from rank 0, every rank exits 2. */
typedef struct {
    dataset train, test;
    long train_n, test_n;          /* samples used (--train, --test or the files') */
    long test_lo, test_count;      /* this rank's test shard */
} sharded_data;
static void __attribute__((unused)) load_sharded_data(train_options *o, long batch_per_rank,
                                                      double (*model_bytes)(const train_options *o, int features),
                                                      sharded_data *d) {
    char err[IDX_ERR_LEN] = "";
    memset(d, 0, sizeof *d);
    long train_avail = 0, test_avail = 0;
    int bad = dataset_count(o->data_dir, "train", &train_avail, err, sizeof err) ||
              dataset_count(o->data_dir, "t10k", &test_avail, err, sizeof err);
    agree_or_die(bad, err, 2);
    if (o->train_n > train_avail) die_all("--train %ld: %s holds only %ld training samples", o->train_n, o->data_dir, train_avail);
    if (o->test_n > test_avail) die_all("--test %ld: %s holds only %ld test samples", o->test_n, o->data_dir, test_avail);
    long train_n = d->train_n = o->train_n ? o->train_n : train_avail;
    d->test_n = o->test_n ? o->test_n : test_avail;
    if (nranks > train_n)
        die_all("%d ranks but only %ld training samples: every rank needs at least one (fewer ranks or a larger --train)", nranks, train_n);
    if (batch_per_rank) {
        o->batch = batch_per_rank * nranks;
        if (o->batch > train_n)
            die_all("--batch-per-rank %ld: %d ranks x %ld = %ld rows is larger than the %ld training samples",
                    batch_per_rank, nranks, batch_per_rank, o->batch, train_n);
    }
    if (o->batch_full) o->batch = train_n;
    if (o->batch > train_n) die_all("--batch %ld is larger than the %ld training samples", o->batch, train_n);
    if (o->batch < nranks)
        die_all("--batch %ld is smaller than the %d ranks: every rank needs at least one row of each mini-batch", o->batch, nranks);
    shard(d->test_n, rank, nranks, &d->test_lo, &d->test_count);
    /* the files' image sides, and whether the ranks of this node fit in its memory */
    int train_side = 0, test_side = 0;
    bad = dataset_side(o->data_dir, "train", &train_side, err, sizeof err) ||
          dataset_side(o->data_dir, "t10k", &test_side, err, sizeof err) ||
          (!o->image_size && dataset_check_sides(o->data_dir, train_side, test_side, err, sizeof err));
    agree_or_die(bad, err, 2);
    int side = o->image_size ? o->image_size : train_side, local = ranks_on_this_node();
    double need = mem_dataset_bytes(train_n + d->test_count, side, train_side) + (model_bytes ? model_bytes(o, side * side) : 0);
    bad = mem_short(need, local, "data, model and buffers", err, sizeof err);
    agree_or_die(bad, err, 2);
    bad = dataset_load(o->data_dir, "train", 0, train_n, o->image_size, &d->train, err, sizeof err);
    if (!bad && d->test_count > 0)
        bad = dataset_load(o->data_dir, "t10k", d->test_lo, d->test_count, o->image_size, &d->test, err, sizeof err);
    agree_or_die(bad, err, 2);
    /* every rank must have loaded the same training set (the same files on every node):
     * its size, image side and bytes, compared over the ranks */
    unsigned long long mine[3] = { (unsigned long long)d->train.n, (unsigned long long)d->train.side, 0xcbf29ce484222325ull };
    const unsigned char *p = d->train.pixels ? d->train.pixels : (const unsigned char *)d->train.x;
    size_t pixel_bytes = d->train.pixels ? 1 : sizeof(float);
    for (size_t i = 0; i < pixel_bytes * (size_t)d->train.n * (size_t)d->train.features; i++)
        mine[2] = (mine[2] ^ p[i]) * 0x100000001b3ull;
    for (long i = 0; i < d->train.n; i++) mine[2] = (mine[2] ^ d->train.y[i]) * 0x100000001b3ull;
    unsigned long long lo[3], hi[3];
    mpi_check(MPI_Allreduce(mine, lo, 3, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(mine, hi, 3, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (lo[0] != hi[0] || lo[1] != hi[1] || lo[2] != hi[2])
        die_all("the ranks loaded different training sets from %s/train-images (%llu..%llu samples, %llux%llu..%llux%llu "
                "images%s): every rank must see the same files", o->data_dir, lo[0], hi[0], lo[1], lo[1], hi[1], hi[1],
                lo[0] == hi[0] && lo[1] == hi[1] ? ", different contents" : "");
}

/* This rank's part of the global batch of `rows` samples from order[start]: its
 * contiguous shard of the rows (common/mpi_util.h's shard()) gathered into x and y;
 * returns how many rows that is (0 when a short last batch leaves this rank none). */
static inline int gather_rank_rows(const dataset *d, const uint32_t *order, long start, int rows, float *x,
                                   unsigned char *y) {
    long lo, count;
    shard(rows, rank, nranks, &lo, &count);
    gather_batch(d, order + start + lo, (int)count, x, y);
    return (int)count;
}

/* The cache lines of this rank's part of the next global batch (rows samples from
 * order[start]), asked for while this step computes, as serial does with its next batch. */
static inline void prefetch_rank_rows(const dataset *d, const uint32_t *order, long start, int rows) {
    long lo, count;
    shard(rows, rank, nranks, &lo, &count);
    prefetch_batch(d, order + start + lo, (int)count);
}

#endif
