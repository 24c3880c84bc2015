/* Status codes and the per-thread error message. */
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[1024] = "no error";

const char* tpurt_last_error(void) { return last_error; }

tpurt_status tpurt_fail(tpurt_status code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return code;
}

tpurt_status tpurt_fail_message(tpurt_status code, const char* message) {
  return tpurt_fail(code, "%s", message ? message : "");
}

const char* tpurt_status_name(tpurt_status s) {
  switch (s) {
#define TPURT_X(code, value, exc) \
  case code:                      \
    return #code;
    TPURT_STATUS_LIST(TPURT_X)
#undef TPURT_X
  }
  return "TPURT_ERR_UNKNOWN";
}

size_t tpurt_dtype_size(tpurt_dtype d) {
  static const size_t sizes[] = {
#define TPURT_X(e, ctype, size, name, c10_name) size,
      TPURT_DTYPE_LIST(TPURT_X)
#undef TPURT_X
  };
  return (unsigned)d < TPURT_DTYPE_COUNT ? sizes[d] : 0;
}

const char* tpurt_dtype_name(tpurt_dtype d) {
  static const char* names[] = {
#define TPURT_X(e, ctype, size, name, c10_name) name,
      TPURT_DTYPE_LIST(TPURT_X)
#undef TPURT_X
  };
  return (unsigned)d < TPURT_DTYPE_COUNT ? names[d] : "?";
}

const char* tpurt_dtype_c10_name(tpurt_dtype d) {
  static const char* names[] = {
#define TPURT_X(e, ctype, size, name, c10_name) c10_name,
      TPURT_DTYPE_LIST(TPURT_X)
#undef TPURT_X
  };
  return (unsigned)d < TPURT_DTYPE_COUNT ? names[d] : "?";
}

const char* tpurt_shape_str(const tpurt_tensor* t) {
  static _Thread_local char bufs[4][160];
  static _Thread_local int next;
  char* b = bufs[next++ & 3];
  int n = snprintf(b, 160, "[");
  for (int d = 0; d < t->ndim && n < 150; d++)
    n += snprintf(b + n, 160 - n, d ? ", %lld" : "%lld", (long long)t->sizes[d]);
  snprintf(b + n, 160 - n, "]");
  return b;
}

int64_t tpurt_numel(const tpurt_tensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
  return n;
}

int tpurt_merge_dims(int n, int64_t* sizes, int nst, int64_t* const* st) {
  int m = 0;
  for (int d = 0; d < n; d++) {
    if (sizes[d] == 1) continue;
    int chained = m > 0;
    for (int k = 0; k < nst && chained; k++) chained = st[k][m - 1] == st[k][d] * sizes[d];
    if (chained) {
      sizes[m - 1] *= sizes[d];
      for (int k = 0; k < nst; k++) st[k][m - 1] = st[k][d];
      continue;
    }
    sizes[m] = sizes[d];
    for (int k = 0; k < nst; k++) st[k][m] = st[k][d];
    m++;
  }
  return m;
}

int tpurt_is_contiguous(const tpurt_tensor* t) {
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] != 1 && t->strides[d] != expect) return 0;
    expect *= t->sizes[d];
  }
  return 1;
}
