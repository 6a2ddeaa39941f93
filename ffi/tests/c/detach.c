/* A span begun on one thread and ended on another (waffle_span_detach): the main thread opens
 * "job", detaches it and records "after" (not inside "job"); a worker enters job's context,
 * records "step" inside it and ends "job" there. ffi/tests/c_api.rs decodes the trace and
 * compares it with the exact tree: "job" is one span, ended, with "step" as its child.
 *
 * usage: detach TRACE.bin */
#include <pthread.h>

#include "check.h"
#include "waffle_macros.h"

static waffle_callsite_t job_site = {"job", NULL, NULL, 0, 0};
static waffle_callsite_t step_site = {"step", NULL, NULL, 0, 0};

static void *worker(void *arg) {
  waffle_span_t *job = arg;
  waffle_context_t ctx = waffle_context_current();
  ctx.span_id = job->id;
  waffle_context_guard_t in = waffle_context_enter(&ctx);
  CHECK(in.entered == 1);
  waffle_span_t step = waffle_span_begin(&step_site, NULL, 0);
  CHECK(step.id.id != 0);
  CHECK(waffle_span_end(&step) == WAFFLE_OK);
  CHECK(waffle_context_exit(&in) == WAFFLE_OK);
  /* Ended here, by id, on a thread that did not begin it. */
  CHECK(waffle_span_end(job) == WAFFLE_OK);
  CHECK(job->id.id == 0);
  return NULL;
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  CHECK(waffle_start(argv[1]) == WAFFLE_OK);
  waffle_span_t job = waffle_span_begin(&job_site, NULL, 0);
  CHECK(job.id.id != 0);
  waffle_span_id_t id = job.id;
  CHECK(waffle_span_detach(&job) == WAFFLE_OK);
  CHECK(job.id.id == id.id);
  CHECK(waffle_span_detach(&job) == WAFFLE_OK); /* a second detach does nothing */
  /* Off this thread's stack: what it records next is not inside "job". */
  CHECK(waffle_context_current().span_id.id == 0);
  {
    WAFFLE_SPAN("after");
  }
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, &job) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(waffle_stop() == WAFFLE_OK);
  puts("ok");
  return 0;
}
