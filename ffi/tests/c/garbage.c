/* Every function of waffle.h with NULL pointers, bad lengths, unknown kinds, misaligned
 * pointers, invalid UTF-8 and calls out of order: each returns its error status (or a null id
 * and sets waffle_last_status), nothing crashes, and the trace written around the garbage
 * still decodes cleanly (ffi/tests/c_api.rs checks it).
 *
 * usage: garbage TRACE.bin */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "waffle_macros.h"

/* The last status must be `s`, and reading it resets it. */
#define CHECK_LAST(s)                          \
  do {                                         \
    CHECK(waffle_last_status() == (s));        \
    CHECK(waffle_last_status() == WAFFLE_OK);  \
  } while (0)

static char big[8192];

static void before_start(const char *path) {
  CHECK(waffle_abi_version() == WAFFLE_ABI_VERSION);
  CHECK(waffle_check_abi() == WAFFLE_OK);
  for (int s = -5; s < 40; s++) {
    const char *text = waffle_status_str(s);
    CHECK(text != NULL && strlen(text) > 1 && strlen(text) < 200);
  }
  CHECK(strcmp(waffle_status_str(WAFFLE_OK), "ok") == 0);
  CHECK(strcmp(waffle_status_str(1000), "unknown waffle status") == 0);

  CHECK(waffle_start(NULL) == WAFFLE_ERR_NULL);
  CHECK_LAST(WAFFLE_ERR_NULL);
  CHECK(waffle_start("") == WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_start("/nonexistent-waffle-dir/sub/trace.bin") == WAFFLE_ERR_IO);
  CHECK(waffle_start_with(NULL) == WAFFLE_ERR_NULL);

  waffle_config_t cfg = WAFFLE_CONFIG_INIT(path);
  cfg.abi_version = WAFFLE_ABI_VERSION + 1;
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_ABI_MISMATCH);
  waffle_config_t zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  CHECK(waffle_start_with(&zeroed) == WAFFLE_ERR_ABI_MISMATCH);
  cfg = WAFFLE_CONFIG_INIT(NULL);
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_NULL);
  cfg = WAFFLE_CONFIG_INIT(path);
  cfg.label_count = 2; /* labels NULL */
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_NULL);
  waffle_label_t labels[2] = {{"site", "lab"}, {NULL, "x"}};
  cfg.labels = labels;
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_NULL);
  cfg.label_count = 1u << 30;
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_INVALID_ARGUMENT);
  cfg.label_count = 1;
  waffle_context_t no_trace = {0, 0, {7}};
  cfg.parent = &no_trace;
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_start_with((const waffle_config_t *)(void *)(big + 1)) == WAFFLE_ERR_INVALID_ARGUMENT);

  CHECK(waffle_stop() == WAFFLE_ERR_NOT_STARTED);
  CHECK_LAST(WAFFLE_ERR_NOT_STARTED);
  CHECK(!waffle_is_enabled());
  /* Recording calls before any session do nothing and report nothing. */
  static waffle_callsite_t early = {"early", NULL, NULL, 0, 0};
  CHECK(waffle_span_begin(&early, NULL, 0).id.id == 0);
  CHECK(waffle_event(&early, NULL, 0).id == 0);
  CHECK(waffle_span_begin(NULL, NULL, 99).id.id == 0);
  waffle_context_t none = waffle_context_current();
  CHECK(none.span_id.id == 0);
  waffle_context_guard_t g = waffle_context_enter(&none);
  CHECK(g.entered == 0);
  CHECK(waffle_context_exit(&g) == WAFFLE_OK);
  waffle_flush();
  CHECK_LAST(WAFFLE_OK);
}

