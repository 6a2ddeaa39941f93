/*
 * waffle_macros.h: spans, events and causal links for C, over waffle.h.
 *
 *   WAFFLE_SPAN("solve", WAFFLE_KV_U64("cells", n));          // until the end of the block
 *   waffle_event_id_t bad = WAFFLE_EVENT("diverged", WAFFLE_KV_F64("residual", r));
 *   WAFFLE_SPAN("restart", WAFFLE_KV_CAUSE_EVENT(bad));        // an arrow from bad to restart
 *   WAFFLE_STEP(step);                                          // a step, until the block exits
 *
 * Each use defines a `static waffle_callsite_t` with the name, function, file and line. Its
 * first execution registers the name and the keys and types of its key-values and caches the
 * id in the struct; every execution after that builds the key-value array on the stack and
 * makes one call that encodes the values. Names and keys must be string literals, and a use
 * must pass the same keys of the same kinds every time (which a macro use always does).
 *
 * Needs C99 or later with two GNU extensions that GCC and Clang accept even under
 * -std=c11 -pedantic: __attribute__((cleanup)) (WAFFLE_SPAN ends its span when the enclosing
 * block exits, however it exits, except longjmp) and statement expressions, written with
 * __extension__ (WAFFLE_EVENT is an expression). __COUNTER__ names the hidden variables.
 *
 * The short names of the original examples are aliases: SPAN, SPAN_VAR, KV_I64, KV_U64, KV_F64,
 * KV_BOOL, KV_STR, KV_STRN, KV_CAUSE_SPAN, KV_CAUSE_EVENT, KV_CORRELATE. Define
 * WAFFLE_NO_SHORT_NAMES before including this header to get only the WAFFLE_ ones.
 *
 * From C++, this header gives waffle.hpp's macros, which take these same WAFFLE_KV_* key-values
 * (there they build a waffle_kv_t) mixed with "key", value pairs and waffle::CausedBy /
 * waffle::Correlate tags; WAFFLE_EVENT evaluates to a waffle::EventId, which converts to
 * waffle_event_id_t. So a C program using these macros also compiles as C++17.
 */
#ifndef WAFFLE_MACROS_H
#define WAFFLE_MACROS_H

#ifdef __cplusplus
#include "waffle.hpp"
#else

#include "waffle.h"

/* ---- key-values: fields, causes and correlations ---------------------------------------- */

/* A signed integer field. */
#define WAFFLE_KV_I64(key_, v_) \
  { .key = (key_), .kind = WAFFLE_KV_KIND_I64, .value = { .i64 = (int64_t)(v_) } }
/* An unsigned integer field. */
#define WAFFLE_KV_U64(key_, v_) \
  { .key = (key_), .kind = WAFFLE_KV_KIND_U64, .value = { .u64 = (uint64_t)(v_) } }
/* A floating-point field. */
#define WAFFLE_KV_F64(key_, v_) \
  { .key = (key_), .kind = WAFFLE_KV_KIND_F64, .value = { .f64 = (double)(v_) } }
/* A boolean field (any non-zero value is true). */
#define WAFFLE_KV_BOOL(key_, v_) \
  { .key = (key_), .kind = WAFFLE_KV_KIND_BOOL, .value = { .u64 = (v_) ? 1u : 0u } }
/* A NUL-terminated string field (NULL is ""); at most 1 024 bytes are kept. */
#define WAFFLE_KV_STR(key_, s_) \
  { .key = (key_), .kind = WAFFLE_KV_KIND_STR, .len = WAFFLE_STRLEN_NUL, .value = { .str = (s_) } }
/* A string field of `n_` bytes at `s_`. */
#define WAFFLE_KV_STRN(key_, s_, n_) \
  { .key = (key_), .kind = WAFFLE_KV_KIND_STR, .len = (uint32_t)(n_), .value = { .str = (s_) } }
/* A causal link to a span (a waffle_span_id_t of any thread or process); null ids are skipped. */
#define WAFFLE_KV_CAUSE_SPAN(id_) \
  { .kind = WAFFLE_KV_KIND_CAUSE, .value = { .u64 = waffle__span_id_bits(id_) } }
