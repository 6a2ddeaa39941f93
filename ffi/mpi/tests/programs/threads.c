/* MPI_THREAD_MULTIPLE: on every rank, 4 threads exchange messages with both neighbours at once,
 * each on its own tag (so MPI orders each thread's messages and the pairing is exact), through
 * MPI_Isend/MPI_Irecv/MPI_Waitall and MPI_Sendrecv, while the wrappers' tables are shared by the
 * threads (tests/threads.rs). 3 ranks x 4 threads x ROUNDS x 3 messages. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define THREADS 4
#define ROUNDS 100

static int rank, size, failures;

static void *exchange(void *arg) {
  int tag = 100 + (int)(long)arg;
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int round = 0; round < ROUNDS; round++) {
    int out = rank * 1000 + round, from_left = -1, from_right = -1, swapped = -1;
    MPI_Request requests[4];
    MPI_Irecv(&from_left, 1, MPI_INT, left, tag, MPI_COMM_WORLD, &requests[0]);
    MPI_Irecv(&from_right, 1, MPI_INT, right, tag, MPI_COMM_WORLD, &requests[1]);
    MPI_Isend(&out, 1, MPI_INT, right, tag, MPI_COMM_WORLD, &requests[2]);
    MPI_Isend(&out, 1, MPI_INT, left, tag, MPI_COMM_WORLD, &requests[3]);
    MPI_Waitall(4, requests, MPI_STATUSES_IGNORE);
    MPI_Sendrecv(&out, 1, MPI_INT, right, tag, &swapped, 1, MPI_INT, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (from_left != left * 1000 + round || from_right != right * 1000 + round || swapped != from_left)
      __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) printf("no MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 0;
  }
  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, exchange, (void *)t);
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
  MPI_Finalize();
  if (failures) return 1;
  if (rank == 0) printf("ok\n");
  return 0;
}
