/* What libwaffle_mpi.so adds to small MPI operations (benches/mpi.sh runs it with and without
 * the library preloaded). Two ranks; after WARMUP iterations, rank 0 times ITERATIONS of:
 *
 *   pingpong   rank 0 sends 8 bytes to rank 1 and receives them back (MPI_Send/MPI_Recv):
 *              prints the round trip in ns;
 *   allreduce  an 8-byte MPI_Allreduce (one double, MPI_SUM) on MPI_COMM_WORLD: prints the
 *              time of one call in ns;
 *   self       (one rank) MPI_Send of 8 bytes to itself, then the MPI_Recv of it: the wrappers'
 *              own cost for a send and a receive, with no other process to wait for;
 *   nonblocking (one rank) MPI_Irecv and MPI_Isend of 8 bytes to itself, then MPI_Waitall of
 *              the two: the same with the request table on the path (two entries, two takes).
 *
 * usage: mpirun -np 2 mpi_bench pingpong|allreduce ITERATIONS;
 *        mpirun -np 1 mpi_bench self|nonblocking ITERATIONS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 10000

static void pingpong(int rank, long n) {
  double value = 1.0;
  for (long i = 0; i < n; i++) {
    if (rank == 0) {
      MPI_Send(&value, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(&value, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&value, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&value, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    }
  }
}

static void self_pair(int rank, long n) {
  (void)rank;
  double value = 1.0;
  for (long i = 0; i < n; i++) {
    MPI_Send(&value, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    MPI_Recv(&value, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

static void nonblocking(int rank, long n) {
  (void)rank;
  double out = 1.0, in = 0.0;
  MPI_Request requests[2];
  for (long i = 0; i < n; i++) {
    MPI_Irecv(&in, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, &requests[0]);
    MPI_Isend(&out, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, &requests[1]);
    MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  }
}

static void allreduce_n(int rank, long n) {
  (void)rank;
  double in = 1.0, out = 0.0;
  for (long i = 0; i < n; i++) MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: mpi_bench pingpong|allreduce|self|nonblocking ITERATIONS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long n = atol(argv[2]);
  void (*bench)(int, long) = strcmp(argv[1], "pingpong") == 0 ? pingpong
                             : strcmp(argv[1], "self") == 0        ? self_pair
                             : strcmp(argv[1], "nonblocking") == 0 ? nonblocking
                                                                   : allreduce_n;
  bench(rank, WARMUP);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  bench(rank, n);
  double elapsed = MPI_Wtime() - start;
  if (rank == 0) printf("%.1f\n", elapsed / (double)n * 1e9);
  MPI_Finalize();
  return 0;
}
