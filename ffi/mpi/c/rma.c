/*
 * rma.c: one-sided communication. A window is keyed like a communicator (the world ranks of its
 * group and how many windows of that group this process made before), when the wrapper that
 * makes it returns; its calls carry `window`, the target's world rank `target`, `bytes` (the
 * origin buffer) and `op` where they apply. Making and freeing a window and MPI_Win_fence are
 * collective over the window's group and carry `mpi.collective` (on the communicator for the
 * first, on the window for the others). Request-based calls (MPI_Rput, ...) number their
 * request, completed by the Wait and Test families.
 */
#include "wmpi.h"

/* A window-making call over `comm`: `rc = call` in a collective span, then `*win` keyed. */
#define WM_WIN_CREATE(fn, call)                                                                     \
  const wm_comm_t *c = wm_comm(comm);                                                               \
  int rc;                                                                                           \
  WM_COLL(fn, c, call, .size = c->size);                                                            \
  if (rc == MPI_SUCCESS) wm_win_made(*win, comm);                                                   \
  return rc

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
  WM_WIN_CREATE(MPI_Win_create, PMPI_Win_create(base, size, disp_unit, info, comm, win));
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
  WM_WIN_CREATE(MPI_Win_allocate, PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win));
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,
                            MPI_Win *win) {
  WM_WIN_CREATE(MPI_Win_allocate_shared, PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win));
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) {
  WM_WIN_CREATE(MPI_Win_create_dynamic, PMPI_Win_create_dynamic(info, comm, win));
}

int MPI_Win_free(MPI_Win *win) {
  if (!win || *win == MPI_WIN_NULL) return PMPI_Win_free(win);
  const wm_comm_t *w = wm_win(*win);
  /* Forgotten before the handle value is free for another window. */
  waffle_mpi_comm_forget(WM_WINDOWS, WM_HANDLE(*win));
  int rc;
  if (!waffle_mpi_on()) return PMPI_Win_free(win);
  WM_COLL(MPI_Win_free, w, PMPI_Win_free(win));
  return rc;
}

int MPI_Win_fence(int assert_, MPI_Win win) {
  if (!waffle_mpi_on()) return PMPI_Win_fence(assert_, win);
  const wm_comm_t *w = wm_win(win);
  int rc;
  WM_COLL(MPI_Win_fence, w, PMPI_Win_fence(assert_, win));
  return rc;
}

/* Put and Get: origin buffer to or from a target. */
#define WM_MOVE(fn)                                                                                  \
  int MPI_##fn(WM_CONST_##fn void *origin_addr, int origin_count, MPI_Datatype origin_datatype,      \
               int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, \
               MPI_Win win) {                                                                        \
    const wm_comm_t *w = wm_win(win);                                                                \
    WM_SPAN(MPI_##fn, 0, .comm = (w->key), .peer = (wm_target(w, target_rank)),                     \
                .bytes = (wm_bytes(origin_count, origin_datatype)));                                \
    return PMPI_##fn(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, \
                     target_datatype, win);                                                          \
  }
#define WM_CONST_Put const
#define WM_CONST_Get
WM_MOVE(Put)
WM_MOVE(Get)

#define WM_RMOVE(fn)                                                                                 \
  int MPI_##fn(WM_CONST_##fn void *origin_addr, int origin_count, MPI_Datatype origin_datatype,      \
               int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, \
               MPI_Win win, MPI_Request *request) {                                                  \
    const wm_comm_t *w = wm_win(win);                                                                \
    uint64_t id = waffle_mpi_request_id();                                                           \
    int rc;                                                                                          \
    {                                                                                                \
      WM_SPAN(MPI_##fn, 0, .comm = (w->key),                                                        \
                  .peer = (wm_target(w, target_rank)),                                              \
                  .bytes = (wm_bytes(origin_count, origin_datatype)), .request = (id));             \
      rc = PMPI_##fn(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, \
                     target_datatype, win, request);                                                 \
    }                                                                                                \
    if (rc == MPI_SUCCESS) wm_track(*request, id, w, WM_RMA, 0);                                     \
    return rc;                                                                                       \
  }
#define WM_CONST_Rput const
#define WM_CONST_Rget
WM_RMOVE(Rput)
WM_RMOVE(Rget)

#define WM_ACC_VALS(w, target_rank, count, type)                                                    \
  .comm = ((w)->key), .peer = (wm_target(w, target_rank)),                                          \
      .bytes = (wm_bytes(count, type)), .op = (wm_op(op))

int MPI_Accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const wm_comm_t *w = wm_win(win);
  WM_SPAN(MPI_Accumulate, 0, WM_ACC_VALS(w, target_rank, origin_count, origin_datatype));
  return PMPI_Accumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                         target_datatype, op, win);
}

