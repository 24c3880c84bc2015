/* Emulated chips: which generation and slice this process sees, from the TPU launch
 * variables, and the calling thread's current device. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static const generation generations[] = {
#define GEN(n, a, tf, i8, f8, hbm, bw, ici, tc, mxu, dim, cph, sct, usd, td, maxc) \
  {n, a, tf, i8, f8, hbm, bw, ici, tc, mxu, dim, cph, sct, usd, td, maxc},
#include "generations.gen.h"
#undef GEN
};
enum { GENERATION_COUNT = sizeof generations / sizeof generations[0] };

static struct {
  tpurt_status status;
  char error[512];
  const generation* gen;
  char accelerator_type[32];
  char topology[32];
  int slice_chips;
  long fault_every; /* TPU_FAULT_ALLOC: 0 off */
  int count;
  int global_index[TPURT_MAX_DEVICES];
} cfg;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Thread_local int current_device;

const generation* tpurt_find_generation(const char* prefix, size_t len) {
  for (int g = 0; g < GENERATION_COUNT; g++) {
    const char* a = generations[g].aliases;
    while (*a) {
      size_t n = strcspn(a, "|");
      if (n == len && strncmp(a, prefix, len) == 0) return &generations[g];
      a += n + (a[n] == '|');
    }
  }
  return NULL;
}

/* Whether Google offers a slice of `chips` chips of g: 2-D generations (v5e, v6e) as 1x1 and
 * the powers of two from 2x2 to the full pod (tpu_specs.json's valid_topologies); 3-D ones as
 * 2x2x1, 2x2x2, 2x2x4, 2x4x4, then any whole number of 4x4x4 cubes (dims multiples of 4). */
static int slice_offered(const generation* g, long chips) {
  if (chips < 1 || chips > g->max_slice_chips) return 0;
  if (g->topology_dims == 2) return chips == 1 || (chips >= 4 && (chips & (chips - 1)) == 0);
  return chips == 4 || chips == 8 || chips == 16 || chips == 32 || chips % 64 == 0;
}

/* A full-string decimal integer (no sign, no trailing characters). */
static int parse_count(const char* s, long* out) {
  if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 12) return 0;
  *out = strtol(s, NULL, 10);
  return 1;
}

/* The chips of a slice named "<generation>-<suffix>" (v5p-8: the suffix counts TensorCores,
 * 4 chips), or a VALUE failure that lists the sizes the generation offers. */
static tpurt_status slice_chips(const generation* g, const char* name, const char* suffix, int* chips) {
  long n;
  int per = g->suffix_counts_tensorcores ? g->tensorcores : 1;
  char sizes[200];
  if (g->topology_dims == 2)
    snprintf(sizes, sizeof sizes, "%s-1, 4, 8, 16, ... (powers of two) up to %d chips", g->name, g->max_slice_chips);
  else
    snprintf(sizes, sizeof sizes, "%s-%d, %d, %d, %d, then multiples of %d up to %d (%s)", g->name, 4 * per, 8 * per,
             16 * per, 32 * per, 64 * per, g->max_slice_chips * per, per > 1 ? "TensorCores, 2 per chip" : "chips");
  if (!parse_count(suffix, &n) || n < 1)
    return tpurt_fail(TPURT_ERR_VALUE, "'%s' is not a slice name: expected <generation>-<count>, e.g. v6e-8 or tpu7x-16384", name);
  if (n % per)
    return tpurt_fail(TPURT_ERR_VALUE, "slice '%s': %s-N counts TensorCores, %d per chip: N must be a multiple of %d", name,
                      g->name, per, per);
  if (n / per > g->max_slice_chips)
    return tpurt_fail(TPURT_ERR_VALUE, "slice '%s': %ld chips, the largest %s slice has %d", name, n / per, g->name,
                      g->max_slice_chips);
  if (!slice_offered(g, n / per))
    return tpurt_fail(TPURT_ERR_VALUE, "slice '%s' is not a size %s comes in; its slices: %s", name, g->name, sizes);
  *chips = (int)(n / per);
  return TPURT_OK;
}

