#include <stdio.h>
#include <math.h>
#include "mpi.h"
#include "waffle_macros.h"

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    float send_buf[1] = { (float)rank };
    waffle_event_id_t cause_id = {0}; // A null/empty event ID

    // 1. The "bad" rank (rank 1) creates a NaN and captures the EventId.
    if (rank == 1) {
        send_buf[0] = NAN;
        cause_id = WAFFLE_EVENT("Creating NaN on purpose",
            KV_I64("rank", rank)
        );
    }

    // 2. Create a span for the MPI operation, linking to the causal event ID.
    SPAN("MPI_Allreduce_op",
         KV_CAUSE_EVENT(cause_id), // Explicitly link to the event
         KV_I64("rank", rank));
    
    float recv_buf[1] = { 0.0f };
    MPI_Allreduce(send_buf, recv_buf, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    if (isnan(recv_buf[0])) {
        WAFFLE_EVENT("MPI_Allreduce result is NaN");
    }
    
    MPI_Finalize();
    return 0;
}
