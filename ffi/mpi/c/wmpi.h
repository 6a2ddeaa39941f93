/*
 * wmpi.h: what the MPI wrappers of libwaffle_mpi.so share (docs/mpi.md says what they record).
 *
 * Every wrapper `MPI_X` looks up its communicator (wm_comm: one probe of a lock-free table kept
 * by the Rust side, src/comms.rs), turns ranks into world ranks, counts messages and
 * collectives (waffle_mpi_next, src/keys.rs), opens a span, calls `PMPI_X`, and ends the span
 * when its block exits. The span is opened with WM_SPAN: the wrapper's static site
 * (src/sites.rs), its values passed as plain integers in a wm_vals_t, written by src/record.rs
 * with no key-value array and no per-call check. A wrapper that starts something does nothing
 * but call `PMPI_X` while no session exists (waffle_mpi_on); counting otherwise goes on while
 * a session is paused, so that the ranks keep numbering messages alike. No wrapper allocates or
 * locks on its common path; the slow paths (a communicator met for the first time, more
 * requests than fit on the stack) are outside it.
 */
#ifndef WMPI_H
#define WMPI_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>


/* A communicator or window as src/comms.rs keeps it (`Comm`). */
typedef struct wm_comm_t {
  uint64_t key;
  int32_t size;
  int32_t remote_size;
  const int32_t *world;
  const int32_t *remote;
} wm_comm_t;

/* A request as src/requests.rs keeps it (`Req`). */
typedef struct wm_req_t {
  uint64_t id;
  const wm_comm_t *comm;
  int32_t kind;
  int32_t flags;
  int32_t tag;
  int32_t peer;
  uint64_t bytes;
  uint64_t thread; /* the starting thread (pthread_self) */
} wm_req_t;

enum { WM_SEND = 0, WM_RECV = 1, WM_COLL = 2, WM_RMA = 3, WM_MESSAGE = 4 };
enum { WM_PERSISTENT = 1, WM_ACTIVE = 2 };
enum { WM_COMMS = 0, WM_WINDOWS = 1 };
enum { WM_COUNT_SEND = 0, WM_COUNT_RECV = 1, WM_COUNT_COLL = 2 };

/* ---- the Rust side (src/lib.rs) ---------------------------------------------------------- */
void waffle_mpi_set_rank(int32_t rank);
uint64_t waffle_mpi_next(uint32_t what, uint64_t comm, int64_t peer, int64_t tag);
const wm_comm_t *waffle_mpi_comm_find(uint32_t kind, uint64_t handle);
const wm_comm_t *waffle_mpi_comm_add(uint32_t kind, uint64_t handle, const int32_t *world, int32_t size,
                                     const int32_t *remote, int32_t remote_size);
void waffle_mpi_comm_forget(uint32_t kind, uint64_t handle);
uint64_t waffle_mpi_request_id(void);
void waffle_mpi_req_put(uint64_t handle, const wm_req_t *req);
bool waffle_mpi_req_get(uint64_t handle, bool take, uint64_t thread, wm_req_t *out);

/* ---- the Rust side's recording (src/record.rs, src/sites.rs) ----------------------------- */
/* The values a span can carry, one slot per field name (`Vals`): each site writes its own. */
typedef struct wm_vals_t {
  uint64_t comm; /* also `window`, the window's key */
  int64_t peer;  /* also `target`, a one-sided call's target */
  int64_t tag;
  uint64_t bytes;
  int64_t root;
  const char *op;
  uint64_t request;
  int64_t dest;
  int64_t send_tag;
  uint64_t send_bytes;
  const char *requests;
  uint64_t requests_len;
  int64_t count;
  int64_t size;
  int64_t required;
  bool exclusive;
} wm_vals_t;
/* A recorded function's callsites and fields (`Site`), waffle_mpi_site_MPI_X. */
typedef struct wm_site_t wm_site_t;
/* An open span (`Open`). */
typedef struct wm_open_t {
  uint64_t id;
  uint64_t prev;
} wm_open_t;
bool waffle_mpi_on(void);
wm_open_t waffle_mpi_begin(void **thread, const wm_site_t *site, const wm_vals_t *vals, uint64_t correlation);
void waffle_mpi_end(void **thread, wm_open_t open, bool at_last);
bool waffle_mpi_received(void **thread, uint64_t comm, int64_t source, int64_t tag, uint64_t bytes, uint64_t request);

