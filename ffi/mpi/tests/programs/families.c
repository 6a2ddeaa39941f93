/* The other families of calls, under `mpirun -np 3` with libwaffle_mpi.so preloaded
 * (tests/families.rs): communicators made by duplication and split, persistent requests started
 * together, MPI_Waitany and MPI_Waitsome with ignored statuses, a matched probe, nonblocking
 * collectives completed by MPI_Wait and MPI_Test, MPI_Sendrecv, and a window with a put between
 * fences. Messages: 6 persistent, 6 nonblocking, 3 matched, 3 Sendrecv. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;

  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Barrier(dup);
  MPI_Barrier(half);

  /* Persistent: a ring on `dup`, twice. */
  int out = rank, in = -1;
  MPI_Request persistent[2];
  MPI_Recv_init(&in, 1, MPI_INT, left, 4, dup, &persistent[0]);
  MPI_Send_init(&out, 1, MPI_INT, right, 4, dup, &persistent[1]);
  for (int round = 0; round < 2; round++) {
    MPI_Startall(2, persistent);
    MPI_Waitall(2, persistent, MPI_STATUSES_IGNORE);
  }
  MPI_Request_free(&persistent[0]);
  MPI_Request_free(&persistent[1]);

  /* Waitany over the receives, Waitsome over the sends. */
  int from[2], to[2] = {rank, rank};
  MPI_Request recvs[2], sends[2];
  MPI_Irecv(&from[0], 1, MPI_INT, left, 5, MPI_COMM_WORLD, &recvs[0]);
  MPI_Irecv(&from[1], 1, MPI_INT, right, 5, MPI_COMM_WORLD, &recvs[1]);
  MPI_Isend(&to[0], 1, MPI_INT, right, 5, MPI_COMM_WORLD, &sends[0]);
  MPI_Isend(&to[1], 1, MPI_INT, left, 5, MPI_COMM_WORLD, &sends[1]);
  for (int i = 0; i < 2; i++) {
    int index;
    MPI_Waitany(2, recvs, &index, MPI_STATUS_IGNORE);
  }
  int done = 0;
  while (done < 2) {
    int count, indices[2];
    MPI_Waitsome(2, sends, &count, indices, MPI_STATUSES_IGNORE);
    if (count == MPI_UNDEFINED) break;
    done += count;
  }

  /* A matched probe and its receive. */
  int token = rank, got = -1;
  MPI_Request token_send;
  MPI_Isend(&token, 1, MPI_INT, right, 6, MPI_COMM_WORLD, &token_send);
  MPI_Message message;
  MPI_Mprobe(left, 6, MPI_COMM_WORLD, &message, MPI_STATUS_IGNORE);
  MPI_Mrecv(&got, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
  MPI_Wait(&token_send, MPI_STATUS_IGNORE);

  /* Nonblocking collectives. */
  double mine = rank, sum = 0, root_value = rank;
  MPI_Request collective;
  MPI_Iallreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &collective);
  MPI_Wait(&collective, MPI_STATUS_IGNORE);
  MPI_Ibcast(&root_value, 1, MPI_DOUBLE, 2, dup, &collective);
  for (int flag = 0; !flag;) MPI_Test(&collective, &flag, MPI_STATUS_IGNORE);

  int swapped = -1;
  MPI_Sendrecv(&rank, 1, MPI_INT, right, 8, &swapped, 1, MPI_INT, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

  /* One-sided: each rank puts its rank into its right neighbour's window. */
  int *cell, seen;
  MPI_Win win;
  MPI_Win_allocate(sizeof *cell, sizeof *cell, MPI_INFO_NULL, MPI_COMM_WORLD, &cell, &win);
  *cell = -1;
  MPI_Win_fence(0, win);
  MPI_Put(&rank, 1, MPI_INT, right, 0, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  seen = *cell;
  MPI_Win_free(&win);

  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  int ok = in == left && from[0] == left && from[1] == right && got == left && sum == 3 && root_value == 2 &&
           swapped == left && seen == left;
  MPI_Finalize();
  if (!ok) return 1;
  if (rank == 0) printf("ok\n");
  return 0;
}
