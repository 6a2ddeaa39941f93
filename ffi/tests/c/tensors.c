/* Tensor fingerprints and steps from C: a step around tensors of several element types, the
 * calls' refusals, and fingerprints turned off. ffi/tests/tensors.rs decodes the trace and
 * compares every field with values it computes itself from the same data.
 *
 * usage: tensors TRACE.bin (run with WAFFLE_TENSORS=1) */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "waffle_macros.h"

int main(int argc, char **argv) {
  CHECK(argc == 2);
  CHECK_OK(waffle_start(argv[1]));
  const float act[6] = {0.5f, -0.25f, NAN, INFINITY, -INFINITY, 2.0f};
  const int64_t shape[2] = {2, 3};
  const uint16_t halves[3] = {0x3fc0, 0xc080, 0x0000}; /* bf16 1.5, -4.0, 0.0 */
  const int32_t ids[4] = {7, -9, 3, 0};
  const double one = 3.0;
  for (int s = 0; s < 2; s++) {
    WAFFLE_STEP(s + 10);
    waffle_event_id_t a = waffle_tensor_f32("blk0/act", act, 6, shape, 2);
    CHECK(a.id != 0);
    CHECK(waffle_tensor_bf16("halves", halves, 3, NULL, 0).id != 0);
    CHECK(waffle_tensor_i32("ids", ids, 4, NULL, 0).id != 0);
    CHECK(waffle_tensor_f64("scalar", &one, 1, shape, 0).id != 0);
  }
  /* Refusals: a null id and the reason. */
  const int64_t negative[1] = {-1};
  CHECK(waffle_tensor_f32(NULL, act, 6, NULL, 0).id == 0);
  CHECK(waffle_last_status() == WAFFLE_ERR_NULL);
  CHECK(waffle_tensor_f32("x", NULL, 6, NULL, 0).id == 0);
  CHECK(waffle_last_status() == WAFFLE_ERR_NULL);
  CHECK(waffle_tensor_f32("x", act, 6, negative, 1).id == 0);
  CHECK(waffle_last_status() == WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_tensor_u16("x", (const uint16_t *)((const char *)halves + 1), 1, NULL, 0).id == 0);
  CHECK(waffle_last_status() == WAFFLE_ERR_INVALID_ARGUMENT);
  CHECK(waffle_tensor_u8("empty", NULL, 0, NULL, 0).id != 0);
  /* Off: nothing recorded, nothing read. */
  waffle_set_tensors(false);
  CHECK(waffle_tensor_f32(NULL, NULL, 6, NULL, 0).id == 0);
  CHECK(waffle_last_status() == WAFFLE_OK);
  CHECK_OK(waffle_stop());
  puts("ok");
  return 0;
}
