/* A fatal check for the C test programs: prints the failed condition and exits with 1. */
#ifndef WAFFLE_TEST_CHECK_H
#define WAFFLE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

/* A call that must return WAFFLE_OK; says which status it got otherwise. */
#define CHECK_OK(call)                                                              \
  do {                                                                              \
    waffle_status_t check_status_ = (call);                                         \
    if (check_status_ != WAFFLE_OK) {                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
              waffle_status_str(check_status_));                                   \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

#endif
