/* A run with a rank that is late by design, for `waffle-decode waits` (tests/waits.rs). Run
 * under `mpirun -np 3` with LD_PRELOAD=libwaffle_mpi.so; linked with libwaffle.so for its own
 * spans. `late SCENARIO DELAY_MS [ITERATIONS]`: ITERATIONS (4 unless given) iterations of one
 * pattern, each ending in a barrier; in iteration LATE one rank sleeps DELAY_MS inside a span "injected_delay" (field
 * `iteration`) first, at the point named below. Every other moment is a few microseconds of work.
 *
 *   direct: rank 1 sends to rank 0 (MPI_Send / MPI_Recv); rank 1 is late before its send.
 *   chain:  rank 2 sends to rank 1, which then sends to rank 0; rank 2 is late before its send,
 *           so rank 1 waits for it, and rank 0 for rank 1 (the delay propagates).
 *   bcast:  MPI_Bcast from root 0; the root is late before it.
 *   ssend:  rank 0 MPI_Ssend's to rank 1; rank 1 is late before posting its MPI_Recv.
 *   clean:  the chain with no delay.
 * Prints "ok" on rank 0. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "waffle_macros.h"

#define LATE 2

static void injected_delay(int iteration, long ms) {
  WAFFLE_SPAN("injected_delay", WAFFLE_KV_I64("iteration", iteration));
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3 || size != 3) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np 3 late direct|chain|bcast|ssend|clean DELAY_MS [ITERATIONS]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *scenario = argv[1];
  long delay = atol(argv[2]);
  int iterations = argc > 3 ? atoi(argv[3]) : 4;
  int clean = strcmp(scenario, "clean") == 0;
  for (int it = 0; it < iterations; it++) {
    WAFFLE_SPAN("iteration", WAFFLE_KV_I64("iteration", it));
    int late = it == LATE && !clean;
    double value = rank + it;
    if (strcmp(scenario, "direct") == 0) {
      if (rank == 1) {
        if (late) injected_delay(it, delay);
        MPI_Send(&value, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
      } else if (rank == 0) {
        MPI_Recv(&value, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    } else if (strcmp(scenario, "chain") == 0 || clean) {
      if (rank == 2) {
        if (late) injected_delay(it, delay);
        MPI_Send(&value, 1, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD);
      } else if (rank == 1) {
        MPI_Recv(&value, 1, MPI_DOUBLE, 2, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&value, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
      } else {
        MPI_Recv(&value, 1, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    } else if (strcmp(scenario, "bcast") == 0) {
      if (rank == 0 && late) injected_delay(it, delay);
      MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    } else if (strcmp(scenario, "ssend") == 0) {
      if (rank == 0) {
        MPI_Ssend(&value, 1, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD);
      } else if (rank == 1) {
        if (late) injected_delay(it, delay);
        MPI_Recv(&value, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    } else {
      if (rank == 0) fprintf(stderr, "unknown scenario %s\n", scenario);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  if (rank == 0) printf("ok\n");
  return 0;
}
