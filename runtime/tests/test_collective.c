/* Collectives between processes (collective.c): four forked ranks on one segment run every
 * collective against results computed here, across several staging rounds; a killed rank, a rank
 * that stops calling and mismatched calls fail on every other rank, and no segment is left. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

#define N 4

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A value every rank can compute for (rank, index). */
static float val(int rank, int64_t i) { return (float)((rank + 1) * 0.5 + (i % 97) * 0.25 - 7); }

typedef void (*rank_body)(tpurt_comm* c, int rank, int* failures);

#define RCHECK(cond, ...)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      (*failures)++;                                                            \
      fprintf(stderr, "rank %d: %s:%d: %s: ", rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                             \
      fprintf(stderr, "\n");                                                    \
    }                                                                           \
  } while (0)

/* Runs body on N forked ranks; returns each rank's exit status (failures, or 100+signal). */
static void run_ranks(rank_body body, double timeout_s, int status_out[N]) {
  char name[64];
  if (tpurt_comm_create(N, name, sizeof name)) {
    fprintf(stderr, "create: %s\n", tpurt_last_error());
    exit(1);
  }
  pid_t pids[N];
  int opened[2];
  if (pipe(opened)) exit(1);
  for (int r = 0; r < N; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      tpurt_comm* c;
      tpurt_status s = tpurt_comm_open(name, r, N, timeout_s, "test group", &c);
      if (write(opened[1], "", 1) != 1) _exit(91);
      if (s) {
        fprintf(stderr, "open: %s\n", tpurt_last_error());
        _exit(90);
      }
      int failures = 0;
      body(c, r, &failures);
      tpurt_comm_destroy(c);
      _exit(failures > 80 ? 80 : failures);
    }
  }
  /* rank 0's job in tpu_dist: unlink once all have mapped it */
  char byte;
  for (int r = 0; r < N; r++)
    if (read(opened[0], &byte, 1) != 1) exit(1);
  close(opened[0]), close(opened[1]);
  tpurt_comm_unlink(name);
  for (int r = 0; r < N; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    status_out[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
  }
}

