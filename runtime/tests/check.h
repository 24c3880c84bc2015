/* Minimal test helpers for the runtime's C tests. */
#ifndef TPURT_TEST_CHECK_H
#define TPURT_TEST_CHECK_H
#include <stdio.h>

static int check_failures, check_count;
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    check_count++;                                                         \
    if (!(cond)) {                                                         \
      check_failures++;                                                    \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)
#define CHECK_DONE()                                                       \
  (printf("%d passed, %d failed\n", check_count - check_failures, check_failures), check_failures != 0)
#endif