/* A causal link to an event (a waffle_event_id_t of any thread or process). */
#define WAFFLE_KV_CAUSE_EVENT(id_) \
  { .kind = WAFFLE_KV_KIND_CAUSE, .value = { .u64 = waffle__event_id_bits(id_) } }
/* A correlation: spans and events of any process with the same key and value are one group,
 * such as the same collective on every rank (key: a string literal; value: an integer). A key
 * ending in '>' marks a cause and one ending in '<' an effect: with the same stem and value,
 * every effect was caused by every cause, such as a message's send ("msg>") and receive
 * ("msg<"). */
#define WAFFLE_KV_CORRELATE(key_, v_) \
  { .key = (key_), .kind = WAFFLE_KV_KIND_CORRELATE, .value = { .u64 = (uint64_t)(v_) } }

/* ---- spans and events ------------------------------------------------------------------- */

/* WAFFLE_SPAN(name, key-values...): opens a span that ends when the enclosing block exits. It
 * is a declaration: put it where a declaration may go. */
#define WAFFLE_SPAN(...) WAFFLE_SPAN_VAR(WAFFLE__CAT(waffle__span_, __COUNTER__), __VA_ARGS__)

/* WAFFLE_SPAN_VAR(var, name, key-values...): WAFFLE_SPAN whose guard is the variable `var`, a
 * waffle_span_t: `var.id` is the span's id (for WAFFLE_KV_CAUSE_SPAN or contexts). */
#define WAFFLE_SPAN_VAR(var, ...)                                                              \
  static waffle_callsite_t WAFFLE__CAT(var, _callsite) =                                      \
      WAFFLE__CALLSITE(WAFFLE__HEAD(__VA_ARGS__));                                             \
  const waffle_kv_t WAFFLE__CAT(var, _kvs)[] = WAFFLE__KVS(__VA_ARGS__);                       \
  waffle_span_t var __attribute__((cleanup(waffle__span_end), unused)) = waffle_span_begin_t( \
      &waffle__thread, &WAFFLE__CAT(var, _callsite), WAFFLE__CAT(var, _kvs),                  \
      WAFFLE__COUNT(WAFFLE__CAT(var, _kvs)))

/* WAFFLE_EVENT(name, key-values...): records an event; evaluates to its waffle_event_id_t, which
 * may be ignored (a bare `WAFFLE_EVENT("x");` is a statement without warnings). */
#define WAFFLE_EVENT(...) WAFFLE__EVENT(WAFFLE__CAT(waffle__event_, __COUNTER__), __VA_ARGS__)

/* WAFFLE_TRACK_SLICE(track, name, begin, end, launched_by, key-values...): records a slice of
 * the device track `track` (a waffle_track_t) from `begin` to `end` in its clock's ticks,
 * launched by the span or event whose id is `launched_by` (`span.id.id`, `event.id`; 0 for
 * none); evaluates to its waffle_event_id_t, which may be ignored. */
#define WAFFLE_TRACK_SLICE(track_, name_, begin_, end_, ...) \
  WAFFLE__TRACK_SLICE(WAFFLE__CAT(waffle__slice_, __COUNTER__), track_, name_, begin_, end_, __VA_ARGS__)

/* WAFFLE_CONTEXT_SCOPE(ctx): enters the waffle_context_t lvalue `ctx` (from another thread,
 * or another process's traceparent) until the enclosing block exits. */
#define WAFFLE_CONTEXT_SCOPE(ctx)                                                             \
  waffle_context_guard_t WAFFLE__CAT(waffle__context_, __COUNTER__)                          \
      __attribute__((cleanup(waffle_context_exit), unused)) = waffle_context_enter(&(ctx))

/* ---- implementation --------------------------------------------------------------------- */

#define WAFFLE__CAT_(a, b) a##b
#define WAFFLE__CAT(a, b) WAFFLE__CAT_(a, b)
/* The first argument, and the others: a sentinel is appended so that neither is ever empty
 * (an empty __VA_ARGS__ is not ISO C11). */
