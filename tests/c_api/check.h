/* The C test programs' one assertion: CHECK(cond) prints the failed condition with its place and
 * counts it in `failures`; a program exits non-zero when any failed. */
#ifndef SHARDJIT_TESTS_C_API_CHECK_H_
#define SHARDJIT_TESTS_C_API_CHECK_H_

#include <stdio.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#endif
