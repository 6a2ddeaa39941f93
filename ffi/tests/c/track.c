/* Device tracks from C: a track in its own clock (1 MHz), two syncs, slices launched by a span
 * and by an event (through the function and WAFFLE_TRACK_SLICE), a second track, garbage and
 * null arguments. ffi/tests/track.rs decodes the
 * trace and checks where the slices land on the host's time.
 *
 * usage: track TRACE.bin */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "waffle_macros.h"

/* A device clock: 1 tick per microsecond of CLOCK_MONOTONIC, plus an offset. */
static uint64_t device_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 5000000u + (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void spin_us(uint64_t us) {
  uint64_t end = device_now() + us;
  while (device_now() < end) {
  }
}

int main(int argc, char **argv) {
  CHECK(argc == 2);
  /* No session yet: the null track, recording nothing. */
  waffle_track_t idle = waffle_track_new("idle", 1000);
  CHECK(idle.id == 0);
  CHECK_OK(waffle_start(argv[1]));
  CHECK(waffle_track_new(NULL, 1).id == 0);
  CHECK(waffle_last_status() == WAFFLE_ERR_NULL);

  waffle_track_t gpu = waffle_track_new("GPU 0", 1000000);
  CHECK(gpu.id != 0);
  CHECK(waffle_track_sync(gpu, device_now()).id != 0);
  uint64_t b0, e0, b1, e1;
  waffle_span_id_t launcher;
  {
    WAFFLE_SPAN_VAR(launch, "launch");
    launcher = launch.id;
    b0 = device_now();
    spin_us(2000);
    e0 = device_now();
  }
  /* What the device measured, to compare with the mapped duration (a busy machine may stretch
   * the 2 ms spin). */
  waffle_kv_t kvs[] = {WAFFLE_KV_U64("bytes", 4096), WAFFLE_KV_U64("device_us", e0 - b0)};
  CHECK(waffle_track_slice(gpu, "kernel", WAFFLE_STRLEN_NUL, b0, e0, launcher.id, kvs, 2).id != 0);
  waffle_event_id_t copy = WAFFLE_EVENT("copy issued");
  b1 = device_now();
  spin_us(1000);
  e1 = device_now();
  CHECK(WAFFLE_TRACK_SLICE(gpu, "memcpy", b1, e1, copy.id).id != 0);
  /* The macro with key-values: a third slice, on a track of its own. */
  waffle_track_t dma = waffle_track_new("DMA", 1000000);
  CHECK(waffle_track_sync(dma, device_now()).id != 0);
  (void)WAFFLE_TRACK_SLICE(dma, "copy", e1, e1 + 10, copy.id, WAFFLE_KV_U64("bytes", 64),
                           WAFFLE_KV_STR("dir", "h2d"));
  spin_us(1000);
  CHECK(waffle_track_sync(gpu, device_now()).id != 0);

  /* Bad arguments record nothing and say why. */
  CHECK(waffle_track_slice(gpu, NULL, WAFFLE_STRLEN_NUL, 1, 2, 0, NULL, 0).id == 0);
  CHECK(waffle_last_status() == WAFFLE_ERR_NULL);
  CHECK(waffle_track_slice(gpu, "x", WAFFLE_STRLEN_NUL, 1, 2, 0, NULL, 3).id == 0);
  CHECK(waffle_track_slice(idle, "x", WAFFLE_STRLEN_NUL, 1, 2, 0, NULL, 0).id == 0);
  CHECK(waffle_track_sync(idle, 1).id == 0);
  waffle_track_t freed = gpu;
  waffle_track_free(&freed);
  CHECK(freed.id == 0);
  waffle_track_free(NULL);

  CHECK_OK(waffle_stop());
  printf("ok\n");
  return 0;
}
