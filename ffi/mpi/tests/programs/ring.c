/* A program that knows nothing of waffle: run under `mpirun -np 3` with
 * LD_PRELOAD=libwaffle_mpi.so and WAFFLE_OUTPUT=DIR/rank%r.bin, every MPI call it makes is
 * recorded (tests/interpose.rs checks each one). It also finishes cleanly, as the hang analysis's
 * counterpart to deadlock.c.
 *
 *   1. a token around the ring twice with MPI_Send/MPI_Recv (tag 7): 6 messages;
 *   2. 4 doubles to both neighbours with MPI_Irecv/MPI_Isend/MPI_Waitall (tag 9): 6 messages;
 *   3. MPI_Bcast of 2 doubles from rank 1; MPI_Allreduce of 3 longs with MPI_MAX;
 *   4. ranks 1 and 2 send one int to rank 0 with tag 100 + rank, which receives them with
 *      MPI_ANY_SOURCE and MPI_ANY_TAG: 2 messages. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;

  for (int round = 0; round < 2; round++) {
    int token = rank;
    if (rank == 0) {
      MPI_Send(&token, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&token, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
    }
  }

  double out[4] = {rank, rank, rank, rank}, from_left[4], from_right[4];
  MPI_Request requests[4];
  MPI_Irecv(from_left, 4, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, &requests[0]);
  MPI_Irecv(from_right, 4, MPI_DOUBLE, right, 9, MPI_COMM_WORLD, &requests[1]);
  MPI_Isend(out, 4, MPI_DOUBLE, right, 9, MPI_COMM_WORLD, &requests[2]);
  MPI_Isend(out, 4, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, &requests[3]);
  MPI_Waitall(4, requests, MPI_STATUSES_IGNORE);

  double pair[2] = {rank, rank};
  MPI_Bcast(pair, 2, MPI_DOUBLE, 1, MPI_COMM_WORLD);
  long mine[3] = {rank, -rank, 2 * rank}, max[3];
  MPI_Allreduce(mine, max, 3, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);

  if (rank == 0) {
    for (int i = 1; i < size; i++) {
      int value;
      MPI_Status status;
      MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
      if (status.MPI_TAG != 100 + status.MPI_SOURCE) MPI_Abort(MPI_COMM_WORLD, 2);
    }
  } else {
    MPI_Send(&rank, 1, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
  }

  int ok = from_left[0] == left && from_right[0] == right && pair[0] == 1 && max[0] == size - 1;
  MPI_Finalize();
  if (!ok) return 1;
  if (rank == 0) printf("ok\n");
  return 0;
}
