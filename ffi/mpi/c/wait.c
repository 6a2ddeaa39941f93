/*
 * wait.c: the Wait and Test families, where nonblocking operations complete.
 *
 * Each call's span lists the numbers of our requests it waits on or tests (`requests`, comma
 * separated). The requests are taken out of the table before MPI is called (a completed
 * request's handle may be reused by another thread at once, src/requests.rs) and the ones
 * that did not complete are put back after; a persistent request always goes back, inactive.
 * Every completed receive records its event inside the span, with its status: the caller's,
 * or our own when the caller passed MPI_STATUS(ES)_IGNORE. Up to WM_STACK requests are handled
 * on the stack; a longer array costs an allocation. A span in which a receive completed ends at
 * the time of its last receive event (read after MPI returned), saving a clock read.
 */
#include <stdlib.h>
#include <string.h>

#include "wmpi.h"

#define WM_STACK 16

/* A span's `requests`: the numbers a batch listed. */
#define WM_REQUESTS(b) .requests = (b)->ids, .requests_len = (b)->ids_len

/* One request of a call, as it was before the call. */
typedef struct wm_entry {
  MPI_Request handle;
  wm_req_t req;
  bool pending; /* ours, and neither finished nor put back yet */
} wm_entry;

/* A call's requests. */
typedef struct wm_batch {
  int count;
  wm_entry *entries;
  bool receives; /* some request is a receive of ours: statuses are needed */
  char *ids;
  size_t ids_len;
  MPI_Status *own; /* statuses of our own, when the caller ignores them */
  wm_entry local[WM_STACK];
  char local_ids[WM_STACK * 21 + 1];
  MPI_Status local_status[WM_STACK];
} wm_batch;

/* Takes `count` requests out of the table; lists their numbers. */
static void wm_begin(wm_batch *b, int count, const MPI_Request *requests) {
  b->count = count > 0 && requests ? count : 0;
  b->entries = b->count <= WM_STACK ? b->local : malloc(sizeof(wm_entry) * (size_t)b->count);
  b->ids = b->count <= WM_STACK ? b->local_ids : malloc((size_t)b->count * 21 + 1);
  b->own = NULL;
  b->receives = false;
  if (!b->entries || !b->ids) {
    if (b->entries != b->local) free(b->entries);
    if (b->ids != b->local_ids) free(b->ids);
    b->entries = b->local;
    b->ids = b->local_ids;
    b->count = 0; /* out of memory: record the call without its requests */
  }
  size_t at = 0;
  b->ids[0] = 0;
  for (int i = 0; i < b->count; i++) {
    wm_entry *e = &b->entries[i];
    e->handle = requests[i];
    e->pending = e->handle != MPI_REQUEST_NULL && wm_take(WM_HANDLE(e->handle), &e->req);
    if (!e->pending) continue;
    b->receives |= e->req.kind == WM_RECV;
    if (e->req.id) {
      if (at) b->ids[at++] = ',';
      at += (size_t)wm_decimal(b->ids + at, e->req.id);
    }
  }
  b->ids_len = at;
}

/* The statuses to pass: the caller's, or our own when ignored and receives need them. */
static MPI_Status *wm_statuses(wm_batch *b, MPI_Status *statuses) {
  if (statuses != MPI_STATUSES_IGNORE || !b->receives) return statuses;
  b->own = b->count <= WM_STACK ? b->local_status : malloc(sizeof(MPI_Status) * (size_t)b->count);
  return b->own ? b->own : MPI_STATUSES_IGNORE;
}

/* Entry `i` completed with `status` (NULL: unknown): its event, and back if persistent.
 * Whether an event was recorded. */
static bool wm_completed(wm_batch *b, int i, const MPI_Status *status) {
  bool recorded = false;
  if (i < 0 || i >= b->count || !b->entries[i].pending) return false;
  wm_entry *e = &b->entries[i];
  e->pending = false;
  bool active = !(e->req.flags & WM_PERSISTENT) || (e->req.flags & WM_ACTIVE);
  if (e->req.kind == WM_RECV && active && status && status != MPI_STATUS_IGNORE) {
    int cancelled = 0;
    PMPI_Test_cancelled(status, &cancelled);
    if (!cancelled) recorded = wm_received(e->req.comm ? e->req.comm : &wm_unknown, status, e->req.id);
  }
  if (e->req.flags & WM_PERSISTENT) {
    e->req.flags &= ~WM_ACTIVE;
    waffle_mpi_req_put(WM_HANDLE(e->handle), &e->req);
  }
  return recorded;
}

