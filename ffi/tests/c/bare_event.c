/* WAFFLE_EVENT as a bare statement, its id ignored: no warning (unused value, [[nodiscard]])
 * in C and, compiled with -x c++, in C++, with GCC and Clang, with and without -pedantic.
 * ffi/tests/c_api.rs only compiles it. */
#include "waffle_macros.h"

int main(int argc, char **argv) {
  (void)argv;
  WAFFLE_EVENT("bare");
  WAFFLE_EVENT("bare with key-values", WAFFLE_KV_I64("argc", argc), KV_BOOL("many", argc > 1));
  if (argc > 2) WAFFLE_EVENT("in an if");
  for (int i = 0; i < argc; i++) WAFFLE_EVENT("in a loop", KV_I64("i", i));
  SPAN("span", KV_I64("argc", argc));
  WAFFLE_EVENT("in a span");
  return 0;
}