/* The torus a slice of `chips` chips of g is laid out as, e.g. 2x4 or 4x4x8. */
static void slice_topology(const generation* g, int chips, char* out, size_t n) {
  if (g->topology_dims == 2) {
    int x = 1, y = 1;
    while (x * y < chips) (y <= x ? (y *= 2) : (x *= 2));
    if (x > y) { int t = x; x = y; y = t; }
    snprintf(out, n, "%dx%d", x, y);
  } else if ((chips & (chips - 1)) == 0) {
    int d[3] = {1, 1, 1}, i = 0;
    while (d[0] * d[1] * d[2] < chips) d[i++ % 3] *= 2;
    snprintf(out, n, "%dx%dx%d", d[0], d[1], d[2]);
  } else { /* whole 4x4x4 cubes (slice_offered): 4x4xN, then as even as dims in multiples of 4 go */
    int d[3] = {4, 4, chips / 16};
    for (;;) {
      int lo = d[0] <= d[1] ? 0 : 1, hi = d[2] >= d[0] && d[2] >= d[1] ? 2 : d[0] >= d[1] ? 0 : 1;
      if (d[hi] % 8 || d[hi] / 2 < 2 * d[lo]) break;
      d[hi] /= 2, d[lo] *= 2;
    }
    snprintf(out, n, "%dx%dx%d", d[0], d[1], d[2]);
  }
}

/* A VALUE failure of the configuration, kept for every later call (the process imports fine and
 * the first use of the device raises it, as CUDA does with a bad CUDA_VISIBLE_DEVICES). */
#define CONFIG_ERROR(...)                                              \
  do {                                                                 \
    cfg.status = TPURT_ERR_VALUE;                                      \
    snprintf(cfg.error, sizeof cfg.error, __VA_ARGS__);                \
    return;                                                            \
  } while (0)

static int is_flag(const char* v) { return !v || !strcmp(v, "0") || !strcmp(v, "1"); }

/* "AxB" or "AxBxC" with `dims` positive dims: their product, or 0. */
static long topology_chips(const char* t, int dims) {
  long product = 1;
  int n = 0;
  const char* p = t;
  for (;;) {
    size_t len = strspn(p, "0123456789");
    if (!len || len > 6) return 0;
    long d = strtol(p, NULL, 10);
    if (d < 1) return 0;
    product *= d;
    n++;
    p += len;
    if (!*p) break;
    if (*p++ != 'x') return 0;
  }
  return n == dims ? product : 0;
}

/* The builds' names, comma-separated (only those this host runs, when `host_runs`). */
static const char* isa_names(char* buf, size_t size, int host_runs) {
  buf[0] = 0;
  for (int i = 0; tpurt_isa_name(i); i++)
    if (!host_runs || tpurt_isa_host_runs(tpurt_isa_name(i)))
      snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? ", " : "", tpurt_isa_name(i));
  return buf;
}

