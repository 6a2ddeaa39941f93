/* WAFFLE_NO_SHORT_NAMES: the header defines none of the short names, so a program may use them
 * for its own macros and functions; the WAFFLE_ names still work. Compiled as C and as C++;
 * ffi/tests/c_api.rs also compiles it without the first line and expects that to fail. */
#define WAFFLE_NO_SHORT_NAMES
#include "waffle_macros.h"

#include <stdio.h>

/* This program's own names, which the short names would clash with. */
#define SPAN(x) ((x) * 2)
#define KV_I64 "the program's own KV_I64"
static int KV_CAUSE_EVENT(int x) { return x + 1; }

int main(void) {
  WAFFLE_SPAN("span", WAFFLE_KV_I64("answer", SPAN(21)), WAFFLE_KV_STR("text", KV_I64));
  if (KV_CAUSE_EVENT(1) != 2) return 1;
  printf("ok\n");
  return 0;
}
