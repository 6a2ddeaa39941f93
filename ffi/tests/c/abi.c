/* Compiled by ffi/tests/c_api.rs against a copy of waffle.h whose WAFFLE_ABI_VERSION is not the
 * library's, as a program built with another release's header would be: starting must fail
 * with WAFFLE_ERR_ABI_MISMATCH and create no file.
 *
 * usage: abi TRACE.bin */
#include "check.h"
#include "waffle.h"

int main(int argc, char **argv) {
  CHECK(argc == 2);
  CHECK(waffle_abi_version() != WAFFLE_ABI_VERSION);
  CHECK(waffle_check_abi() == WAFFLE_ERR_ABI_MISMATCH);
  CHECK(waffle_start(argv[1]) == WAFFLE_ERR_ABI_MISMATCH);
  waffle_config_t cfg = WAFFLE_CONFIG_INIT(argv[1]);
  CHECK(waffle_start_with(&cfg) == WAFFLE_ERR_ABI_MISMATCH);
  CHECK(waffle_last_status() == WAFFLE_ERR_ABI_MISMATCH);
  CHECK(waffle_stop() == WAFFLE_ERR_NOT_STARTED);
  printf("ok\n");
  return 0;
}
