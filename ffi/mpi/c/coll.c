/*
 * coll.c: collectives, blocking and nonblocking (MPI-3). Each span carries `comm`, what applies
 * of `root` (a world rank), `op` and `bytes`, a nonblocking one its `request`, and the
 * correlation `mpi.collective` (the communicator's key and how many collectives this process
 * called on it before: the same on every member, since members call collectives on a
 * communicator in the same order).
 *
 * `bytes` is this rank's own data: the send buffer's size (count x type size) where each rank
 * contributes a buffer (Bcast, Reduce, Allreduce, Scan, Gather, Allgather), the receive
 * buffer's for Scatter, the whole send side for the all-to-alls, one neighbour's block for the
 * neighbourhood collectives without vectors (none for those with vectors).
 */
#include "wmpi.h"

/* A blocking collective `fn` with its parameter list, its PMPI argument list, and values. */
#define WM_COLLECTIVE(fn, params, args, ...)                                                      \
  int MPI_##fn params {                                                                           \
    if (!waffle_mpi_on()) return PMPI_##fn args;                                                  \
    const wm_comm_t *c = wm_comm(comm);                                                           \
    int rc;                                                                                       \
    WM_COLL(MPI_##fn, c, PMPI_##fn args, __VA_ARGS__);                                            \
    return rc;                                                                                    \
  }

/* A nonblocking collective: the same, with its request numbered and entered. */
#define WM_ICOLLECTIVE(fn, params, args, ...)                                                     \
  int MPI_##fn params {                                                                           \
    if (!waffle_mpi_on()) return PMPI_##fn args;                                                  \
    const wm_comm_t *c = wm_comm(comm);                                                           \
    uint64_t id = waffle_mpi_request_id();                                                        \
    int rc;                                                                                       \
    WM_COLL(MPI_##fn, c, PMPI_##fn args, __VA_ARGS__, .request = id);                             \
    if (rc == MPI_SUCCESS) wm_track(*request, id, c, WM_COLL, 0);                                 \
    return rc;                                                                                    \
  }

/* The data of a rank's send buffer, or its receive buffer's share when it passes MPI_IN_PLACE. */
#define WM_SEND_OR_IN_PLACE(sendbuf, sendcount, sendtype, recvcount, recvtype) \
  ((sendbuf) == MPI_IN_PLACE ? wm_bytes(recvcount, recvtype) : wm_bytes(sendcount, sendtype))

/* The sum of `counts[i]` x the size of `type` over `n` ranks. */
static uint64_t wm_sum(const int counts[], MPI_Datatype type, int n) {
  uint64_t total = 0;
  for (int i = 0; counts && i < n; i++) total += wm_bytes(counts[i], type);
  return total;
}

/* The same with a type per rank. */
static uint64_t wm_sum_w(const int counts[], const MPI_Datatype types[], int n) {
  uint64_t total = 0;
  for (int i = 0; counts && types && i < n; i++) total += wm_bytes(counts[i], types[i]);
  return total;
}

/* The number of ranks a rank exchanges with in an all-to-all on `c`. */
static int wm_peers(const wm_comm_t *c) { return c->remote_size > 0 ? c->remote_size : c->size; }