#define WAFFLE__HEAD(...) WAFFLE__HEAD_(__VA_ARGS__, ~)
#define WAFFLE__HEAD_(first, ...) first
#define WAFFLE__TAIL(first, ...) __VA_ARGS__
#define WAFFLE__KVS(...) { WAFFLE__TAIL(__VA_ARGS__, { .kind = 0 }) }
/* Key-values in the array, not counting the sentinel. */
#define WAFFLE__COUNT(kvs) (sizeof(kvs) / sizeof((kvs)[0]) - 1)
#define WAFFLE__CALLSITE(name_) \
  { .name = (name_), .function = __func__, .file = __FILE__, .line = (uint32_t)__LINE__, .cached_id = 0 }

#define WAFFLE__EVENT(var, ...)                                                                \
  (__extension__({                                                                             \
    static waffle_callsite_t WAFFLE__CAT(var, _callsite) =                                    \
        WAFFLE__CALLSITE(WAFFLE__HEAD(__VA_ARGS__));                                           \
    const waffle_kv_t WAFFLE__CAT(var, _kvs)[] = WAFFLE__KVS(__VA_ARGS__);                     \
    waffle_event(&WAFFLE__CAT(var, _callsite), WAFFLE__CAT(var, _kvs),                         \
                 WAFFLE__COUNT(WAFFLE__CAT(var, _kvs)));                                       \
  }))

#define WAFFLE__TRACK_SLICE(var, track_, name_, begin_, end_, ...)                            \
  (__extension__({                                                                             \
    const waffle_kv_t WAFFLE__CAT(var, _kvs)[] = WAFFLE__KVS(__VA_ARGS__);                     \
    waffle_track_slice((track_), (name_), WAFFLE_STRLEN_NUL, (begin_), (end_),                 \
                       (uint64_t)(WAFFLE__HEAD(__VA_ARGS__)), WAFFLE__CAT(var, _kvs),          \
                       WAFFLE__COUNT(WAFFLE__CAT(var, _kvs)));                                 \
  }))

/* This thread's handle to its recording state, cached by waffle_span_begin_t on first use. A
 * thread-local of the program itself (one per translation unit), reached at a fixed offset from
 * the thread pointer, where the library's own thread-local in libwaffle.so costs a call of
 * __tls_get_addr. Only waffle writes it. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
static _Thread_local void *waffle__thread __attribute__((unused));
#else
static __thread void *waffle__thread __attribute__((unused));
#endif
/* WAFFLE_SPAN's cleanup: ends the span through the same cache. */
static inline void waffle__span_end(waffle_span_t *span) { (void)waffle_span_end_t(&waffle__thread, span); }

/* Type-checked id access: a span id where an event id belongs does not compile. */
static inline uint64_t waffle__span_id_bits(waffle_span_id_t id) { return id.id; }
static inline uint64_t waffle__event_id_bits(waffle_event_id_t id) { return id.id; }

#endif /* __cplusplus */

/* WAFFLE_STEP(n): a training or simulation step until the enclosing block exits: a span named
 * "step" whose first field "step" is the number n (as uint64_t). Exporters draw steps on a
 * track of their own. */
#ifndef WAFFLE_STEP
#define WAFFLE_STEP(n) WAFFLE_SPAN("step", WAFFLE_KV_U64("step", (n)))
#endif

/* ---- the original examples' short names ------------------------------------------------- */

#ifndef WAFFLE_NO_SHORT_NAMES
#define SPAN(...) WAFFLE_SPAN(__VA_ARGS__)
#define SPAN_VAR(...) WAFFLE_SPAN_VAR(__VA_ARGS__)
#define KV_I64(key_, v_) WAFFLE_KV_I64(key_, v_)
#define KV_U64(key_, v_) WAFFLE_KV_U64(key_, v_)
#define KV_F64(key_, v_) WAFFLE_KV_F64(key_, v_)
#define KV_BOOL(key_, v_) WAFFLE_KV_BOOL(key_, v_)
#define KV_STR(key_, s_) WAFFLE_KV_STR(key_, s_)
#define KV_STRN(key_, s_, n_) WAFFLE_KV_STRN(key_, s_, n_)
#define KV_CAUSE_SPAN(id_) WAFFLE_KV_CAUSE_SPAN(id_)
#define KV_CAUSE_EVENT(id_) WAFFLE_KV_CAUSE_EVENT(id_)
#define KV_CORRELATE(key_, v_) WAFFLE_KV_CORRELATE(key_, v_)
#endif /* WAFFLE_NO_SHORT_NAMES */

#endif /* WAFFLE_MACROS_H */