static void collectives_body(tpurt_comm* c, int rank, int* failures) {
  /* big enough for several staging rounds (4 MiB slots) */
  const int64_t n = (3 << 20) + 123;
  float* in = malloc(n * sizeof *in);
  float* out = malloc(n * N * sizeof *out);
  for (int64_t i = 0; i < n; i++) in[i] = val(rank, i);
  /* all_reduce sum, in rank order */
  RCHECK(tpurt_all_reduce(c, in, out, n, TPURT_F32, TPURT_RED_SUM, 1) == TPURT_OK, "%s", tpurt_last_error());
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = val(0, i);
    for (int r = 1; r < N; r++) want += val(r, i);
    bad += out[i] != want;
  }
  RCHECK(!bad, "all_reduce sum: %d wrong", bad);
  /* in place, max, avg, premul_sum */
  memcpy(out, in, n * sizeof *in);
  RCHECK(tpurt_all_reduce(c, out, out, n, TPURT_F32, TPURT_RED_MAX, 1) == TPURT_OK, "%s", tpurt_last_error());
  bad = 0;
  for (int64_t i = 0; i < n; i++) bad += out[i] != val(N - 1, i);
  RCHECK(!bad, "all_reduce max in place: %d wrong", bad);
  RCHECK(tpurt_all_reduce(c, in, out, 1000, TPURT_F32, TPURT_RED_PREMUL_SUM, 0.5) == TPURT_OK, "%s", tpurt_last_error());
  bad = 0;
  for (int64_t i = 0; i < 1000; i++) {
    float want = val(0, i) * 0.5f;
    for (int r = 1; r < N; r++) want += val(r, i) * 0.5f;
    bad += out[i] != want;
  }
  RCHECK(!bad, "premul_sum: %d wrong", bad);
  /* bfloat16 sums in float32 and rounds once */
  uint16_t hb[8], hout[8];
  for (int i = 0; i < 8; i++) hb[i] = tpurt_f32_to_bf16(i == 0 ? (rank == 0 ? 256.0f : 1.0f) : val(rank, i));
  RCHECK(tpurt_all_reduce(c, hb, hout, 8, TPURT_BF16, TPURT_RED_SUM, 1) == TPURT_OK, "%s", tpurt_last_error());
  RCHECK(tpurt_bf16_to_f32(hout[0]) == 260.0f, "bf16 256+1+1+1 = %g (rounding per add gives 256)", tpurt_bf16_to_f32(hout[0]));
  /* integers: product wraps as CPU's int32 does; bitwise or */
  int32_t iv[3] = {rank + 2, 1 << (rank * 8), 1 << 30}, iout[3];
  RCHECK(tpurt_all_reduce(c, iv, iout, 3, TPURT_I32, TPURT_RED_PRODUCT, 1) == TPURT_OK, "%s", tpurt_last_error());
  RCHECK(iout[0] == 2 * 3 * 4 * 5, "int product %d", iout[0]);
  RCHECK(tpurt_all_reduce(c, iv, iout, 2, TPURT_I32, TPURT_RED_BOR, 1) == TPURT_OK, "%s", tpurt_last_error());
  RCHECK(iout[1] == 0x01010101, "int bor %x", iout[1]);
  RCHECK(tpurt_all_reduce(c, in, out, 4, TPURT_F32, TPURT_RED_BXOR, 1) == TPURT_ERR_VALUE, "bxor on floats refused");
  /* reduce to root 2 */
  memset(out, 0, n * sizeof *out);
  RCHECK(tpurt_reduce(c, in, out, 5000, TPURT_F32, TPURT_RED_MIN, 1, 2) == TPURT_OK, "%s", tpurt_last_error());
  RCHECK(rank == 2 ? out[17] == val(0, 17) : out[17] == 0, "reduce min at root only: %g", out[17]);
  /* reduce_scatter: rank r gets block r summed */
  RCHECK(tpurt_reduce_scatter(c, out, out, 0, TPURT_F32, TPURT_RED_SUM, 1) == TPURT_OK, "empty reduce_scatter");
  int64_t per = n / N;
  RCHECK(tpurt_reduce_scatter(c, in, out, per, TPURT_F32, TPURT_RED_SUM, 1) == TPURT_OK, "%s", tpurt_last_error());
  bad = 0;
  for (int64_t i = 0; i < per; i++) {
    float want = val(0, rank * per + i);
    for (int r = 1; r < N; r++) want += val(r, rank * per + i);
    bad += out[i] != want;
  }
  RCHECK(!bad, "reduce_scatter: %d wrong", bad);
  /* all_gather, gather, scatter, broadcast over bytes */
  RCHECK(tpurt_all_gather(c, in, out, n * sizeof *in) == TPURT_OK, "%s", tpurt_last_error());
  bad = 0;
  for (int r = 0; r < N; r++)
    for (int64_t i = 0; i < n; i += 7) bad += out[r * n + i] != val(r, i);
  RCHECK(!bad, "all_gather: %d wrong", bad);
  memset(out, 0, n * N * sizeof *out);
  RCHECK(tpurt_gather(c, in, rank == 1 ? out : NULL, 4000, 1) == TPURT_OK, "%s", tpurt_last_error());
  if (rank == 1) RCHECK(out[1000 * 3 + 5] == val(3, 5), "gather %g", out[1000 * 3 + 5]);
  float* sc = malloc(N * 1000 * sizeof *sc);
  for (int i = 0; i < N * 1000; i++) sc[i] = (float)i;
  RCHECK(tpurt_scatter(c, rank == 3 ? sc : NULL, out, 4000, 3) == TPURT_OK, "%s", tpurt_last_error());
  RCHECK(out[7] == (float)(rank * 1000 + 7), "scatter %g", out[7]);
  memcpy(out, in, n * sizeof *in);
  RCHECK(tpurt_broadcast(c, out, n * sizeof *out, 0) == TPURT_OK, "%s", tpurt_last_error());
  bad = 0;
  for (int64_t i = 0; i < n; i += 3) bad += out[i] != val(0, i);
  RCHECK(!bad, "broadcast: %d wrong", bad);
  /* uneven all_to_all: rank r sends (r + p + 1) * 300000 bytes to p */
  int64_t sb[N], so[N], rb[N], ro[N], stot = 0, rtot = 0;
  for (int p = 0; p < N; p++) {
    sb[p] = (rank + p + 1) * 300000, so[p] = stot, stot += sb[p];
    rb[p] = (p + rank + 1) * 300000, ro[p] = rtot, rtot += rb[p];
  }
  unsigned char* a2a_in = malloc(stot);
  unsigned char* a2a_out = malloc(rtot);
  for (int p = 0; p < N; p++)
    for (int64_t i = 0; i < sb[p]; i++) a2a_in[so[p] + i] = (unsigned char)(rank * 31 + p * 7 + i);
  RCHECK(tpurt_all_to_all(c, a2a_in, sb, so, a2a_out, rb, ro) == TPURT_OK, "%s", tpurt_last_error());
  bad = 0;
  for (int r = 0; r < N; r++)
    for (int64_t i = 0; i < rb[r]; i++) bad += a2a_out[ro[r] + i] != (unsigned char)(r * 31 + rank * 7 + i);
  RCHECK(!bad, "all_to_all: %d wrong", bad);
  RCHECK(tpurt_barrier(c) == TPURT_OK, "%s", tpurt_last_error());
  /* a ring exchange both ways at once, larger than a channel: progressed together */
  int64_t pn = (3 << 20) / 4 + 11;
  float *sendbuf = malloc(pn * 4), *recvbuf = malloc(pn * 4), *recv2 = malloc(16);
  for (int64_t i = 0; i < pn; i++) sendbuf[i] = val(rank, i);
  float small = (float)rank;
  tpurt_p2p ops[4] = {{1, (rank + 1) % N, 0, sendbuf, pn * 4},
                      {0, (rank + N - 1) % N, 0, recvbuf, pn * 4},
                      {1, (rank + 1) % N, 0, &small, 4},
                      {0, (rank + N - 1) % N, 0, recv2, 4}};
  RCHECK(tpurt_p2p_run(c, ops, 4) == TPURT_OK, "%s", tpurt_last_error());
  int from = (rank + N - 1) % N;
  bad = 0;
  for (int64_t i = 0; i < pn; i++) bad += recvbuf[i] != val(from, i);
  RCHECK(!bad && recv2[0] == (float)from, "ring send/recv in order: %d wrong, small %g", bad, recv2[0]);
  RCHECK(tpurt_comm_seq(c) == 16, "collectives counted: %llu", (unsigned long long)tpurt_comm_seq(c));
  tpurt_comm_kind_stats st[TPURT_COMM_KIND_COUNT];
  tpurt_comm_get_stats(st);
  RCHECK(st[TPURT_COMM_ALL_REDUCE].calls == 6, "successful all_reduces counted: %lld", (long long)st[TPURT_COMM_ALL_REDUCE].calls);
  RCHECK(st[TPURT_COMM_ALL_GATHER].bytes == n * 4 * N, "all_gather bytes are its output: %lld", (long long)st[TPURT_COMM_ALL_GATHER].bytes);
  RCHECK(st[TPURT_COMM_ALL_REDUCE].ici_seconds > 0 && isnan(st[TPURT_COMM_BROADCAST].ici_seconds) &&
         st[TPURT_COMM_ALL_REDUCE].seconds > 0, "ICI estimate for modelled kinds only");
  RCHECK(st[TPURT_COMM_SEND_RECV].calls == 1 && st[TPURT_COMM_SEND_RECV].bytes == 2 * pn * 4 + 8, "send/recv batch counted");
  free(in), free(out), free(sc), free(a2a_in), free(a2a_out), free(sendbuf), free(recvbuf), free(recv2);
}

