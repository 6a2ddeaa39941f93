/*
 * mpi_counter.c: a plain PMPI counter, the yardstick of libwaffle_mpi.so. Preloaded in its place
 * (LD_PRELOAD), it defines the same MPI_* functions, each of which adds one to its count and calls
 * PMPI_*, and nothing else: no waffle, no recording, no lookups. At MPI_Finalize each rank writes
 * "NAME COUNT" lines, one per function it called, to $WAFFLE_MPI_COUNTS with `%r` replaced by its
 * rank in MPI_COMM_WORLD (as WAFFLE_OUTPUT names trace files).
 *
 * Built with -DMPI_COUNTER_NEXT, each function calls the next definition of itself instead
 * (dlsym(RTLD_NEXT), resolved when the library loads): preloaded in front of libwaffle_mpi.so
 * (LD_PRELOAD="libmpi_counter.so libwaffle_mpi.so"), it counts the calls of the very run that is
 * traced, for programs whose calls depend on timing (polling with MPI_Test or MPI_Iprobe).
 *
 * Which functions, with which parameters, comes from mpi_counter_calls.h, which
 * real_programs.py writes before compiling this file: one line per MPI function that
 * libwaffle_mpi.so exports, read from the library itself, with its prototype from the mpi.h this
 * file is compiled against,
 *   MPI_COUNTED(MPI_Send, (const void *buf, ...), (buf, ...))
 * and MPI_COUNTED_LAST for MPI_Finalize. So the counter counts exactly what the library wraps,
 * and the compiler checks each definition against mpi.h's declaration of the same function.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index of each counted function: MPI_Send_COUNTED, ... */
#define MPI_COUNTED(name, params, args) name##_COUNTED,
#define MPI_COUNTED_LAST MPI_COUNTED
enum {
#include "mpi_counter_calls.h"
  COUNTED_FUNCTIONS
};
#undef MPI_COUNTED

static const char *const counted_names[COUNTED_FUNCTIONS] = {
#define MPI_COUNTED(name, params, args) #name,
#include "mpi_counter_calls.h"
#undef MPI_COUNTED
};
#undef MPI_COUNTED_LAST

/* Calls from every thread of the rank (MPI_THREAD_MULTIPLE) are counted. */
static atomic_ullong counter_counts[COUNTED_FUNCTIONS];

/* Named apart from every parameter name of mpi.h, which the wrappers' bodies see. */
static void counter_add(int index) { atomic_fetch_add_explicit(&counter_counts[index], 1, memory_order_relaxed); }

/* $WAFFLE_MPI_COUNTS with every `%r` replaced by `rank` into `out`; false if it does not fit or is
 * not set. */
static int counter_path(char *out, size_t room, int rank) {
  const char *template = getenv("WAFFLE_MPI_COUNTS");
  if (!template || !*template) return 0;
  size_t n = 0;
  for (const char *p = template; *p; p++) {
    int wrote;
    if (p[0] == '%' && p[1] == 'r') {
      wrote = snprintf(out + n, room - n, "%d", rank);
      p++;
    } else {
      wrote = snprintf(out + n, room - n, "%c", *p);
    }
    if (wrote < 0 || (size_t)wrote >= room - n) return 0;
    n += (size_t)wrote;
  }
  return 1;
}

/* Writes this rank's counts; a rank that cannot says so on stderr, and the test finds no file. */
static void counter_write(void) {
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char path[4096];
  if (!counter_path(path, sizeof path, rank)) {
    fprintf(stderr, "mpi_counter: WAFFLE_MPI_COUNTS is not set or too long\n");
    return;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return;
  }
  for (int i = 0; i < COUNTED_FUNCTIONS; i++) {
    unsigned long long n = atomic_load_explicit(&counter_counts[i], memory_order_relaxed);
    if (n) fprintf(f, "%s %llu\n", counted_names[i], n);
  }
  if (fclose(f) != 0) perror(path);
}

#ifdef MPI_COUNTER_NEXT
/* The next definition of `name` after this library's, into `*next` (a function pointer's bytes:
 * ISO C has no cast from dlsym's `void *`); a process without one stops at once. */
static void counter_resolve(const char *name, void *next, size_t size) {
  void *symbol = dlsym(RTLD_NEXT, name);
  if (!symbol || size != sizeof symbol) {
    fprintf(stderr, "mpi_counter: no %s after this library's\n", name);
    abort();
  }
  memcpy(next, &symbol, size);
}

/* `name##_next`, the function a wrapper calls, resolved when the library is loaded. */
#define COUNTER_CALLEE(name, params)                                                             \
  static int(*name##_next) params;                                                               \
  __attribute__((constructor)) static void name##_resolve(void) {                                \
    counter_resolve(#name, &name##_next, sizeof name##_next);                                    \
  }
#define COUNTER_CALL(name) name##_next
#else
#define COUNTER_CALLEE(name, params)
#define COUNTER_CALL(name) P##name
#endif

/* Every function but MPI_Finalize: count, then the real thing. */
#define MPI_COUNTED(name, params, args)                                                          \
  COUNTER_CALLEE(name, params)                                                                   \
  int name params {                                                                              \
    counter_add(name##_COUNTED);                                                                 \
    return COUNTER_CALL(name) args;                                                              \
  }
/* MPI_Finalize: counted, then every count written while MPI still knows the rank. */
#define MPI_COUNTED_LAST(name, params, args)                                                     \
  COUNTER_CALLEE(name, params)                                                                   \
  int name params {                                                                              \
    counter_add(name##_COUNTED);                                                                 \
    counter_write();                                                                             \
    return COUNTER_CALL(name) args;                                                              \
  }
#include "mpi_counter_calls.h"