static void spans_and_events(void) {
  static waffle_callsite_t site = {"garbage site", "spans_and_events", "garbage.c", 1, 0};
  waffle_kv_t kvs[3] = {WAFFLE_KV_I64("a", 1), WAFFLE_KV_I64("b", 2), WAFFLE_KV_I64("c", 3)};

  waffle_span_t s = waffle_span_begin(NULL, kvs, 1);
  CHECK(s.id.id == 0);
  CHECK_LAST(WAFFLE_ERR_NULL);
  CHECK(waffle_span_begin(&site, NULL, 3).id.id == 0);
  CHECK_LAST(WAFFLE_ERR_NULL);
  CHECK(waffle_span_begin(&site, kvs, (size_t)WAFFLE_MAX_KVS + 1).id.id == 0);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_span_begin(&site, kvs, SIZE_MAX).id.id == 0);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_event(&site, (const waffle_kv_t *)(void *)(big + 3), 1).id == 0);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_span_begin((waffle_callsite_t *)(void *)(big + 1), NULL, 0).id.id == 0);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);

  waffle_kv_t unknown = kvs[0];
  unknown.kind = 99;
  CHECK(waffle_span_begin(&site, &unknown, 1).id.id == 0);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);
  unknown.kind = 0;
  CHECK(waffle_event(&site, &unknown, 1).id == 0);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);
  waffle_kv_t no_key = WAFFLE_KV_I64(NULL, 1);
  CHECK(waffle_event(&site, &no_key, 1).id == 0);
  CHECK_LAST(WAFFLE_ERR_NULL);
  static waffle_callsite_t no_name = {NULL, NULL, NULL, 0, 0};
  CHECK(waffle_event(&no_name, NULL, 0).id == 0);
  CHECK_LAST(WAFFLE_ERR_NULL);
  CHECK(waffle_span_begin_named(NULL, 5, NULL, 0).id.id == 0);
  CHECK_LAST(WAFFLE_ERR_NULL);
  CHECK(waffle_event_named(NULL, WAFFLE_STRLEN_NUL, NULL, 0).id == 0);
  CHECK_LAST(WAFFLE_ERR_NULL);

  CHECK(waffle_span_end(NULL) == WAFFLE_ERR_NULL);
  CHECK(waffle_span_end((waffle_span_t *)(void *)(big + 1)) == WAFFLE_ERR_INVALID_ARGUMENT);
  waffle_span_t null_guard = {{0}, 0};
  CHECK(waffle_span_end(&null_guard) == WAFFLE_OK);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_span_detach(NULL) == WAFFLE_ERR_NULL);
  CHECK(waffle_span_detach((waffle_span_t *)(void *)(big + 1)) == WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_span_detach(&null_guard) == WAFFLE_OK);
  CHECK_LAST(WAFFLE_ERR_INVALID_ARGUMENT);

  /* What is recorded despite odd input: the trace must still decode cleanly. A garbage
   * cached id is treated as unregistered. */
  static waffle_callsite_t odd = {"odd \xff name", NULL, NULL, 0, 0xdeadbeefu};
  waffle_kv_t values[6] = {
      WAFFLE_KV_STR("null", NULL),
      WAFFLE_KV_STR("bad utf8", "a\xff" "b"),
      WAFFLE_KV_STR("long", big),
      WAFFLE_KV_STRN("huge len", big, 0xfffffff0u),
      WAFFLE_KV_CAUSE_EVENT(((waffle_event_id_t){0})),
      WAFFLE_KV_CAUSE_SPAN(((waffle_span_id_t){0x7777777777777777ull})),
  };
  waffle_span_t kept = waffle_span_begin(&odd, values, 6);
  CHECK(kept.id.id != 0);
  CHECK(odd.cached_id != 0xdeadbeefu);
  /* The same callsite with other kinds than its first call: recorded under its own schema. */
  waffle_kv_t other[1] = {WAFFLE_KV_F64("null", 2.5)};
  waffle_event_id_t e = waffle_event(&odd, other, 1);
  CHECK(e.id != 0);
  waffle_event_id_t named = waffle_event_named("named \xfe", 7, NULL, 0);
  CHECK(named.id != 0);
  CHECK(waffle_span_end(&kept) == WAFFLE_OK);
  CHECK(kept.id.id == 0);
  CHECK(waffle_span_end(&kept) == WAFFLE_OK); /* a second end does nothing */
  CHECK_LAST(WAFFLE_OK);
}