/* This thread's handle to its recording state (comm.c), set by the Rust side on first use:
 * initial-exec, a fixed offset from the thread pointer, where the library's own thread-local
 * costs a call of __tls_get_addr. The library is loaded at start (preloaded or linked), where
 * static TLS is always available. */
extern __thread void *wm_thread __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* WM_SPAN's guard: the span, and whether it ends at its last record's time (the receive event
 * just recorded) rather than reading the clock. */
typedef struct wm_span_t {
  wm_open_t open;
  bool at_last;
} wm_span_t;
static inline void wm_span_end(wm_span_t *span) { waffle_mpi_end(&wm_thread, span->open, span->at_last); }

/* WM_SPAN(MPI_X, correlation, .field = value, ...): opens the span of MPI_X with those values
 * of wm_vals_t (the ones src/sites.rs lists for it) and the correlation value (0: none), until
 * the enclosing block exits; `wm_span` is its guard. A declaration: one per block. */
#define WM_SPAN(fn, correlation, ...)                                                            \
  extern const wm_site_t waffle_mpi_site_##fn;                                                   \
  wm_span_t wm_span __attribute__((cleanup(wm_span_end))) = {                                    \
      waffle_mpi_begin(&wm_thread, &waffle_mpi_site_##fn, &(wm_vals_t){__VA_ARGS__}, (correlation)), false}

/* ---- comm.c ------------------------------------------------------------------------------ */
/* This process's rank in MPI_COMM_WORLD (-1 before MPI_Init). */
extern int32_t wm_world_rank;
/* What an unknown or null communicator reads as: key 0, no ranks. */
extern const wm_comm_t wm_unknown;
/* A communicator met for the first time: its entry, made and cached. */
const wm_comm_t *wm_comm_slow(MPI_Comm comm);
/* A communicator a wrapper just created (MPI_COMM_NULL: nothing). */
void wm_comm_made(MPI_Comm comm);
/* A window just created over `comm`'s group. */
void wm_win_made(MPI_Win win, MPI_Comm comm);

/* ---- p2p.c ------------------------------------------------------------------------------- */
/* Counts a completed receive on `c` and records its event inside the current span; whether
 * the event was recorded. */
bool wm_received(const wm_comm_t *c, const MPI_Status *status, uint64_t request);

/* A handle as a table key: Open MPI's are pointers, MPICH's integers. */
#define WM_HANDLE(h) ((uint64_t)(uintptr_t)(h))

/* The entry of `comm`. */
static inline const wm_comm_t *wm_comm(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return &wm_unknown;
  const wm_comm_t *c = waffle_mpi_comm_find(WM_COMMS, WM_HANDLE(comm));
  return c ? c : wm_comm_slow(comm);
}

/* The entry of `win` (windows are made by their wrappers; one not seen made reads unknown). */
static inline const wm_comm_t *wm_win(MPI_Win win) {
  const wm_comm_t *w = waffle_mpi_comm_find(WM_WINDOWS, WM_HANDLE(win));
  return w ? w : &wm_unknown;
}

/* The world rank of the peer `rank` of `c` (of its remote group for an intercommunicator):
 * -1 for MPI_ANY_SOURCE, -2 for MPI_PROC_NULL, -3 for a rank out of range. */
static inline int64_t wm_peer(const wm_comm_t *c, int rank) {
  if (rank == MPI_ANY_SOURCE) return -1;
  if (rank == MPI_PROC_NULL) return -2;
  const int32_t *table = c->remote_size > 0 ? c->remote : c->world;
  int32_t n = c->remote_size > 0 ? c->remote_size : c->size;
  return rank >= 0 && rank < n ? table[rank] : -3;
}

/* The world rank of a collective's root (MPI_ROOT: this process, on an intercommunicator). */
static inline int64_t wm_root(const wm_comm_t *c, int root) {
  if (root == MPI_ROOT) return wm_world_rank;
  if (c->remote_size > 0) return wm_peer(c, root);
  return root == MPI_PROC_NULL ? -2 : root >= 0 && root < c->size ? c->world[root] : -3;
}

/* The world rank of target `rank` of a window. */
static inline int64_t wm_target(const wm_comm_t *w, int rank) { return wm_peer(w, rank); }

static inline int64_t wm_tag(int tag) { return tag == MPI_ANY_TAG ? -1 : tag; }

/* count x the size of `type`. */
static inline uint64_t wm_bytes(int count, MPI_Datatype type) {
  int size = 0;
  if (count <= 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0) return 0;
  return (uint64_t)count * (uint64_t)size;
}

/* The correlation value of a send to `peer` (0 for MPI_PROC_NULL: no message). */
static inline uint64_t wm_send(const wm_comm_t *c, int64_t peer, int tag) {
  return peer >= 0 ? waffle_mpi_next(WM_COUNT_SEND, c->key, peer, tag) : 0;
}

/* The correlation value of the next collective on `c`. */
static inline uint64_t wm_coll(const wm_comm_t *c) { return waffle_mpi_next(WM_COUNT_COLL, c->key, 0, 0); }

/* The calling thread, as requests record who started them. */
#define WM_THREAD() ((uint64_t)(uintptr_t)pthread_self())

/* Takes request `handle` out of the table into `out` (of several under one handle, the calling
 * thread's first: Open MPI shares one handle among sends that completed when they started). */
static inline bool wm_take(uint64_t handle, wm_req_t *out) {
  return waffle_mpi_req_get(handle, true, WM_THREAD(), out);
}

/* Enters `request` as ours. */
static inline void wm_track(MPI_Request request, uint64_t id, const wm_comm_t *c, int kind, int flags) {
  wm_req_t r = {id, c, kind, flags, 0, 0, 0, WM_THREAD()};
  waffle_mpi_req_put(WM_HANDLE(request), &r);
}

/* `id` in decimal at `out` (room for 21 bytes); returns the length. The digits are counted
 * first and written from the last, two at a time: request numbers have five to seven digits in
 * a long run, and this is on the path of every Wait and Test. */
static inline int wm_decimal(char *out, uint64_t id) {
  static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                              "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                              "8081828384858687888990919293949596979899";
  int n = 1;
  for (uint64_t rest = id; rest >= 10; rest /= 10) n++;
  out[n] = 0;
  int at = n;
  while (id >= 10) {
    unsigned pair = (unsigned)(id % 100);
    id /= 100;
    out[--at] = pairs[2 * pair + 1];
    out[--at] = pairs[2 * pair];
  }
  if (at > 0) out[--at] = (char)('0' + id);
  return n;
}

/* The name of a predefined reduction op, or "user". */
const char *wm_op(MPI_Op op);

/* Point-to-point values. */
#define WM_P2P(c, peer_, tag_, bytes_) .comm = (c)->key, .peer = (peer_), .tag = wm_tag(tag_), .bytes = (bytes_)

/* `rc = (call)` inside the span of a collective `fn` on `c`: comm key, the values, its
 * correlation. */
#define WM_COLL(fn, c, call, ...)                                                                \
  do {                                                                                           \
    WM_SPAN(fn, wm_coll(c), .comm = (c)->key, __VA_ARGS__);                                      \
    rc = (call);                                                                                 \
  } while (0)

#endif /* WMPI_H */
