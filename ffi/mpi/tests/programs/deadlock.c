/* A classic cycle: every rank first receives from its right neighbour, then sends to its left
 * one, so every rank waits in MPI_Recv for a message nobody sends. Run under a timeout
 * (tests/interpose.rs); with LD_PRELOAD=libwaffle_mpi.so each rank's trace should end inside its
 * open MPI_Recv, which is what the hang analysis reads. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, value = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Recv(&value, 1, MPI_INT, right, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Send(&rank, 1, MPI_INT, left, 5, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