static void contexts(void) {
  waffle_context_guard_t g = waffle_context_enter(NULL);
  CHECK(g.entered == 0);
  CHECK_LAST(WAFFLE_ERR_NULL);
  CHECK(waffle_context_exit(NULL) == WAFFLE_ERR_NULL);
  CHECK(waffle_context_exit(&g) == WAFFLE_OK);
  waffle_context_t null_ctx = {0, 0, {0}};
  g = waffle_context_enter(&null_ctx);
  CHECK(g.entered == 0);

  char buf[WAFFLE_TRACEPARENT_LEN];
  waffle_context_t ctx = {0x0102030405060708ull, 0x090a0b0c0d0e0f10ull, {0x1112131415161718ull}};
  memset(buf, 'x', sizeof buf);
  CHECK(waffle_context_to_traceparent(NULL, buf, sizeof buf) == WAFFLE_ERR_NULL && buf[0] == 0);
  CHECK(waffle_context_to_traceparent(&ctx, NULL, sizeof buf) == WAFFLE_ERR_NULL);
  CHECK(waffle_context_to_traceparent(&ctx, buf, 0) == WAFFLE_ERR_BUFFER_TOO_SMALL);
  memset(buf, 'x', sizeof buf);
  CHECK(waffle_context_to_traceparent(&ctx, buf, 10) == WAFFLE_ERR_BUFFER_TOO_SMALL && buf[0] == 0);
  CHECK(waffle_context_to_traceparent(&ctx, buf, 55) == WAFFLE_ERR_BUFFER_TOO_SMALL);
  CHECK(waffle_context_to_traceparent(&null_ctx, buf, sizeof buf) == WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK_OK(waffle_context_to_traceparent(&ctx, buf, sizeof buf));
  CHECK(strcmp(buf, "00-0102030405060708090a0b0c0d0e0f10-1112131415161718-01") == 0);

  waffle_context_t out = ctx;
  CHECK(waffle_context_from_traceparent(NULL, &out) == WAFFLE_ERR_NULL);
  CHECK(out.span_id.id == 0 && out.trace_id_hi == 0);
  CHECK(waffle_context_from_traceparent(buf, NULL) == WAFFLE_ERR_NULL);
  CHECK(waffle_context_from_traceparent("hello", &out) == WAFFLE_ERR_PARSE);
  CHECK(waffle_context_from_traceparent("00-\xff", &out) == WAFFLE_ERR_UTF8);
  CHECK(waffle_context_from_traceparent(big, &out) == WAFFLE_ERR_PARSE); /* no NUL in 4 KiB */
  CHECK(waffle_context_from_traceparent(
            "00-00000000000000000000000000000000-1112131415161718-01", &out) == WAFFLE_ERR_PARSE);
  CHECK_OK(waffle_context_from_traceparent(buf, &out));
  CHECK(memcmp(&out, &ctx, sizeof out) == 0);
  CHECK_LAST(WAFFLE_ERR_PARSE);
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  memset(big, 'g', sizeof big - 1); /* 8 KiB of 'g', NUL-terminated at the very end */
  before_start(argv[1]);

  waffle_label_t labels[1] = {{"site", "lab"}};
  waffle_config_t cfg = WAFFLE_CONFIG_INIT(argv[1]);
  cfg.labels = labels;
  cfg.label_count = 1;
  cfg.rank = 7;
  cfg.process_name = "garbage-test";
  CHECK_OK(waffle_start_with(&cfg));
  CHECK(waffle_start(argv[1]) == WAFFLE_ERR_ALREADY_STARTED);
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_ALREADY_STARTED);
  CHECK(waffle_is_enabled());
  CHECK_LAST(WAFFLE_ERR_ALREADY_STARTED);

  spans_and_events();
  contexts();

  waffle_set_enabled(false);
  CHECK(!waffle_is_enabled());
  CHECK(WAFFLE_EVENT("while paused").id == 0);
  waffle_set_enabled(true);
  (void)WAFFLE_EVENT("after garbage", WAFFLE_KV_U64("n", 42));
  waffle_flush();

  CHECK_OK(waffle_stop());
  CHECK(waffle_stop() == WAFFLE_ERR_NOT_STARTED);
  /* After the session: calls are harmless no-ops. */
  CHECK(WAFFLE_EVENT("after stop").id == 0);
  {
    WAFFLE_SPAN("after stop span");
  }
  CHECK(waffle_context_current().span_id.id == 0);
  CHECK_LAST(WAFFLE_ERR_NOT_STARTED);
  printf("ok\n");
  return 0;
}
