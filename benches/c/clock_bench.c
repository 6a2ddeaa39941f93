/* What one clock read costs on this machine, the floor under every recorded span: `benches/mpi.sh`
 * prints it beside its runs. Times READS back-to-back reads of each clock, three rounds, and
 * prints ns per read of each, the best round:
 *
 *   rdtsc          the time-stamp counter as waffle's clock reads it (core/src/clock.rs);
 *   lfence+rdtsc   the same behind a fence, so it cannot start before earlier instructions end;
 *   rdtscp         the counter with the processor id, which waits for earlier instructions too;
 *   clock_gettime  CLOCK_MONOTONIC through the vDSO.
 *
 * usage: clock_bench [READS]   (default 20000000; x86_64 only) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static double ns_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static volatile uint64_t sink;

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000000;
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  for (int round = 0; round < 3; round++) {
    uint64_t sum = 0;
    unsigned aux;
    struct timespec ts;
    double t0 = ns_now();
    for (long i = 0; i < n; i++) sum += __rdtsc();
    double t1 = ns_now();
    for (long i = 0; i < n; i++) {
      _mm_lfence();
      sum += __rdtsc();
    }
    double t2 = ns_now();
    for (long i = 0; i < n; i++) sum += __rdtscp(&aux);
    double t3 = ns_now();
    for (long i = 0; i < n; i++) {
      clock_gettime(CLOCK_MONOTONIC, &ts);
      sum += (uint64_t)ts.tv_nsec;
    }
    double t4 = ns_now();
    sink = sum;
    double each[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
    for (int k = 0; k < 4; k++)
      if (each[k] / (double)n < best[k]) best[k] = each[k] / (double)n;
  }
  printf("ns per read: rdtsc %.1f, lfence+rdtsc %.1f, rdtscp %.1f, clock_gettime %.1f\n", best[0], best[1], best[2],
         best[3]);
  return 0;
}
