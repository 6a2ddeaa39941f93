/* A halo exchange, the commonest shape of an MPI code's communication, for the decode benches
 * (benches/real-traces.sh records it with libwaffle_mpi.so preloaded). Ranks on a ring; each
 * step posts a receive from both neighbours (MPI_Irecv), sends its edges to both (MPI_Isend),
 * waits for all four (MPI_Waitall), then does a little work on its cells; every 100 steps the
 * ranks agree on a residual (MPI_Allreduce). At 2 ranks both neighbours are the same rank, so
 * every message goes between one pair. The trace grows with STEPS and nothing else: a run of
 * 8 x the steps has 8 x the messages, between the same ranks, of the same sizes.
 *
 * usage: mpirun -np N halo STEPS [CELLS]     (CELLS per rank, default 256; edges are 1 double) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: halo STEPS [CELLS]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long steps = atol(argv[1]);
  int cells = argc > 2 ? atoi(argv[2]) : 256;
  if (steps < 0 || cells < 2) MPI_Abort(MPI_COMM_WORLD, 2);
  double *u = calloc((size_t)cells + 2, sizeof *u);
  double *next = calloc((size_t)cells + 2, sizeof *next);
  if (!u || !next) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 1; i <= cells; i++) u[i] = (double)(rank * cells + i);
  int left = (rank + size - 1) % size, right = (rank + 1) % size;
  double residual = 0.0;
  for (long step = 0; step < steps; step++) {
    MPI_Request req[4];
    MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(&u[cells + 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(&u[cells], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    double local = 0.0;
    for (int i = 1; i <= cells; i++) {
      next[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
      local += (next[i] - u[i]) * (next[i] - u[i]);
    }
    double *t = u;
    u = next;
    next = t;
    if (step % 100 == 99) MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rank == 0) printf("%ld steps, residual %g\n", steps, residual);
  free(u);
  free(next);
  MPI_Finalize();
  return 0;
}