static int reported_failure(tpurt_status s, const char* must_contain) {
  return s == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), must_contain) != NULL;
}

/* rank 3 dies inside an all_reduce; the others must fail within seconds, naming it */
static void killed_body(tpurt_comm* c, int rank, int* failures) {
  float x[4] = {1, 2, 3, 4};
  RCHECK(tpurt_all_reduce(c, x, x, 4, TPURT_F32, TPURT_RED_SUM, 1) == TPURT_OK, "%s", tpurt_last_error());
  if (rank == 3) kill(getpid(), SIGKILL);
  double t0 = seconds();
  tpurt_status s = tpurt_all_reduce(c, x, x, 4, TPURT_F32, TPURT_RED_SUM, 1);
  RCHECK(reported_failure(s, "rank 3"), "%s", tpurt_last_error());
  RCHECK(strstr(tpurt_last_error(), "all_reduce #2") != NULL, "names the collective: %s", tpurt_last_error());
  RCHECK(seconds() - t0 < 5, "noticed after %.1f s", seconds() - t0);
  RCHECK(tpurt_barrier(c) == TPURT_ERR_RUNTIME, "the group stays broken");
}

/* rank 1 stops calling: the others fail at the timeout (1 s), naming rank 1 */
static void silent_body(tpurt_comm* c, int rank, int* failures) {
  if (rank == 1) {
    usleep(3000000);
    return;
  }
  double t0 = seconds();
  tpurt_status s = tpurt_barrier(c);
  RCHECK(reported_failure(s, "waiting for rank 1"), "%s", tpurt_last_error());
  RCHECK(seconds() - t0 >= 0.9 && seconds() - t0 < 3, "timed out after %.1f s", seconds() - t0);
}