static void configure(void) {
  const char* type = tpurt_env_get(TPURT_ENV_ACCELERATOR_TYPE);
  if (!type) type = "v6e-1";
  snprintf(cfg.accelerator_type, sizeof cfg.accelerator_type, "%s", type);
  const char* dash = strrchr(type, '-');
  cfg.gen = dash ? tpurt_find_generation(type, (size_t)(dash - type)) : NULL;
  if (!cfg.gen)
    CONFIG_ERROR("TPU_ACCELERATOR_TYPE='%s' is not a known slice name; expected <generation>-<count> "
                 "with generation one of v4, v5litepod, v5p, v6e, tpu7x (e.g. v6e-4)", type);
  int chips;
  if (slice_chips(cfg.gen, type, dash + 1, &chips)) CONFIG_ERROR("TPU_ACCELERATOR_TYPE: %s", tpurt_last_error());
  cfg.slice_chips = chips;
  const char* topology = tpurt_env_get(TPURT_ENV_TOPOLOGY);
  if (topology) {
    if (topology_chips(topology, cfg.gen->topology_dims) != chips)
      CONFIG_ERROR("TPU_TOPOLOGY='%s' is not a %d-D topology of the %d chips of %s (e.g. %s)", topology,
                   cfg.gen->topology_dims, chips, type, cfg.gen->topology_dims == 2 ? "2x4" : "2x2x2");
    snprintf(cfg.topology, sizeof cfg.topology, "%s", topology);
  } else {
    slice_topology(cfg.gen, chips, cfg.topology, sizeof cfg.topology);
  }
  int host_chips = chips < cfg.gen->chips_per_host ? chips : cfg.gen->chips_per_host;
  int hosts = (chips + host_chips - 1) / host_chips;
  const char* worker = tpurt_env_get(TPURT_ENV_WORKER_ID);
  long worker_id = 0;
  if (worker && (!parse_count(worker, &worker_id) || worker_id >= hosts))
    CONFIG_ERROR("TPU_WORKER_ID='%s': expected a host index 0..%d of %s (%d host%s of %d chips)", worker, hosts - 1, type,
                 hosts, hosts > 1 ? "s" : "", host_chips);
  const char* hostnames = tpurt_env_get(TPURT_ENV_WORKER_HOSTNAMES);
  if (hostnames) {
    int names = 1, empty = hostnames[0] == ',' || hostnames[strlen(hostnames) - 1] == ',' || strstr(hostnames, ",,");
    for (const char* p = hostnames; *p; p++) names += *p == ',';
    if (names != hosts || empty)
      CONFIG_ERROR("TPU_WORKER_HOSTNAMES='%s': %s has %d host%s; expected their %d name%s, comma-separated, host i "
                   "(TPU_WORKER_ID=i) the i-th", hostnames, type, hosts, hosts > 1 ? "s" : "", hosts, hosts > 1 ? "s" : "");
  }
  int first = (int)worker_id * host_chips;
  const char* visible = tpurt_env_get(TPURT_ENV_VISIBLE_CHIPS);
  if (visible) {
    const char* p = visible;
    while (*p) {
      char* end;
      long v = strtol(p, &end, 10);
      if (end == p || v < 0 || v >= host_chips || (*end && *end != ',') || cfg.count >= TPURT_MAX_DEVICES)
        CONFIG_ERROR("TPU_VISIBLE_CHIPS='%s': expected comma-separated chip indices 0..%d of this %s host",
                     visible, host_chips - 1, cfg.accelerator_type);
      cfg.global_index[cfg.count++] = first + (int)v;
      p = end + (*end == ',');
    }
  } else if (tpurt_env_get(TPURT_ENV_LOCAL_RANK) && tpurt_env_get(TPURT_ENV_LOCAL_WORLD_SIZE)) {
    /* started by a launcher (torchrun): one process per chip, its own chip as tpu:0 (TorchTPU) */
    const char* rank_s = tpurt_env_get(TPURT_ENV_LOCAL_RANK);
    const char* size_s = tpurt_env_get(TPURT_ENV_LOCAL_WORLD_SIZE);
    long rank, size;
    if (!parse_count(size_s, &size) || size < 1)
      CONFIG_ERROR("LOCAL_WORLD_SIZE='%s': expected the launcher's number of processes on this host (1..%d for %s)",
                   size_s, host_chips, type);
    if (size > host_chips)
      CONFIG_ERROR("LOCAL_WORLD_SIZE='%s': the launcher started %ld processes on this host, but a host of %s has %d "
                   "chip%s and each process takes one: launch at most %d per host (torchrun --nproc_per_node=%d), "
                   "or give each process its chips with TPU_VISIBLE_CHIPS",
                   size_s, size, type, host_chips, host_chips > 1 ? "s" : "", host_chips, host_chips);
    if (!parse_count(rank_s, &rank) || rank >= size)
      CONFIG_ERROR("LOCAL_RANK='%s': expected this process's index 0..%ld among the launcher's LOCAL_WORLD_SIZE=%ld "
                   "processes on this %s host", rank_s, size - 1, size, type);
    cfg.global_index[cfg.count++] = first + (int)rank;
  } else {
    for (int i = 0; i < host_chips && i < TPURT_MAX_DEVICES; i++) cfg.global_index[cfg.count++] = first + i;
  }
  const char* isa = tpurt_env_get(TPURT_ENV_ISA);
  char names[64];
  if (isa && !tpurt_isa_needs(isa))
    CONFIG_ERROR("TPU_ISA='%s': expected one of %s", isa, isa_names(names, sizeof names, 0));
  if (isa && !tpurt_isa_host_runs(isa))
    CONFIG_ERROR("TPU_ISA='%s': this host's CPU lacks %s; it runs %s", isa, tpurt_isa_needs(isa),
                 isa_names(names, sizeof names, 1));
  if (isa && strcmp(isa, tpurt_isa()) != 0)
    CONFIG_ERROR("TPU_ISA='%s', but the %s build of the runtime is loaded: TPU_ISA is read when torch_tpu is "
                 "imported, so set it before importing torch", isa, tpurt_isa());
  const char* san = tpurt_env_get(TPURT_ENV_SANITIZER);
  if (san && strcmp(san, "asan") != 0) CONFIG_ERROR("TPU_SANITIZER='%s': expected asan (or unset)", san);
  if (san && !tpurt_sanitizer())
    CONFIG_ERROR("TPU_SANITIZER='%s', but the runtime loaded is not the sanitized build: build it with `make -C "
                 "runtime asan`, and set TPU_SANITIZER before importing torch", san);
  const char* threads = tpurt_env_get(TPURT_ENV_NUM_THREADS);
  long n;
  if (threads && (!parse_count(threads, &n) || n < 1))
    CONFIG_ERROR("TPU_NUM_THREADS='%s': expected a positive number of host threads", threads);
  const char* hbm = tpurt_env_get(TPURT_ENV_HBM_BYTES);
  if (hbm && (!parse_count(hbm, &n) || n < 1))
    CONFIG_ERROR("TPU_HBM_BYTES='%s': expected a positive number of bytes (at most 12 digits)", hbm);
  const char* fault = tpurt_env_get(TPURT_ENV_FAULT_ALLOC);
  if (fault && (!parse_count(fault, &cfg.fault_every) || cfg.fault_every < 1))
    CONFIG_ERROR("TPU_FAULT_ALLOC='%s': expected N >= 1 (about one device allocation in N fails)", fault);
  static const tpurt_env flags[] = {TPURT_ENV_LAUNCH_BLOCKING, TPURT_ENV_DEFER_AND_FUSE, TPURT_ENV_EXPLAIN_RECOMPILES};
  for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++)
    if (!is_flag(tpurt_env_get(flags[f])))
      CONFIG_ERROR("%s='%s': expected 0 or 1", tpurt_env_name(flags[f]), tpurt_env_get(flags[f]));
  /* debug wins over fused: a program asking for errors where they were issued gets them */
  const char* blocking = tpurt_env_get(TPURT_ENV_LAUNCH_BLOCKING);
  const char* fuse = tpurt_env_get(TPURT_ENV_DEFER_AND_FUSE);
  if (blocking && strcmp(blocking, "0") != 0) tpurt_set_eager_mode(TPURT_MODE_DEBUG);
  else if (fuse && strcmp(fuse, "0") != 0) tpurt_set_eager_mode(TPURT_MODE_FUSED);
  cfg.status = TPURT_OK;
}

