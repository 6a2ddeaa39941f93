/* The C side of benches/benches/ffi.rs: spans through waffle's C macros, exactly as a C
 * program writes them. Built three times by the bench: as C, linked with libwaffle.so and with
 * libwaffle.a, and as C++ (where the macros are waffle.hpp's), linked with libwaffle.so; and
 * driven over a pipe: each line on stdin is "<bench> <n>", and the program
 * answers with the nanoseconds its loop of n spans took, timed around the loop only. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "waffle_macros.h"

/* n spans without fields, back to back. */
__attribute__((noinline)) static void span(uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    WAFFLE_SPAN("x");
  }
}

/* n spans with two fields (an integer that changes, a float). */
__attribute__((noinline)) static void span_2_fields(uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    WAFFLE_SPAN("x2", WAFFLE_KV_U64("n", i), WAFFLE_KV_F64("x", 1.5));
  }
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(void) {
  waffle_status_t status = waffle_start("/dev/null");
  if (status != WAFFLE_OK) {
    fprintf(stderr, "waffle_start: %s\n", waffle_status_str(status));
    return 1;
  }
  char bench[32];
  unsigned long long n;
  while (scanf("%31s %llu", bench, &n) == 2) {
    void (*run)(uint64_t) = strcmp(bench, "span") == 0 ? span : span_2_fields;
    uint64_t start = now_ns();
    run(n);
    printf("%llu\n", (unsigned long long)(now_ns() - start));
    fflush(stdout);
  }
  return waffle_stop() == WAFFLE_OK ? 0 : 1;
}