int MPI_Barrier(MPI_Comm comm) {
  if (!waffle_mpi_on()) return PMPI_Barrier(comm);
  const wm_comm_t *c = wm_comm(comm);
  WM_SPAN(MPI_Barrier, wm_coll(c), .comm = c->key);
  return PMPI_Barrier(comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  if (!waffle_mpi_on()) return PMPI_Ibarrier(comm, request);
  const wm_comm_t *c = wm_comm(comm);
  uint64_t id = waffle_mpi_request_id();
  int rc;
  {
    WM_SPAN(MPI_Ibarrier, wm_coll(c), .comm = c->key, .request = id);
    rc = PMPI_Ibarrier(comm, request);
  }
  if (rc == MPI_SUCCESS) wm_track(*request, id, c, WM_COLL, 0);
  return rc;
}

#define WM_BCAST_VALS .root = (wm_root(c, root)), .bytes = (wm_bytes(count, type))
WM_COLLECTIVE(Bcast, (void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm),
              (buffer, count, type, root, comm), WM_BCAST_VALS)
WM_ICOLLECTIVE(Ibcast, (void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *request),
               (buffer, count, type, root, comm, request), WM_BCAST_VALS)

#define WM_REDUCE_VALS                                                                                            \
  .root = (wm_root(c, root)), .op = (wm_op(op)), .bytes = (wm_bytes(count, type))
WM_COLLECTIVE(Reduce,
              (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm),
              (sendbuf, recvbuf, count, type, op, root, comm), WM_REDUCE_VALS)
WM_ICOLLECTIVE(Ireduce,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *request),
               (sendbuf, recvbuf, count, type, op, root, comm, request), WM_REDUCE_VALS)

/* Allreduce, Scan, Exscan: an op over every rank's `count` elements. */
#define WM_OP_VALS .op = (wm_op(op)), .bytes = (wm_bytes(count, type))
#define WM_OP_COLLECTIVE(fn, ifn)                                                                             \
  WM_COLLECTIVE(fn, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm), \
                (sendbuf, recvbuf, count, type, op, comm), WM_OP_VALS)                                         \
  WM_ICOLLECTIVE(ifn,                                                                                         \
                 (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,  \
                  MPI_Request *request),                                                                      \
                 (sendbuf, recvbuf, count, type, op, comm, request), WM_OP_VALS)
WM_OP_COLLECTIVE(Allreduce, Iallreduce)
WM_OP_COLLECTIVE(Scan, Iscan)
WM_OP_COLLECTIVE(Exscan, Iexscan)

#define WM_RS_VALS .op = (wm_op(op)), .bytes = (wm_sum(recvcounts, type, wm_peers(c)))
WM_COLLECTIVE(Reduce_scatter,
              (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm),
              (sendbuf, recvbuf, recvcounts, type, op, comm), WM_RS_VALS)
WM_ICOLLECTIVE(Ireduce_scatter,
               (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, MPI_Request *request),
               (sendbuf, recvbuf, recvcounts, type, op, comm, request), WM_RS_VALS)
#define WM_RSB_VALS \
  .op = (wm_op(op)), .bytes = (wm_bytes(recvcount, type) * (uint64_t)wm_peers(c))
WM_COLLECTIVE(Reduce_scatter_block,
              (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm),
              (sendbuf, recvbuf, recvcount, type, op, comm), WM_RSB_VALS)
WM_ICOLLECTIVE(Ireduce_scatter_block,
               (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request *request),
               (sendbuf, recvbuf, recvcount, type, op, comm, request), WM_RSB_VALS)

/* Gather and Allgather: each rank's send buffer. */
#define WM_GATHER_VALS \
  .root = (wm_root(c, root)), \
      .bytes = (WM_SEND_OR_IN_PLACE(sendbuf, sendcount, sendtype, recvcount, recvtype))
WM_COLLECTIVE(Gather,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), WM_GATHER_VALS)
WM_ICOLLECTIVE(Igather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request), WM_GATHER_VALS)
#define WM_GATHERV_VALS .root = (wm_root(c, root)), .bytes = (wm_bytes(sendcount, sendtype))
WM_COLLECTIVE(Gatherv,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
               const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm), WM_GATHERV_VALS)
WM_ICOLLECTIVE(Igatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request),
               WM_GATHERV_VALS)

/* Scatter: each rank's receive buffer. */
#define WM_SCATTER_VALS .root = (wm_root(c, root)), .bytes = (wm_bytes(recvcount, recvtype))
WM_COLLECTIVE(Scatter,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm), WM_SCATTER_VALS)
WM_ICOLLECTIVE(Iscatter,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request), WM_SCATTER_VALS)
WM_COLLECTIVE(Scatterv,
              (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm),
              (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm), WM_SCATTER_VALS)
