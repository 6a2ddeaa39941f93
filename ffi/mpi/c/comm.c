/*
 * comm.c: start-up and communicators. MPI_Init and MPI_Init_thread learn the world rank and key
 * MPI_COMM_WORLD and MPI_COMM_SELF first, so that their keys count as the first communicators of
 * their groups on every rank; every wrapper that creates a communicator keys it when it is made
 * (its members make it collectively, in the same order, so they count alike); MPI_Comm_free
 * and MPI_Comm_disconnect drop the cached entry before the handle value can be reused.
 *
 * A communicator made by a function not wrapped here (MPI_Comm_idup, MPI_Comm_spawn, ...) is
 * keyed when a wrapper first meets it; if the members meet their communicators of one group in
 * different orders, their keys differ (docs/mpi.md, limits).
 */
#include <pthread.h>
#include <stdlib.h>

#include "wmpi.h"

int32_t wm_world_rank = -1;
__thread void *wm_thread __attribute__((tls_model("initial-exec"), visibility("hidden")));
const wm_comm_t wm_unknown = {0, 0, 0, NULL, NULL};

/* Serialises the slow path: two threads meeting one new communicator must count it once. */
static pthread_mutex_t wm_slow_lock = PTHREAD_MUTEX_INITIALIZER;

/* The world ranks of `group`'s members into a new array (NULL if empty). */
static int32_t *wm_world_ranks(MPI_Group group, int *n) {
  *n = 0;
  if (PMPI_Group_size(group, n) != MPI_SUCCESS || *n <= 0) return NULL;
  int *index = malloc(sizeof(int) * (size_t)*n);
  int32_t *world = malloc(sizeof(int32_t) * (size_t)*n);
  MPI_Group world_group;
  if (!index || !world || PMPI_Comm_group(MPI_COMM_WORLD, &world_group) != MPI_SUCCESS) {
    free(index);
    free(world);
    *n = 0;
    return NULL;
  }
  for (int i = 0; i < *n; i++) index[i] = i;
  if (PMPI_Group_translate_ranks(group, *n, index, world_group, world) != MPI_SUCCESS) *n = 0;
  PMPI_Group_free(&world_group);
  free(index);
  return world;
}

/* Keys `handle` (a communicator, or a window over `comm`) from `comm`'s group(s). */
static const wm_comm_t *wm_add(uint32_t kind, uint64_t handle, MPI_Comm comm) {
  int initialized = 0, finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (!initialized || finalized || comm == MPI_COMM_NULL) return &wm_unknown;
  MPI_Group local, remote;
  int n = 0, rn = 0, inter = 0;
  int32_t *world = NULL, *remote_world = NULL;
  if (PMPI_Comm_group(comm, &local) == MPI_SUCCESS) {
    world = wm_world_ranks(local, &n);
    PMPI_Group_free(&local);
  }
  if (PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && inter &&
      PMPI_Comm_remote_group(comm, &remote) == MPI_SUCCESS) {
    remote_world = wm_world_ranks(remote, &rn);
    PMPI_Group_free(&remote);
  }
  const wm_comm_t *c = waffle_mpi_comm_add(kind, handle, world, n, remote_world, rn);
  free(world);
  free(remote_world);
  return c ? c : &wm_unknown;
}

const wm_comm_t *wm_comm_slow(MPI_Comm comm) {
  pthread_mutex_lock(&wm_slow_lock);
  const wm_comm_t *c = waffle_mpi_comm_find(WM_COMMS, WM_HANDLE(comm));
  if (!c) c = wm_add(WM_COMMS, WM_HANDLE(comm), comm);
  pthread_mutex_unlock(&wm_slow_lock);
  return c;
}

void wm_comm_made(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return;
  pthread_mutex_lock(&wm_slow_lock);
  (void)wm_add(WM_COMMS, WM_HANDLE(comm), comm);
  pthread_mutex_unlock(&wm_slow_lock);
}

void wm_win_made(MPI_Win win, MPI_Comm comm) {
  if (win == MPI_WIN_NULL) return;
  pthread_mutex_lock(&wm_slow_lock);
  (void)wm_add(WM_WINDOWS, WM_HANDLE(win), comm);
  pthread_mutex_unlock(&wm_slow_lock);
}