/* Puts back what did not complete; frees what was allocated. */
static void wm_end(wm_batch *b) {
  for (int i = 0; i < b->count; i++)
    if (b->entries[i].pending) waffle_mpi_req_put(WM_HANDLE(b->entries[i].handle), &b->entries[i].req);
  if (b->entries != b->local) free(b->entries);
  if (b->ids != b->local_ids) free(b->ids);
  if (b->own && b->own != b->local_status) free(b->own);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  wm_batch b;
  wm_begin(&b, request ? 1 : 0, request);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int rc;
  {
    WM_SPAN(MPI_Wait, 0, WM_REQUESTS(&b));
    rc = PMPI_Wait(request, status);
    if (rc == MPI_SUCCESS) wm_span.at_last = wm_completed(&b, 0, status);
  }
  wm_end(&b);
  return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  wm_batch b;
  wm_begin(&b, request ? 1 : 0, request);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int rc;
  {
    WM_SPAN(MPI_Test, 0, WM_REQUESTS(&b));
    rc = PMPI_Test(request, flag, status);
    if (rc == MPI_SUCCESS && *flag) wm_span.at_last = wm_completed(&b, 0, status);
  }
  wm_end(&b);
  return rc;
}

/* Whether entry `i` of a call that returned `rc` with `statuses` completed. */
static bool wm_all_done(int rc, const MPI_Status *statuses, int i) {
  if (rc == MPI_SUCCESS) return true;
  return rc == MPI_ERR_IN_STATUS && statuses != MPI_STATUSES_IGNORE && statuses[i].MPI_ERROR == MPI_SUCCESS;
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]) {
  wm_batch b;
  wm_begin(&b, count, array_of_requests);
  MPI_Status *statuses = wm_statuses(&b, array_of_statuses);
  int rc;
  {
    WM_SPAN(MPI_Waitall, 0, WM_REQUESTS(&b), .count = count);
    rc = PMPI_Waitall(count, array_of_requests, statuses);
    for (int i = 0; i < b.count; i++)
      if (wm_all_done(rc, statuses, i))
        wm_span.at_last |= wm_completed(&b, i, statuses != MPI_STATUSES_IGNORE ? &statuses[i] : NULL);
  }
  wm_end(&b);
  return rc;
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]) {
  wm_batch b;
  wm_begin(&b, count, array_of_requests);
  MPI_Status *statuses = wm_statuses(&b, array_of_statuses);
  int rc;
  {
    WM_SPAN(MPI_Testall, 0, WM_REQUESTS(&b), .count = count);
    rc = PMPI_Testall(count, array_of_requests, flag, statuses);
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *flag)
      for (int i = 0; i < b.count; i++)
        if (wm_all_done(rc, statuses, i))
          wm_span.at_last |= wm_completed(&b, i, statuses != MPI_STATUSES_IGNORE ? &statuses[i] : NULL);
  }
  wm_end(&b);
  return rc;
}

int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status) {
  wm_batch b;
  wm_begin(&b, count, array_of_requests);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int rc;
  {
    WM_SPAN(MPI_Waitany, 0, WM_REQUESTS(&b), .count = count);
    rc = PMPI_Waitany(count, array_of_requests, index, status);
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) wm_span.at_last = wm_completed(&b, *index, status);
  }
  wm_end(&b);
  return rc;
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status) {
  wm_batch b;
  wm_begin(&b, count, array_of_requests);
  MPI_Status own;
  if (status == MPI_STATUS_IGNORE) status = &own;
  int rc;
  {
    WM_SPAN(MPI_Testany, 0, WM_REQUESTS(&b), .count = count);
    rc = PMPI_Testany(count, array_of_requests, index, flag, status);
    if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) wm_span.at_last = wm_completed(&b, *index, status);
  }
  wm_end(&b);
  return rc;
}

/* Waitsome and Testsome: the completed entries are `indices[..outcount]`, their statuses in
 * the same order. */
static bool wm_some(wm_batch *b, int rc, const int *outcount, const int *indices, const MPI_Status *statuses) {
  bool recorded = false;
  if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *outcount == MPI_UNDEFINED) return false;
  for (int j = 0; j < *outcount; j++)
    if (wm_all_done(rc, statuses, j))
      recorded |= wm_completed(b, indices[j], statuses != MPI_STATUSES_IGNORE ? &statuses[j] : NULL);
  return recorded;
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                 MPI_Status array_of_statuses[]) {
  wm_batch b;
  wm_begin(&b, incount, array_of_requests);
  MPI_Status *statuses = wm_statuses(&b, array_of_statuses);
  int rc;
  {
    WM_SPAN(MPI_Waitsome, 0, WM_REQUESTS(&b), .count = incount);
    rc = PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, statuses);
    wm_span.at_last = wm_some(&b, rc, outcount, array_of_indices, statuses);
  }
  wm_end(&b);
  return rc;
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                 MPI_Status array_of_statuses[]) {
  wm_batch b;
  wm_begin(&b, incount, array_of_requests);
  MPI_Status *statuses = wm_statuses(&b, array_of_statuses);
  int rc;
  {
    WM_SPAN(MPI_Testsome, 0, WM_REQUESTS(&b), .count = incount);
    rc = PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, statuses);
    wm_span.at_last = wm_some(&b, rc, outcount, array_of_indices, statuses);
  }
  wm_end(&b);
  return rc;
}
