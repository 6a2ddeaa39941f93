/* An MPI program that never starts a session, as the original examples: run under
 * `mpirun -np 2` with WAFFLE_OUTPUT=DIR/rank%r.bin, each rank records into its own file, with
 * its rank in the header, and every rank of the launch under one trace id (tests/mpi.rs).
 *
 * usage: mpirun -np 2 no_start */
#include "mpi.h"
#include "waffle_macros.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    WAFFLE_SPAN("compute", WAFFLE_KV_I64("rank", rank));
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