WM_ICOLLECTIVE(Iscatterv,
               (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request),
               WM_SCATTER_VALS)

#define WM_ALLGATHER_VALS \
  .bytes = (WM_SEND_OR_IN_PLACE(sendbuf, sendcount, sendtype, recvcount, recvtype))
WM_COLLECTIVE(Allgather,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), WM_ALLGATHER_VALS)
WM_ICOLLECTIVE(Iallgather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request), WM_ALLGATHER_VALS)
#define WM_ALLGATHERV_VALS .bytes = (wm_bytes(sendcount, sendtype))
WM_COLLECTIVE(Allgatherv,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
               const int displs[], MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm), WM_ALLGATHERV_VALS)
WM_ICOLLECTIVE(Iallgatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request),
               WM_ALLGATHERV_VALS)

/* All-to-all: the whole send side. */
#define WM_ALLTOALL_VALS \
  .bytes = (WM_SEND_OR_IN_PLACE(sendbuf, sendcount, sendtype, recvcount, recvtype) * (uint64_t)wm_peers(c))
WM_COLLECTIVE(Alltoall,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), WM_ALLTOALL_VALS)
WM_ICOLLECTIVE(Ialltoall,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request), WM_ALLTOALL_VALS)
#define WM_ALLTOALLV_VALS                                                                                 \
  .bytes = (sendbuf == MPI_IN_PLACE ? wm_sum(recvcounts, recvtype, wm_peers(c)) \
                                                 : wm_sum(sendcounts, sendtype, wm_peers(c)))
WM_COLLECTIVE(Alltoallv,
              (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
               void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm),
              WM_ALLTOALLV_VALS)
WM_ICOLLECTIVE(Ialltoallv,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                MPI_Request *request),
               (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request),
               WM_ALLTOALLV_VALS)
#define WM_ALLTOALLW_VALS                                                                                   \
  .bytes = (sendbuf == MPI_IN_PLACE ? wm_sum_w(recvcounts, recvtypes, wm_peers(c)) \
                                                 : wm_sum_w(sendcounts, sendtypes, wm_peers(c)))
WM_COLLECTIVE(Alltoallw,
              (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
               void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
               MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm),
              WM_ALLTOALLW_VALS)
WM_ICOLLECTIVE(Ialltoallw,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request),
               WM_ALLTOALLW_VALS)

/* Neighbourhood collectives: one neighbour's block (none with vectors: the degrees would cost a
 * topology query per call). */
#define WM_NEIGHBOR_VALS .bytes = (wm_bytes(sendcount, sendtype))
WM_COLLECTIVE(Neighbor_allgather,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), WM_NEIGHBOR_VALS)
WM_ICOLLECTIVE(Ineighbor_allgather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request), WM_NEIGHBOR_VALS)
WM_COLLECTIVE(Neighbor_allgatherv,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
               const int displs[], MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm), WM_NEIGHBOR_VALS)
WM_ICOLLECTIVE(Ineighbor_allgatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request),
               WM_NEIGHBOR_VALS)
WM_COLLECTIVE(Neighbor_alltoall,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), WM_NEIGHBOR_VALS)
WM_ICOLLECTIVE(Ineighbor_alltoall,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request), WM_NEIGHBOR_VALS)

/* With vectors: no `bytes`; the size stands in. */
#define WM_NEIGHBOR_V_VALS .size = (c->size)
WM_COLLECTIVE(Neighbor_alltoallv,
              (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
               void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm),
              WM_NEIGHBOR_V_VALS)
WM_ICOLLECTIVE(Ineighbor_alltoallv,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                MPI_Request *request),
               (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request),
               WM_NEIGHBOR_V_VALS)
WM_COLLECTIVE(Neighbor_alltoallw,
              (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
               void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
               MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm),
              WM_NEIGHBOR_V_VALS)
WM_ICOLLECTIVE(Ineighbor_alltoallw,
               (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                MPI_Comm comm, MPI_Request *request),
               (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request),
               WM_NEIGHBOR_V_VALS)
