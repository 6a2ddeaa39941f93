/* A C library recording through libwaffle.so, loaded by a Rust program that records through its
 * own copy of waffle (tests/rust_program.rs): both record into one session and one file. */
#include "waffle_macros.h"

void plugin_work(long long n) {
  WAFFLE_SPAN("c_work", WAFFLE_KV_I64("n", n));
  WAFFLE_EVENT("c_done", WAFFLE_KV_I64("n", n));
}

int plugin_start(const char *path) { return waffle_start(path); }

int plugin_stop(void) { return waffle_stop(); }