const char *wm_op(MPI_Op op) {
  if (op == MPI_SUM) return "MPI_SUM";
  if (op == MPI_MAX) return "MPI_MAX";
  if (op == MPI_MIN) return "MPI_MIN";
  if (op == MPI_PROD) return "MPI_PROD";
  if (op == MPI_LAND) return "MPI_LAND";
  if (op == MPI_LOR) return "MPI_LOR";
  if (op == MPI_LXOR) return "MPI_LXOR";
  if (op == MPI_BAND) return "MPI_BAND";
  if (op == MPI_BOR) return "MPI_BOR";
  if (op == MPI_BXOR) return "MPI_BXOR";
  if (op == MPI_MAXLOC) return "MPI_MAXLOC";
  if (op == MPI_MINLOC) return "MPI_MINLOC";
  if (op == MPI_REPLACE) return "MPI_REPLACE";
  if (op == MPI_NO_OP) return "MPI_NO_OP";
  return "user";
}

/* After a successful MPI_Init(_thread): the world rank, then WORLD and SELF keyed first. */
static void wm_started(void) {
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  wm_world_rank = rank;
  waffle_mpi_set_rank(rank);
  wm_comm_made(MPI_COMM_WORLD);
  wm_comm_made(MPI_COMM_SELF);
}

int MPI_Init(int *argc, char ***argv) {
  int rc;
  {
    WM_SPAN(MPI_Init, 0);
    rc = PMPI_Init(argc, argv);
  }
  if (rc == MPI_SUCCESS) wm_started();
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  int rc;
  {
    WM_SPAN(MPI_Init_thread, 0, .required = required);
    rc = PMPI_Init_thread(argc, argv, required, provided);
  }
  if (rc == MPI_SUCCESS) wm_started();
  return rc;
}

int MPI_Finalize(void) {
  WM_SPAN(MPI_Finalize, 0);
  return PMPI_Finalize();
}

/* A creating call: `rc = call` in the span of `fn`, collective over `comm`, then `*out` keyed. */
#define WM_CREATE(fn, comm, out, call)                                                              \
  do {                                                                                            \
    const wm_comm_t *c = wm_comm(comm);                                                           \
    WM_COLL(fn, c, call, .size = c->size);                                                          \
    if (rc == MPI_SUCCESS) wm_comm_made(*(out));                                                  \
  } while (0)

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Comm_dup, comm, newcomm, PMPI_Comm_dup(comm, newcomm));
  return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Comm_dup_with_info, comm, newcomm, PMPI_Comm_dup_with_info(comm, info, newcomm));
  return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Comm_split, comm, newcomm, PMPI_Comm_split(comm, color, key, newcomm));
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Comm_split_type, comm, newcomm, PMPI_Comm_split_type(comm, split_type, key, info, newcomm));
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Comm_create, comm, newcomm, PMPI_Comm_create(comm, group, newcomm));
  return rc;
}

/* Collective over `group` only, not over `comm`: no collective correlation on `comm`. */
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
  int rc;
  {
    WM_SPAN(MPI_Comm_create_group, 0, .comm = wm_comm(comm)->key, .tag = tag);
    rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
  }
  if (rc == MPI_SUCCESS) wm_comm_made(*newcomm);
  return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Cart_create, comm, newcomm, PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm));
  return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Cart_sub, comm, newcomm, PMPI_Cart_sub(comm, remain_dims, newcomm));
  return rc;
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                     MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Graph_create, comm, newcomm, PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm));
  return rc;
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[],
                          const int weights[], MPI_Info info, int reorder, MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Dist_graph_create, comm, newcomm,
            PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm));
  return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm *newcomm) {
  int rc;
  WM_CREATE(MPI_Dist_graph_create_adjacent, comm, newcomm,
            PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations,
                                            destweights, info, reorder, newcomm));
  return rc;
}

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                         MPI_Comm *newintercomm) {
  int rc;
  WM_CREATE(MPI_Intercomm_create, local_comm, newintercomm,
            PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newintercomm));
  return rc;
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm) {
  int rc;
  WM_CREATE(MPI_Intercomm_merge, intercomm, newintracomm, PMPI_Intercomm_merge(intercomm, high, newintracomm));
  return rc;
}

int MPI_Comm_free(MPI_Comm *comm) {
  if (comm && *comm != MPI_COMM_NULL) {
    WM_SPAN(MPI_Comm_free, 0, .comm = wm_comm(*comm)->key);
    waffle_mpi_comm_forget(WM_COMMS, WM_HANDLE(*comm));
    return PMPI_Comm_free(comm);
  }
  return PMPI_Comm_free(comm);
}

int MPI_Comm_disconnect(MPI_Comm *comm) {
  if (comm && *comm != MPI_COMM_NULL) {
    WM_SPAN(MPI_Comm_disconnect, 0, .comm = wm_comm(*comm)->key);
    waffle_mpi_comm_forget(WM_COMMS, WM_HANDLE(*comm));
    return PMPI_Comm_disconnect(comm);
  }
  return PMPI_Comm_disconnect(comm);
}
