/*
 * p2p.c: point-to-point messages, blocking and nonblocking, probes and matched probes.
 *
 * A send's span carries the message's correlation `mpi.message>` (its value from the counter of
 * this process's sends on the communicator, destination and tag). A receive is counted when it
 * completes, from its status (the actual source and tag, so wildcards resolve), and recorded as
 * the event "MPI message received" with `mpi.message<` inside the span in which it completed:
 * MPI_Recv, MPI_Sendrecv(_replace) and MPI_Mrecv here, the Wait and Test families in wait.c.
 * A caller's MPI_STATUS_IGNORE is replaced by a status of our own, so the event still knows.
 */
#include "wmpi.h"

bool wm_received(const wm_comm_t *c, const MPI_Status *status, uint64_t request) {
  /* A receive from MPI_PROC_NULL completes with that source and carries no message. */
  if (status->MPI_SOURCE == MPI_PROC_NULL || status->MPI_SOURCE < 0) return false;
  int count = 0;
  if (PMPI_Get_count(status, MPI_BYTE, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) count = 0;
  return waffle_mpi_received(&wm_thread, c->key, wm_peer(c, status->MPI_SOURCE), status->MPI_TAG, (uint64_t)count,
                             request);
}

/* A blocking send: MPI_Send, MPI_Bsend, MPI_Ssend, MPI_Rsend. */
#define WM_BLOCKING_SEND(fn)                                                                       \
  int MPI_##fn(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {  \
    if (!waffle_mpi_on()) return PMPI_##fn(buf, count, type, dest, tag, comm);                     \
    const wm_comm_t *c = wm_comm(comm);                                                            \
    int64_t peer = wm_peer(c, dest);                                                               \
    WM_SPAN(MPI_##fn, wm_send(c, peer, tag), WM_P2P(c, peer, tag, wm_bytes(count, type)));         \
    return PMPI_##fn(buf, count, type, dest, tag, comm);                                           \
  }

WM_BLOCKING_SEND(Send)
WM_BLOCKING_SEND(Bsend)
WM_BLOCKING_SEND(Ssend)
WM_BLOCKING_SEND(Rsend)

/* A nonblocking send: MPI_Isend, MPI_Ibsend, MPI_Issend, MPI_Irsend. */
#define WM_NONBLOCKING_SEND(fn)                                                                    \
  int MPI_##fn(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,    \
               MPI_Request *request) {                                                             \
    if (!waffle_mpi_on()) return PMPI_##fn(buf, count, type, dest, tag, comm, request);            \
    const wm_comm_t *c = wm_comm(comm);                                                            \
    int64_t peer = wm_peer(c, dest);                                                               \
    uint64_t id = waffle_mpi_request_id();                                                         \
    WM_SPAN(MPI_##fn, wm_send(c, peer, tag), WM_P2P(c, peer, tag, wm_bytes(count, type)), .request = id); \
    int rc = PMPI_##fn(buf, count, type, dest, tag, comm, request);                                \
    if (rc == MPI_SUCCESS) wm_track(*request, id, c, WM_SEND, 0);                                  \
    return rc;                                                                                     \
  }

WM_NONBLOCKING_SEND(Isend)
WM_NONBLOCKING_SEND(Ibsend)
WM_NONBLOCKING_SEND(Issend)
WM_NONBLOCKING_SEND(Irsend)

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  if (!waffle_mpi_on()) return PMPI_Recv(buf, count, type, source, tag, comm, status);
  const wm_comm_t *c = wm_comm(comm);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  WM_SPAN(MPI_Recv, 0, WM_P2P(c, wm_peer(c, source), tag, wm_bytes(count, type)));
  int rc = PMPI_Recv(buf, count, type, source, tag, comm, status);
  if (rc == MPI_SUCCESS) wm_span.at_last = wm_received(c, status, 0);
  return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *request) {
  if (!waffle_mpi_on()) return PMPI_Irecv(buf, count, type, source, tag, comm, request);
  const wm_comm_t *c = wm_comm(comm);
  uint64_t id = waffle_mpi_request_id();
  WM_SPAN(MPI_Irecv, 0, WM_P2P(c, wm_peer(c, source), tag, wm_bytes(count, type)), .request = id);
  int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
  if (rc == MPI_SUCCESS) wm_track(*request, id, c, WM_RECV, 0);
  return rc;
}

/* MPI_Sendrecv and MPI_Sendrecv_replace wait for their receive half, which `peer`, `tag` and
 * `bytes` describe (as for MPI_Recv; the event records it when it completes); the send half is
 * `dest`, `send_tag` and `send_bytes`, and its message is the span's `mpi.message>`. */
