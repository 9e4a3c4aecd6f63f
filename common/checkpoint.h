/*
 * common/checkpoint.h — --checkpoint / --resume: a run's state after an epoch, in one file.
 *
 * What a run needs to go on exactly where it stopped is small, because every trainer's
 * randomness is a pure function of (seed, epoch) (common/prng.h) and SGD keeps no state
 * beside the weights: the parameters, the number of epochs done, the per-epoch series
 * the result row is made of (loss, accuracy, seconds, ...) and the training seconds so
 * far. A run resumed from epoch e therefore ends with the same bits as one that never
 * stopped (tests/test_checkpoint.sh kills runs with SIGKILL and compares).
 *
 * File (native byte order, float32 parameters as the trainer holds them, padding included):
 *   "PARTCKPT"  u32 version (2)  u32 config length  config text (key=value ...)  u64 FNV-1a
 *   of the config  u64 hash of the data loaded (dataset_loaded_hash)  u32 epochs done
 *   u32 series  f64 seconds  u64 floats  f32 params[floats]  f64 series[series][epochs done]
 *   u32 CRC-32 of everything before it. Version 1 (no data hash) is refused in one line.
 * Written to a new FILE.tmp.PID.RANDOM beside FILE (O_EXCL, never through a symbolic
 * link), flushed to disk (fsync) and renamed over FILE: a crash while writing leaves the
 * previous checkpoint whole, and two runs given one FILE never share a temporary file.
 * An existing FILE that does not start with "PARTCKPT" (not a checkpoint), or that is
 * the --csv file under any name (device and inode), is never written: one line, exit 2.
 *
 * The config text names everything the maths depends on (program, variant, ranks,
 * threads, data set and sizes, net, batch, lr, seed, the trainer's own flags), not
 * --epochs: a finished run can be resumed with a larger --epochs and trains on.
 * A file of another configuration or other data, truncated or corrupted, gives one line
 * and exit 2. A checkpoint holding all --epochs already resumes to no training and no
 * new CSV row (one line says so). When every write of a run failed (a full disk, ulimit
 * -f), one line at exit says that no checkpoint was written; the exit status stays 0.
 */
#ifndef PARTRAIN_CHECKPOINT_H
#define PARTRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

#define CKPT_MAX_SERIES 6
#define CKPT_CONFIG_LEN 1024

typedef struct {
    char config[CKPT_CONFIG_LEN];     /* this run's configuration, "key=value key=value ..." */
    uint64_t data_hash;               /* dataset_loaded_hash() at checkpoint_init */
    int epochs_done;                  /* after checkpoint_load: epochs the resumed run had done */
    double seconds;                   /* training seconds of those epochs */
    float *params;                    /* the trainer's parameter buffer */
    long n_floats;                    /* floats in it */
    int n_series;
    double *series[CKPT_MAX_SERIES];  /* per-epoch series, --epochs long each (loss, accuracy, ...) */
} checkpoint;

/* Describes this run: the configuration and where its state lives. extra: the trainer's
 * own flags that change the maths ("filters=8"), or NULL. series: n arrays of o->epochs. */
void checkpoint_init(checkpoint *c, const char *program, const char *variant, int ranks, int threads,
                     const train_options *o, int side, long train_n, long test_n, const char *extra,
                     float *params, long n_floats, double **series, int n_series);

/* Before the work: --checkpoint FILE is not a directory or a device, not the --csv file,
 * a checkpoint when it exists, and its directory takes a new file (the temporary file is
 * written there, then renamed); --resume FILE is a readable file; --checkpoint-every
 * comes with --checkpoint. Also ignores SIGXFSZ (a write over ulimit -f fails, EFBIG).
 * 0, or -1 + one line in err. */
int checkpoint_check_flags(const train_options *o, char *err, size_t errlen);

/* Writes the state after `epochs_done` epochs (seconds: training time so far). 0 or -1 + err;
 * on failure FILE is untouched. */
int checkpoint_save(const char *path, const checkpoint *c, int epochs_done, double seconds,
                    char *err, size_t errlen);

/* --resume FILE: checks the whole file (magic, version, checksum, size), then that it is
 * of this configuration and holds at most max_epochs epochs; loads the parameters and
 * series into the buffers given to checkpoint_init and sets epochs_done and seconds.
 * 0, or -1 with one line in err naming the file and the problem (nothing loaded is used). */
int checkpoint_load(const char *path, checkpoint *c, int max_epochs, char *err, size_t errlen);

/* Whether a checkpoint is written after epoch `epoch` (every N and the last). */
int checkpoint_due(const train_options *o, int epoch);

/* At the end of epoch `epoch`: saves when --checkpoint is given and the epoch is due
 * (every --checkpoint-every epochs, and the last). A failed write is a warning on stderr
 * (training goes on; the previous checkpoint stays). Returns the seconds it took, which
 * the caller leaves out of its training time. */
double checkpoint_after_epoch(const checkpoint *c, const char *program, const train_options *o,
                              int epoch, double seconds);

#endif