/* rank 2 broadcasts while the others all_reduce; then sizes differ: every rank fails */
static void mismatch_body(tpurt_comm* c, int rank, int* failures) {
  float x[8] = {0};
  tpurt_status s = rank == 2 ? tpurt_broadcast(c, x, sizeof x, 0) : tpurt_all_reduce(c, x, x, 8, TPURT_F32, TPURT_RED_SUM, 1);
  RCHECK(reported_failure(s, "mismatched collectives"), "%s", tpurt_last_error());
  RCHECK(strstr(tpurt_last_error(), "broadcast #1") && strstr(tpurt_last_error(), "all_reduce #1"),
         "names both: %s", tpurt_last_error());
}

/* A host's part of a group spanning hosts (0.13): messages name the group-wide ranks, its
 * collectives are not counted, and a failure outside the segment ends every rank's wait. */
static void part_body(tpurt_comm* c, int rank, int* failures) {
  const int32_t names[N] = {4, 5, 6, 7};
  RCHECK(tpurt_comm_set_rank_names(c, names) == TPURT_OK, "%s", tpurt_last_error());
  tpurt_comm_set_counted(c, 0);
  tpurt_comm_kind_stats before[TPURT_COMM_KIND_COUNT], after[TPURT_COMM_KIND_COUNT];
  tpurt_comm_get_stats(before);
  float x[4] = {1, 2, 3, 4};
  RCHECK(tpurt_all_reduce(c, x, x, 4, TPURT_F32, TPURT_RED_SUM, 1) == TPURT_OK, "%s", tpurt_last_error());
  tpurt_comm_get_stats(after);
  RCHECK(after[TPURT_COMM_ALL_REDUCE].calls == before[TPURT_COMM_ALL_REDUCE].calls, "uncounted");
  double t0 = seconds();
  tpurt_status s = rank == 2 ? tpurt_comm_fail(c, "the hop to another host failed")
                             : tpurt_all_reduce(c, x, x, 4, TPURT_F32, TPURT_RED_SUM, 1);
  RCHECK(reported_failure(s, "the hop to another host failed"), "%s", tpurt_last_error());
  char named[32];
  snprintf(named, sizeof named, "on rank %d failed", names[rank]);
  RCHECK(strstr(tpurt_last_error(), named), "named %d: %s", names[rank], tpurt_last_error());
  RCHECK(seconds() - t0 < 5, "ended after %.1f s", seconds() - t0);
}

