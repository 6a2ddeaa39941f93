// The C macros' key-values from C++: waffle_macros.h compiled as C++ gives waffle.hpp's
// WAFFLE_SPAN and WAFFLE_EVENT, which take WAFFLE_KV_* and the short KV_* mixed with
// "key", value pairs and waffle::CausedBy / waffle::Correlate tags. Ids cross between the C
// and the C++ types both ways. ffi/tests/c_api.rs decodes the trace and compares it with the
// exact tree.
//
// usage: c_macros TRACE.bin
#include <cstdint>
#include <cstdio>

#include "check.h"
#include "waffle_macros.h"

namespace {

// One callsite run three times: the first run registers the schema of its mixed key-values,
// the others take the cached fast path.
void loop_body(int i) {
  SPAN("loop", KV_I64("i", i), "twice", 2 * i, WAFFLE_KV_CORRELATE("round", i));
  if (i == 1) WAFFLE_EVENT("odd one", KV_BOOL("odd", i % 2), "i", i);  // a bare statement
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc == 2);
  waffle::Session session(argv[1]);
  CHECK(session.ok());
  {
    // A C id type holding C++ WAFFLE_EVENT's waffle::EventId, as C code compiled as C++ does.
    waffle_event_id_t cause = {0};
    cause = WAFFLE_EVENT("cause", KV_STR("why", "testing"), "n", 1);
    CHECK(cause.id != 0);
    waffle::EventId other = WAFFLE_EVENT("other");
    CHECK(!other.is_null());

    SPAN_VAR(outer, "outer", KV_I64("neg", -5), "count", 3u, KV_U64("big", UINT64_MAX),
             KV_CAUSE_EVENT(cause), WAFFLE_KV_F64("x", 1.5f), "name", "abc", KV_BOOL("ok", 2),
             KV_STRN("s", "abcdef", 3), WAFFLE_KV_STR("none", NULL));
    waffle_span_id_t outer_id = outer.id();
    CHECK(outer_id.id == outer.id().value() && outer_id.id != 0);
    {
      WAFFLE_SPAN("inner", waffle::CausedBy(other), KV_CAUSE_SPAN(outer_id), "x", 2.5,
                  KV_CORRELATE("round", 7));
      WAFFLE_EVENT("typed", KV_CAUSE_EVENT(other), WAFFLE_KV_CAUSE_SPAN(outer.id()),
                   waffle::Correlate("round", 7));
    }
    for (int i = 0; i < 3; i++) loop_body(i);
  }
  std::printf("ok\n");
  return 0;
}
