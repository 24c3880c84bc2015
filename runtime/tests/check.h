/* Minimal test helpers for the runtime's C tests. */
#ifndef TPURT_TEST_CHECK_H
#define TPURT_TEST_CHECK_H
#include <stdio.h>

/* Atomic: checks run on worker threads too (teams, stream commands). */
static int check_failures, check_count;
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    __atomic_add_fetch(&check_count, 1, __ATOMIC_RELAXED);                 \
    if (!(cond)) {                                                         \
      __atomic_add_fetch(&check_failures, 1, __ATOMIC_RELAXED);            \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)
#define CHECK_DONE()                                                       \
  (printf("%d passed, %d failed\n", check_count - check_failures, check_failures), check_failures != 0)
#endif
