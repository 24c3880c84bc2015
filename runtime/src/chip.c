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

/* Chips in a slice whose name ends in `suffix` (v5p-8 counts TensorCores: 4 chips). */
static int slice_chips(const generation* g, long suffix) {
  long chips = g->suffix_counts_tensorcores ? suffix / g->tensorcores : suffix;
  return chips < 1 ? 1 : (int)chips;
}

/* The torus a slice of `chips` chips of g is laid out as, e.g. 2x4 or 4x4x8. */
static void slice_topology(const generation* g, int chips, char* out, size_t n) {
  if (g->topology_dims == 2) {
    int x = 1, y = 1;
    while (x * y < chips) (y <= x ? (y *= 2) : (x *= 2));
    if (x > y) { int t = x; x = y; y = t; }
    snprintf(out, n, "%dx%d", x, y);
  } else {
    int d[3] = {1, 1, 1}, i = 0;
    while (d[0] * d[1] * d[2] < chips) d[i++ % 3] *= 2;
    snprintf(out, n, "%dx%dx%d", d[0], d[1], d[2]);
  }
}

static void configure(void) {
  const char* type = tpurt_env_get(TPURT_ENV_ACCELERATOR_TYPE);
  if (!type || !*type) type = "v6e-1";
  snprintf(cfg.accelerator_type, sizeof cfg.accelerator_type, "%s", type);
  const char* dash = strrchr(type, '-');
  size_t len = dash ? (size_t)(dash - type) : strlen(type);
  cfg.gen = tpurt_find_generation(type, len);
  long suffix = dash ? strtol(dash + 1, NULL, 10) : 1;
  if (!cfg.gen || suffix <= 0) {
    cfg.status = TPURT_ERR_VALUE;
    snprintf(cfg.error, sizeof cfg.error,
             "TPU_ACCELERATOR_TYPE='%s' is not a known slice name; expected <generation>-<count> "
             "with generation one of v4, v5litepod, v5p, v6e, tpu7x (e.g. v6e-4)",
             type);
    return;
  }
  int chips = slice_chips(cfg.gen, suffix);
  cfg.slice_chips = chips;
  const char* topology = tpurt_env_get(TPURT_ENV_TOPOLOGY);
  if (topology) snprintf(cfg.topology, sizeof cfg.topology, "%s", topology);
  else slice_topology(cfg.gen, chips, cfg.topology, sizeof cfg.topology);
  int host_chips = chips < cfg.gen->chips_per_host ? chips : cfg.gen->chips_per_host;
  const char* worker = tpurt_env_get(TPURT_ENV_WORKER_ID);
  int first = worker ? atoi(worker) * host_chips : 0;
  const char* visible = tpurt_env_get(TPURT_ENV_VISIBLE_CHIPS);
  if (visible && *visible) {
    const char* p = visible;
    while (*p && cfg.count < TPURT_MAX_DEVICES) {
      char* end;
      long v = strtol(p, &end, 10);
      if (end == p || v < 0 || v >= host_chips) {
        cfg.status = TPURT_ERR_VALUE;
        snprintf(cfg.error, sizeof cfg.error,
                 "TPU_VISIBLE_CHIPS='%s' names chip indices outside 0..%d of this %s host",
                 visible, host_chips - 1, cfg.accelerator_type);
        return;
      }
      cfg.global_index[cfg.count++] = first + (int)v;
      p = end + (*end == ',');
    }
  } else {
    for (int i = 0; i < host_chips && i < TPURT_MAX_DEVICES; i++) cfg.global_index[cfg.count++] = first + i;
  }
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
  if (override && atoll(override) > 0) i.hbm_bytes = atoll(override);
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
  i.slice_chips = tpurt_find_generation(generation_name, strlen(generation_name)) || !dash ? 1 : slice_chips(g, atol(dash + 1));
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
