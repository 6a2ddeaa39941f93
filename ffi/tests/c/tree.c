/* The C macros end to end: nested spans with every field type, events, causal links to an
 * event and to a span, correlations, a loop over one callsite, a pthread worker that enters the
 * main thread's context, and a traceparent round trip. ffi/tests/c_api.rs decodes the trace
 * and compares it with the exact tree.
 *
 * usage: tree TRACE.bin */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "waffle_macros.h"

struct task {
  waffle_context_t parent;
  waffle_event_id_t ready;
};

/* Runs after the worker's TLS destructors (glibc runs pthread keys' destructors after those of
 * thread-locals): the thread's recording state is gone, and WAFFLE_SPAN's cached handle to it
 * must record nothing rather than touch it. */
static void too_late(void *arg) {
  (void)arg;
  WAFFLE_SPAN_VAR(late, "too late");
  CHECK(late.id.id == 0);
}

static void *worker(void *arg) {
  struct task *t = arg;
  pthread_key_t key;
  CHECK(pthread_key_create(&key, too_late) == 0);
  CHECK(pthread_setspecific(key, t) == 0);
  WAFFLE_CONTEXT_SCOPE(t->parent);
  CHECK(waffle_context_current().span_id.id == t->parent.span_id.id);
  WAFFLE_SPAN("process_task", WAFFLE_KV_CAUSE_EVENT(t->ready), WAFFLE_KV_U64("items", 2));
  for (int i = 0; i < 2; i++) {
    WAFFLE_SPAN("item", WAFFLE_KV_I64("i", i));
  }
  return NULL;
}

static void loop_body(int i) {
  WAFFLE_SPAN("loop", WAFFLE_KV_CORRELATE("round", i), WAFFLE_KV_I64("i", i));
  if (i == 1) {
    (void)WAFFLE_EVENT("odd one", WAFFLE_KV_BOOL("odd", i % 2));
  }
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  CHECK_OK(waffle_start(argv[1]));
  waffle_event_id_t cause;
  {
    WAFFLE_SPAN_VAR(outer, "outer", WAFFLE_KV_I64("neg", -5), WAFFLE_KV_U64("big", UINT64_MAX),
                    WAFFLE_KV_F64("x", 1.5), WAFFLE_KV_BOOL("ok", 1), WAFFLE_KV_STR("s", "h\xc3\xa9llo"),
                    WAFFLE_KV_STRN("n", "abcdef", 3), WAFFLE_KV_STR("none", NULL));
    CHECK(outer.id.id != 0);
    cause = WAFFLE_EVENT("cause", WAFFLE_KV_STR("why", "testing"));
    CHECK(cause.id != 0);
    {
      WAFFLE_SPAN("inner", WAFFLE_KV_CAUSE_EVENT(cause), WAFFLE_KV_CAUSE_SPAN(outer.id));
      waffle_event_id_t leaf = WAFFLE_EVENT("leaf");
      CHECK(leaf.id == cause.id + 2); /* ids count along the thread: cause, inner, leaf */
    }
    for (int i = 0; i < 3; i++) {
      loop_body(i);
    }

    /* The worker's spans belong to `outer`. */
    struct task t = {waffle_context_current(), cause};
    CHECK(t.parent.span_id.id == outer.id.id);
    CHECK(t.parent.trace_id_hi != 0 || t.parent.trace_id_lo != 0);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, worker, &t) == 0);
    CHECK(pthread_join(thread, NULL) == 0);

    /* A context survives the trip through traceparent text. */
    char text[WAFFLE_TRACEPARENT_LEN];
    CHECK_OK(waffle_context_to_traceparent(&t.parent, text, sizeof text));
    CHECK(strlen(text) == 55 && strncmp(text, "00-", 3) == 0 && strcmp(text + 52, "-01") == 0);
    waffle_context_t back;
    CHECK_OK(waffle_context_from_traceparent(text, &back));
    CHECK(memcmp(&back, &t.parent, sizeof back) == 0);
  }
  CHECK(waffle_context_current().span_id.id == 0);
  CHECK_OK(waffle_stop());
  CHECK(waffle_last_status() == WAFFLE_OK);
  printf("ok\n");
  return 0;
}
