/* A program written as the original examples are: it records spans and never starts a session.
 * Run with WAFFLE_OUTPUT set, it records anyway (ffi/tests/autostart.rs decodes what it wrote);
 * without it, or with a bad value, it runs untraced and its ids are null.
 *
 * usage: autostart                  record, return from main
 *        autostart explicit PATH    waffle_start(PATH) first, then record
 *        autostart late PATH        record a span, then waffle_start(PATH), then record
 *        autostart fork             record, fork a child that records and exits, record again
 *        autostart stop             record, waffle_stop(), record again (not kept) */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "waffle_macros.h"

static void *worker(void *arg) {
  waffle_context_t *parent = arg;
  WAFFLE_CONTEXT_SCOPE(*parent);
  WAFFLE_SPAN("worker", WAFFLE_KV_I64("items", 2));
  return NULL;
}

/* The work every mode records: a span with a field, an event, a cause, and a thread that
 * continues the main thread's span. */
static void work(void) {
  WAFFLE_SPAN_VAR(solve, "solve", WAFFLE_KV_U64("cells", 4096));
  waffle_event_id_t bad = WAFFLE_EVENT("residual diverged", WAFFLE_KV_F64("r", 1e9));
  {
    WAFFLE_SPAN("restart", WAFFLE_KV_CAUSE_EVENT(bad));
  }
  waffle_context_t here = waffle_context_current();
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, worker, &here) == 0);
  CHECK(pthread_join(thread, NULL) == 0);
  (void)solve;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "explicit") == 0) {
    CHECK(argc == 3);
    CHECK_OK(waffle_start(argv[2]));
  } else if (strcmp(mode, "late") == 0) {
    CHECK(argc == 3);
    {
      WAFFLE_SPAN("before start");
    }
    CHECK_OK(waffle_start(argv[2]));
  } else if (strcmp(mode, "fork") == 0) {
    {
      WAFFLE_SPAN("before fork");
    }
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
      /* Records nothing, and its exit handler must leave the parent's file alone. */
      WAFFLE_SPAN_VAR(in_child, "in child");
      CHECK(in_child.id.id == 0);
      exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  work();
  if (strcmp(mode, "stop") == 0) {
    CHECK_OK(waffle_stop());
    WAFFLE_SPAN_VAR(after, "after stop");
    CHECK(after.id.id == 0);
  }
  printf("ok\n");
  return 0; /* no waffle_stop: the runtime's exit handler closes the file */
}
