/* The MPI example of waffle's README, run with `mpirun -np 2`: each rank writes DIR/rankN.bin.
 * Rank 1 creates a NaN on purpose in iteration 1 and records it; its MPI_Allreduce span names
 * that event as its cause. Every rank's allreduce span carries the correlation
 * ("allreduce", iteration), which ties the ranks' halves of one collective together, so
 * `waffle-decode why rank0.bin rank1.bin --event "MPI_Allreduce result is NaN"` walks from
 * rank 0's symptom to rank 1's cause.
 *
 * Rank 0 starts the trace and broadcasts its context, so that every rank records under one
 * trace id whatever launched them (under Open MPI's mpirun, PMIx or srun they would share the
 * launch's id anyway; WAFFLE_TRACE_ID does it for any launcher). The runtime reads the rank
 * label from Open MPI's OMPI_COMM_WORLD_RANK (or PMI_RANK, PMIX_RANK, SLURM_PROCID).
 *
 * usage: mpirun -np 2 allreduce DIR */
#include <math.h>
#include <stdio.h>

#include "mpi.h"
#include "waffle_macros.h"

static void fail(const char *what, waffle_status_t status) {
  fprintf(stderr, "%s: %s\n", what, waffle_status_str(status));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d.bin", argc > 1 ? argv[1] : ".", rank);

  waffle_context_t root = {0, 0, {0}};
  waffle_status_t status = WAFFLE_OK;
  if (rank == 0) {
    status = waffle_start(path);
    root = waffle_context_current();
  }
  MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank != 0) {
    waffle_config_t config = WAFFLE_CONFIG_INIT(path);
    config.trace_id_hi = root.trace_id_hi;
    config.trace_id_lo = root.trace_id_lo;
    status = waffle_start_with(&config);
  }
  if (status != WAFFLE_OK) fail("waffle_start", status);

  for (int iteration = 0; iteration < 3; iteration++) {
    WAFFLE_SPAN("iteration", WAFFLE_KV_I64("iteration", iteration));
    float send_buf[1] = {(float)rank};
    waffle_event_id_t cause_id = {0}; /* a null/empty event id */

    /* 1. The "bad" rank (rank 1) creates a NaN and captures the event id. */
    if (rank == 1 && iteration == 1) {
      send_buf[0] = NAN;
      cause_id = WAFFLE_EVENT("Creating NaN on purpose", WAFFLE_KV_I64("rank", rank));
    }

    /* 2. A span for the MPI operation, linked to the causal event id. */
    WAFFLE_SPAN("MPI_Allreduce_op",
                WAFFLE_KV_CAUSE_EVENT(cause_id), /* explicitly link to the event */
                WAFFLE_KV_CORRELATE("allreduce", iteration),
                WAFFLE_KV_I64("rank", rank));

    float recv_buf[1] = {0.0f};
    MPI_Allreduce(send_buf, recv_buf, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    /* 3. Rank 0 sees the symptom. */
    if (rank == 0 && isnan(recv_buf[0])) {
      (void)WAFFLE_EVENT("MPI_Allreduce result is NaN", WAFFLE_KV_I64("rank", rank));
    }
  }

  status = waffle_stop();
  if (status != WAFFLE_OK) fail("waffle_stop", status);
  MPI_Finalize();
  return 0;
}