static const char* const env_names[] = {
#define TPURT_X(e, name, doc) name,
    TPURT_ENV_LIST(TPURT_X)
#undef TPURT_X
};
static const char* const env_docs[] = {
#define TPURT_X(e, name, doc) doc,
    TPURT_ENV_LIST(TPURT_X)
#undef TPURT_X
};
const char* tpurt_env_name(int e) { return e >= 0 && e < TPURT_ENV_COUNT ? env_names[e] : NULL; }
const char* tpurt_env_doc(int e) { return e >= 0 && e < TPURT_ENV_COUNT ? env_docs[e] : NULL; }
const char* tpurt_env_get(tpurt_env e) {
  const char* v = e >= 0 && e < TPURT_ENV_COUNT ? getenv(env_names[e]) : NULL;
  return v && *v ? v : NULL;
}

tpurt_status tpurt_init(void) {
  pthread_once(&init_once, configure);
  if (cfg.status != TPURT_OK) return tpurt_fail(cfg.status, "%s", cfg.error);
  return TPURT_OK;
}

int tpurt_device_count(void) { return tpurt_init() == TPURT_OK ? cfg.count : 0; }

long tpurt_fault_alloc_every(void) { return tpurt_init() == TPURT_OK ? cfg.fault_every : 0; }

static tpurt_status check_device(int device) {
  tpurt_status s = tpurt_init();
  if (s) return s;
  if (device < 0 || device >= cfg.count)
    return tpurt_fail(TPURT_ERR_VALUE, "invalid device index tpu:%d: this process sees %d chip(s)",
                      device, cfg.count);
  return TPURT_OK;
}

