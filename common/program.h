/*
 * common/program.h — the running program's name ("mpi", "shm", ...), the prefix of its
 * one-line messages. Defined in common/options.c; each trainer's main sets it first.
 */
#ifndef PARTRAIN_PROGRAM_H
#define PARTRAIN_PROGRAM_H

#ifdef __cplusplus
extern "C" {
#endif
extern const char *program_name;
#ifdef __cplusplus
}
#endif

#endif