#define WM_SENDRECV_VALS(c, source, recvtag, recvbytes, peer, sendtag, bytes)                     \
  WM_P2P(c, wm_peer(c, source), recvtag, recvbytes), .dest = (peer), .send_tag = (sendtag), .send_bytes = (bytes)

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  if (!waffle_mpi_on())
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                         comm, status);
  const wm_comm_t *c = wm_comm(comm);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int64_t peer = wm_peer(c, dest);
  uint64_t bytes = wm_bytes(sendcount, sendtype);
  WM_SPAN(MPI_Sendrecv, wm_send(c, peer, sendtag),
          WM_SENDRECV_VALS(c, source, recvtag, wm_bytes(recvcount, recvtype), peer, sendtag, bytes));
  int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                         comm, status);
  if (rc == MPI_SUCCESS) wm_span.at_last = wm_received(c, status, 0);
  return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status *status) {
  if (!waffle_mpi_on()) return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  const wm_comm_t *c = wm_comm(comm);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int64_t peer = wm_peer(c, dest);
  uint64_t bytes = wm_bytes(count, type);
  WM_SPAN(MPI_Sendrecv_replace, wm_send(c, peer, sendtag),
          WM_SENDRECV_VALS(c, source, recvtag, bytes, peer, sendtag, bytes));
  int rc = PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  if (rc == MPI_SUCCESS) wm_span.at_last = wm_received(c, status, 0);
  return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  if (!waffle_mpi_on()) return PMPI_Probe(source, tag, comm, status);
  const wm_comm_t *c = wm_comm(comm);
  WM_SPAN(MPI_Probe, 0, .comm = c->key, .peer = wm_peer(c, source), .tag = wm_tag(tag));
  return PMPI_Probe(source, tag, comm, status);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  if (!waffle_mpi_on()) return PMPI_Iprobe(source, tag, comm, flag, status);
  const wm_comm_t *c = wm_comm(comm);
  WM_SPAN(MPI_Iprobe, 0, .comm = c->key, .peer = wm_peer(c, source), .tag = wm_tag(tag));
  return PMPI_Iprobe(source, tag, comm, flag, status);
}

/* A matched message remembers its communicator, source and tag until MPI_Mrecv or MPI_Imrecv
 * receives it. */
static void wm_matched(MPI_Message message, const wm_comm_t *c, const MPI_Status *status) {
  if (message != MPI_MESSAGE_NULL && message != MPI_MESSAGE_NO_PROC) {
    wm_req_t r = {0, c, WM_MESSAGE, 0, status->MPI_TAG, (int32_t)wm_peer(c, status->MPI_SOURCE), 0, WM_THREAD()};
    waffle_mpi_req_put(WM_HANDLE(message), &r);
  }
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
  if (!waffle_mpi_on()) return PMPI_Mprobe(source, tag, comm, message, status);
  const wm_comm_t *c = wm_comm(comm);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int rc;
  {
    WM_SPAN(MPI_Mprobe, 0, .comm = c->key, .peer = wm_peer(c, source), .tag = wm_tag(tag));
    rc = PMPI_Mprobe(source, tag, comm, message, status);
  }
  if (rc == MPI_SUCCESS) wm_matched(*message, c, status);
  return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status) {
  if (!waffle_mpi_on()) return PMPI_Improbe(source, tag, comm, flag, message, status);
  const wm_comm_t *c = wm_comm(comm);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int rc;
  {
    WM_SPAN(MPI_Improbe, 0, .comm = c->key, .peer = wm_peer(c, source), .tag = wm_tag(tag));
    rc = PMPI_Improbe(source, tag, comm, flag, message, status);
  }
  if (rc == MPI_SUCCESS && *flag) wm_matched(*message, c, status);
  return rc;
}

/* What MPI_Mprobe or MPI_Improbe learnt of a matched message (taken: it is received once, so
 * these take it whether or not a session exists, and leave no entry behind). */
static wm_req_t wm_message(const MPI_Message *message) {
  wm_req_t r = {0, &wm_unknown, WM_MESSAGE, 0, 0, -3, 0, 0};
  if (message && *message == MPI_MESSAGE_NO_PROC) {
    r.peer = -2; /* matched from MPI_PROC_NULL: no message */
  } else if (!message || *message == MPI_MESSAGE_NULL || !wm_take(WM_HANDLE(*message), &r) || !r.comm) {
    r.comm = &wm_unknown;
  }
  return r;
}

/* A matched receive waits for nothing: its `peer` and `tag` are the matched message's. */
int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status) {
  wm_req_t m = wm_message(message);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  WM_SPAN(MPI_Mrecv, 0, WM_P2P(m.comm, m.peer, m.tag, wm_bytes(count, type)));
  int rc = PMPI_Mrecv(buf, count, type, message, status);
  if (rc == MPI_SUCCESS) wm_span.at_last = wm_received(m.comm, status, 0);
  return rc;
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *request) {
  wm_req_t m = wm_message(message);
  uint64_t id = waffle_mpi_request_id();
  WM_SPAN(MPI_Imrecv, 0, WM_P2P(m.comm, m.peer, m.tag, wm_bytes(count, type)), .request = id);
  int rc = PMPI_Imrecv(buf, count, type, message, request);
  if (rc == MPI_SUCCESS) wm_track(*request, id, m.comm, WM_RECV, 0);
  return rc;
}