/* A rank that finishes a collective and then fails the group, or exits, must not fail the ranks
 * still finishing that collective (they already have every rank's part). Run many times: the
 * window is the few instructions between a waiting rank's checks. */
static int race_leaver;
static void finish_then_leave_body(tpurt_comm* c, int rank, int* failures) {
  float x[4] = {1, 2, 3, 4};
  RCHECK(tpurt_all_reduce(c, x, x, 4, TPURT_F32, TPURT_RED_SUM, 1) == TPURT_OK, "%s", tpurt_last_error());
  RCHECK(x[0] == 4 && x[3] == 16, "sum %g %g", x[0], x[3]);
  if (rank == race_leaver % N && race_leaver % 2) tpurt_comm_fail(c, "left after finishing");
}

static int count_segments(void) {
  int n = 0;
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  for (struct dirent* e; (e = readdir(d));) n += !strncmp(e->d_name, "tpu_dist.", 9);
  closedir(d);
  return n;
}

int main(void) {
  int before = count_segments(), st[N];
  run_ranks(collectives_body, 30, st);
  for (int r = 0; r < N; r++) CHECK(st[r] == 0, "collectives: rank %d exit %d", r, st[r]);
  run_ranks(killed_body, 600, st);
  CHECK(st[3] == 100 + SIGKILL, "rank 3 was killed: %d", st[3]);
  for (int r = 0; r < 3; r++) CHECK(st[r] == 0, "after a kill: rank %d exit %d", r, st[r]);
  run_ranks(silent_body, 1, st);
  for (int r = 0; r < N; r++) CHECK(st[r] == 0, "a silent rank: rank %d exit %d", r, st[r]);
  run_ranks(mismatch_body, 30, st);
  for (int r = 0; r < N; r++) CHECK(st[r] == 0, "mismatch: rank %d exit %d", r, st[r]);
  run_ranks(part_body, 600, st);
  for (int r = 0; r < N; r++) CHECK(st[r] == 0, "a host's part: rank %d exit %d", r, st[r]);
  for (race_leaver = 0; race_leaver < 64; race_leaver++) {
    run_ranks(finish_then_leave_body, 30, st);
    for (int r = 0; r < N; r++) CHECK(st[r] == 0, "leaving after all_reduce (run %d): rank %d exit %d", race_leaver, r, st[r]);
  }
  /* a segment its creator left before anyone unlinked it is removed by the next create */
  char name[64];
  pid_t child = fork();
  if (child == 0) _exit(tpurt_comm_create(N, name, sizeof name) != TPURT_OK);
  waitpid(child, NULL, 0);
  CHECK(count_segments() == before + 1, "the orphan exists");
  CHECK(tpurt_comm_create(N, name, sizeof name) == TPURT_OK, "%s", tpurt_last_error());
  tpurt_comm_unlink(name);
  CHECK(count_segments() == before, "no segments left: %d before, %d now", before, count_segments());
  /* no room for a segment (here: a file size limit) is a clean error, not a SIGBUS later */
  child = fork();
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1 << 20, 1 << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    tpurt_status s = tpurt_comm_create(N, name, sizeof name);
    _exit(s == TPURT_ERR_RUNTIME && strstr(tpurt_last_error(), "cannot reserve") ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a segment that cannot be reserved fails cleanly");
  CHECK(count_segments() == before, "and leaves nothing");
  return CHECK_DONE();
}