int MPI_Raccumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win,
                    MPI_Request *request) {
  const wm_comm_t *w = wm_win(win);
  uint64_t id = waffle_mpi_request_id();
  int rc;
  {
    WM_SPAN(MPI_Raccumulate, 0, WM_ACC_VALS(w, target_rank, origin_count, origin_datatype),
                .request = (id));
    rc = PMPI_Raccumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                          target_datatype, op, win, request);
  }
  if (rc == MPI_SUCCESS) wm_track(*request, id, w, WM_RMA, 0);
  return rc;
}

int MPI_Get_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr,
                       int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                       int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const wm_comm_t *w = wm_win(win);
  WM_SPAN(MPI_Get_accumulate, 0, WM_ACC_VALS(w, target_rank, origin_count, origin_datatype));
  return PMPI_Get_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count,
                             result_datatype, target_rank, target_disp, target_count, target_datatype, op, win);
}

int MPI_Rget_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr,
                        int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                        int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win,
                        MPI_Request *request) {
  const wm_comm_t *w = wm_win(win);
  uint64_t id = waffle_mpi_request_id();
  int rc;
  {
    WM_SPAN(MPI_Rget_accumulate, 0, WM_ACC_VALS(w, target_rank, origin_count, origin_datatype),
                .request = (id));
    rc = PMPI_Rget_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count,
                              result_datatype, target_rank, target_disp, target_count, target_datatype, op, win,
                              request);
  }
  if (rc == MPI_SUCCESS) wm_track(*request, id, w, WM_RMA, 0);
  return rc;
}

int MPI_Fetch_and_op(const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank,
                     MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
  const wm_comm_t *w = wm_win(win);
  WM_SPAN(MPI_Fetch_and_op, 0, WM_ACC_VALS(w, target_rank, 1, datatype));
  return PMPI_Fetch_and_op(origin_addr, result_addr, datatype, target_rank, target_disp, op, win);
}

int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr, void *result_addr, MPI_Datatype datatype,
                         int target_rank, MPI_Aint target_disp, MPI_Win win) {
  const wm_comm_t *w = wm_win(win);
  WM_SPAN(MPI_Compare_and_swap, 0, .comm = (w->key),
              .peer = (wm_target(w, target_rank)), .bytes = (wm_bytes(1, datatype)));
  return PMPI_Compare_and_swap(origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp, win);
}

/* Synchronisation on a window alone. */
#define WM_WIN_SYNC(fn)                                                                              \
  int MPI_##fn(MPI_Win win) {                                                                        \
    WM_SPAN(MPI_##fn, 0, .comm = (wm_win(win)->key));                                               \
    return PMPI_##fn(win);                                                                           \
  }
WM_WIN_SYNC(Win_complete)
WM_WIN_SYNC(Win_wait)
WM_WIN_SYNC(Win_unlock_all)
WM_WIN_SYNC(Win_flush_all)
WM_WIN_SYNC(Win_flush_local_all)
WM_WIN_SYNC(Win_sync)

/* Synchronisation with one target. */
#define WM_WIN_TARGET(fn)                                                                            \
  int MPI_##fn(int rank, MPI_Win win) {                                                              \
    const wm_comm_t *w = wm_win(win);                                                                \
    WM_SPAN(MPI_##fn, 0, .comm = (w->key), .peer = (wm_target(w, rank)));                           \
    return PMPI_##fn(rank, win);                                                                     \
  }
WM_WIN_TARGET(Win_unlock)
WM_WIN_TARGET(Win_flush)
WM_WIN_TARGET(Win_flush_local)

int MPI_Win_lock(int lock_type, int rank, int assert_, MPI_Win win) {
  const wm_comm_t *w = wm_win(win);
  WM_SPAN(MPI_Win_lock, 0, .comm = (w->key), .peer = (wm_target(w, rank)),
              .exclusive = (lock_type == MPI_LOCK_EXCLUSIVE));
  return PMPI_Win_lock(lock_type, rank, assert_, win);
}

int MPI_Win_lock_all(int assert_, MPI_Win win) {
  WM_SPAN(MPI_Win_lock_all, 0, .comm = (wm_win(win)->key));
  return PMPI_Win_lock_all(assert_, win);
}

int MPI_Win_start(MPI_Group group, int assert_, MPI_Win win) {
  WM_SPAN(MPI_Win_start, 0, .comm = (wm_win(win)->key));
  return PMPI_Win_start(group, assert_, win);
}

int MPI_Win_post(MPI_Group group, int assert_, MPI_Win win) {
  WM_SPAN(MPI_Win_post, 0, .comm = (wm_win(win)->key));
  return PMPI_Win_post(group, assert_, win);
}

int MPI_Win_test(MPI_Win win, int *flag) {
  WM_SPAN(MPI_Win_test, 0, .comm = (wm_win(win)->key));
  return PMPI_Win_test(win, flag);
}