/* The generation's own figures into i. */
static void describe_generation(const generation* g, tpurt_chip_info* i) {
  snprintf(i->generation, sizeof i->generation, "%s", g->name);
  i->hbm_bytes = g->hbm_bytes;
  i->bf16_tflops = g->bf16_tflops;
  i->hbm_GBps = g->hbm_GBps;
  i->ici_GBps_bidir = g->ici_GBps_bidir;
  i->mxu_dim = g->mxu_dim;
  i->mxu_count = g->mxu_per_tc > 0 ? g->mxu_per_tc * g->tensorcores : -1;
  i->tensorcores = g->tensorcores;
  i->usd_per_chip_hour = g->usd_per_chip_hour;
}

static tpurt_status give_info(const tpurt_chip_info* i, tpurt_chip_info* out) {
  size_t n = out->struct_size && out->struct_size < sizeof *i ? out->struct_size : sizeof *i;
  memcpy(out, i, n);
  out->struct_size = n;
  return TPURT_OK;
}

tpurt_status tpurt_chip_get_info(int device, tpurt_chip_info* out) {
  tpurt_status s = check_device(device);
  if (s) return s;
  tpurt_chip_info i;
  memset(&i, 0, sizeof i);
  i.struct_size = sizeof i;
  describe_generation(cfg.gen, &i);
  snprintf(i.accelerator_type, sizeof i.accelerator_type, "%s", cfg.accelerator_type);
  snprintf(i.topology, sizeof i.topology, "%s", cfg.topology);
  i.global_index = cfg.global_index[device];
  i.slice_chips = cfg.slice_chips;
  const char* override = tpurt_env_get(TPURT_ENV_HBM_BYTES); /* shrink the emulated HBM for tests */
  if (override) i.hbm_bytes = atoll(override);                 /* checked by configure() */
  return give_info(&i, out);
}

const generation* tpurt_generation_named(const char* name) {
  if (!name) return NULL;
  const generation* g = tpurt_find_generation(name, strlen(name));
  const char* dash = strrchr(name, '-');
  if (!g && dash && dash[1] && strspn(dash + 1, "0123456789") == strlen(dash + 1))
    g = tpurt_find_generation(name, (size_t)(dash - name)); /* a slice name: v6e-256 */
  return g;
}

tpurt_status tpurt_generation_get_info(const char* generation_name, tpurt_chip_info* out) {
  const generation* g = tpurt_generation_named(generation_name);
  if (!g)
    return tpurt_fail(TPURT_ERR_VALUE, "'%s' is not a TPU generation or slice name; expected one of v4, v5e (v5litepod), "
                      "v5p, v6e, v7 (tpu7x), optionally with a size (v6e-256)", generation_name ? generation_name : "(null)");
  tpurt_chip_info i;
  memset(&i, 0, sizeof i);
  i.struct_size = sizeof i;
  describe_generation(g, &i);
  snprintf(i.accelerator_type, sizeof i.accelerator_type, "%s", generation_name);
  const char* dash = strrchr(generation_name, '-');
  i.slice_chips = 1;
  if (!tpurt_find_generation(generation_name, strlen(generation_name)) && dash) {
    int chips;
    tpurt_status s = slice_chips(g, generation_name, dash + 1, &chips);
    if (s) return s;
    i.slice_chips = chips;
  }
  slice_topology(g, i.slice_chips, i.topology, sizeof i.topology);
  return give_info(&i, out);
}

int tpurt_device_get(void) { return current_device; }

tpurt_status tpurt_device_set(int device) {
  tpurt_status s = check_device(device);
  if (s) return s;
  current_device = device;
  return TPURT_OK;
}
