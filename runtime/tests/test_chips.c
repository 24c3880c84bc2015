/* Slice configuration from the TPU launch variables: each case runs in a child process,
 * since a process reads its configuration once. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

static int run_child(const char* type, const char* visible, int expect_count, const char* expect_gen,
                     const char* expect_topology) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TPU_ACCELERATOR_TYPE", type, 1);
    if (visible) setenv("TPU_VISIBLE_CHIPS", visible, 1);
    else unsetenv("TPU_VISIBLE_CHIPS");
    if (expect_count < 0) _exit(tpurt_init() == TPURT_ERR_VALUE && strstr(tpurt_last_error(), type) ? 0 : 1);
    tpurt_chip_info i = {.struct_size = sizeof i};
    if (tpurt_device_count() != expect_count) _exit(2);
    if (tpurt_chip_get_info(expect_count - 1, &i) != TPURT_OK) _exit(3);
    if (strcmp(i.generation, expect_gen) != 0) _exit(4);
    if (expect_topology && strcmp(i.topology, expect_topology) != 0) _exit(5);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

/* A process started by a launcher (LOCAL_RANK / LOCAL_WORLD_SIZE, as torchrun sets them): it sees one
 * chip, tpu:0, whose global index is expect_chip; expect_chip < 0: a VALUE error naming `expect_in_error`. */
static int run_launched(const char* type, const char* worker, const char* visible, const char* rank, const char* size,
                        int expect_chip, const char* expect_in_error) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TPU_ACCELERATOR_TYPE", type, 1);
    if (worker) setenv("TPU_WORKER_ID", worker, 1);
    else unsetenv("TPU_WORKER_ID");
    if (visible) setenv("TPU_VISIBLE_CHIPS", visible, 1);
    else unsetenv("TPU_VISIBLE_CHIPS");
    setenv("LOCAL_RANK", rank, 1);
    setenv("LOCAL_WORLD_SIZE", size, 1);
    if (expect_chip < 0)
      _exit(tpurt_init() == TPURT_ERR_VALUE && strstr(tpurt_last_error(), expect_in_error) &&
                    strstr(tpurt_last_error(), type) ? 0 : 1);
    tpurt_chip_info i = {.struct_size = sizeof i};
    if (tpurt_device_count() != 1) _exit(2);
    if (tpurt_chip_get_info(0, &i) != TPURT_OK || i.global_index != expect_chip) _exit(3);
    if (tpurt_device_set(1) != TPURT_ERR_VALUE) _exit(4);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

int main(void) {
  int r;
  CHECK((r = run_child("v5litepod-8", NULL, 8, "v5e", "2x4")) == 0, "v5litepod-8: %d", r);
  CHECK((r = run_child("v6e-4", NULL, 4, "v6e", "2x2")) == 0, "v6e-4: %d", r);
  CHECK((r = run_child("v6e-4", "2", 1, "v6e", NULL)) == 0, "TPU_VISIBLE_CHIPS narrows: %d", r);
  CHECK((r = run_child("v5p-8", NULL, 4, "v5p", NULL)) == 0, "v5p counts tensorcores: %d", r);
  CHECK((r = run_child("tpu7x-8", NULL, 4, "v7", NULL)) == 0, "tpu7x-8 is 4 chips: %d", r);
  CHECK((r = run_child("v6e-64", NULL, 8, "v6e", "8x8")) == 0, "a host sees its 8 chips: %d", r);
  CHECK((r = run_child("v9z-8", NULL, -1, NULL, NULL)) == 0, "unknown type rejected: %d", r);
  CHECK((r = run_child("v6e-4", "7", -1, NULL, NULL)) == 0, "bad visible chip rejected: %d", r);
  CHECK((r = run_child("v6e-3", NULL, -1, NULL, NULL)) == 0, "a size v6e does not come in rejected: %d", r);
  CHECK((r = run_child("v6e-9", NULL, -1, NULL, NULL)) == 0, "v6e-9 rejected (was 8 chips): %d", r);
  CHECK((r = run_child("v5p-12", NULL, -1, NULL, NULL)) == 0, "6 chips of v5p rejected: %d", r);
  CHECK((r = run_child("v4-384", NULL, 4, "v4", "4x4x12")) == 0, "192 chips: three 4x4x4 cubes: %d", r);
  CHECK((r = run_launched("v6e-8", NULL, NULL, "5", "8", 5, NULL)) == 0, "torchrun rank 5 sees chip 5 as tpu:0: %d", r);
  CHECK((r = run_launched("v6e-8", NULL, NULL, "1", "2", 1, NULL)) == 0, "2 ranks on 8 chips: rank 1 has chip 1: %d", r);
  CHECK((r = run_launched("v5p-16", "1", NULL, "3", "4", 7, NULL)) == 0, "host 1's rank 3 is chip 7: %d", r);
  CHECK((r = run_launched("v6e-8", NULL, "6", "1", "2", 6, NULL)) == 0, "TPU_VISIBLE_CHIPS wins: %d", r);
  CHECK((r = run_launched("v6e-4", NULL, NULL, "0", "8", -1, "LOCAL_WORLD_SIZE='8'")) == 0, "8 ranks on 4 chips: %d", r);
  CHECK((r = run_launched("v6e-4", NULL, NULL, "x", "2", -1, "LOCAL_RANK='x'")) == 0, "malformed LOCAL_RANK: %d", r);
  CHECK((r = run_launched("v6e-4", NULL, NULL, "2", "2", -1, "LOCAL_RANK='2'")) == 0, "rank beyond the count: %d", r);
  return CHECK_DONE();
}
