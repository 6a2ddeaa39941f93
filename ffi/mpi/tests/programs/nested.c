/* A program with spans of its own (waffle's C macros, linked with libwaffle.so) run with
 * LD_PRELOAD=libwaffle_mpi.so: its waffle_* calls bind to the preloaded library, so its MPI
 * calls' spans are children of its own spans, in one file per rank (tests/interpose.rs). */
#include <mpi.h>
#include <stdio.h>

#include "waffle_macros.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double sum = 0;
  for (int step = 0; step < 2; step++) {
    WAFFLE_SPAN("step", WAFFLE_KV_I64("step", step));
    double mine = rank + step, total = 0;
    {
      WAFFLE_SPAN("exchange");
      int token = rank, right = (rank + 1) % size, left = (rank + size - 1) % size;
      MPI_Sendrecv_replace(&token, 1, MPI_INT, right, 3, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    sum += total;
  }
  MPI_Finalize();
  if (rank == 0) printf("ok\n");
  return sum > 0 ? 0 : 1;
}
