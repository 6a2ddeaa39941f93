/*
 * persistent.c: persistent requests (MPI_Send_init ... MPI_Start), MPI_Request_free, MPI_Cancel.
 *
 * An init call records its arguments and enters the request, persistent, with its peer, tag and
 * size. Each MPI_Start gives the request a new number (each activation is one operation, waited
 * for on its own) and, for a send, counts the message and carries its `mpi.message>`. MPI_Startall
 * starts its requests one by one inside its span (MPI lets it start them in any order), so that
 * each has a span of its own for its correlation. The request stays ours until MPI_Request_free.
 */
#include "wmpi.h"

/* Enters a persistent request made by an init call. */
static void wm_persistent(MPI_Request request, const wm_comm_t *c, int kind, int64_t peer, int tag, uint64_t bytes) {
  wm_req_t r = {0, c, kind, WM_PERSISTENT, tag, (int32_t)peer, bytes, WM_THREAD()};
  waffle_mpi_req_put(WM_HANDLE(request), &r);
}

/* A persistent send's init: MPI_Send_init, MPI_Bsend_init, MPI_Ssend_init, MPI_Rsend_init. */
#define WM_SEND_INIT(fn)                                                                            \
  int MPI_##fn(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,      \
               MPI_Request *request) {                                                              \
    const wm_comm_t *c = wm_comm(comm);                                                             \
    int64_t peer = wm_peer(c, dest);                                                                \
    uint64_t bytes = wm_bytes(count, type);                                                         \
    int rc;                                                                                         \
    {                                                                                               \
      WM_SPAN(MPI_##fn, 0, WM_P2P(c, peer, tag, bytes));                                            \
      rc = PMPI_##fn(buf, count, type, dest, tag, comm, request);                                   \
    }                                                                                               \
    if (rc == MPI_SUCCESS) wm_persistent(*request, c, WM_SEND, peer, tag, bytes);                   \
    return rc;                                                                                      \
  }

WM_SEND_INIT(Send_init)
WM_SEND_INIT(Bsend_init)
WM_SEND_INIT(Ssend_init)
WM_SEND_INIT(Rsend_init)

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request *request) {
  const wm_comm_t *c = wm_comm(comm);
  int64_t peer = wm_peer(c, source);
  uint64_t bytes = wm_bytes(count, type);
  int rc;
  {
    WM_SPAN(MPI_Recv_init, 0, WM_P2P(c, peer, tag, bytes));
    rc = PMPI_Recv_init(buf, count, type, source, tag, comm, request);
  }
  if (rc == MPI_SUCCESS) wm_persistent(*request, c, WM_RECV, peer, tag, bytes);
  return rc;
}

/* One MPI_Start, in a span of its own. */
static int wm_start(MPI_Request *request) {
  wm_req_t r;
  bool ours = request && wm_take(WM_HANDLE(*request), &r);
  if (!ours || !(r.flags & WM_PERSISTENT)) {
    if (ours) waffle_mpi_req_put(WM_HANDLE(*request), &r);
    WM_SPAN(MPI_Start_foreign, 0);
    return PMPI_Start(request);
  }
  r.id = waffle_mpi_request_id();
  r.flags |= WM_ACTIVE;
  r.thread = WM_THREAD();
  waffle_mpi_req_put(WM_HANDLE(*request), &r);
  uint64_t msg = r.kind == WM_SEND ? wm_send(r.comm, r.peer, r.tag) : 0;
  WM_SPAN(MPI_Start, msg, WM_P2P(r.comm, r.peer, r.tag, r.bytes), .request = r.id);
  return PMPI_Start(request);
}

int MPI_Start(MPI_Request *request) { return wm_start(request); }

int MPI_Startall(int count, MPI_Request array_of_requests[]) {
  WM_SPAN(MPI_Startall, 0, .count = count);
  if (count < 0 || (count > 0 && !array_of_requests)) return PMPI_Startall(count, array_of_requests);
  for (int i = 0; i < count; i++) {
    int rc = wm_start(&array_of_requests[i]);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int MPI_Request_free(MPI_Request *request) {
  wm_req_t r;
  char ids[21] = "";
  int n = 0;
  if (request && wm_take(WM_HANDLE(*request), &r) && r.id) n = wm_decimal(ids, r.id);
  WM_SPAN(MPI_Request_free, 0, .requests = ids, .requests_len = (uint64_t)n);
  return PMPI_Request_free(request);
}

int MPI_Cancel(MPI_Request *request) {
  wm_req_t r;
  char ids[21] = "";
  int n = 0;
  if (request && waffle_mpi_req_get(WM_HANDLE(*request), false, 0, &r) && r.id) n = wm_decimal(ids, r.id);
  WM_SPAN(MPI_Cancel, 0, .requests = ids, .requests_len = (uint64_t)n);
  return PMPI_Cancel(request);
}
