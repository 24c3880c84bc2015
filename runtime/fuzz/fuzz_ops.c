/* libFuzzer target for the runtime's op entry points (tpurt_op_plan, tpurt_op_cost,
 * tpurt_op_launch_blocking, tpurt_graph_add_call). Each input is read as a stream of choices:
 *
 * - a well-formed call: one of the ops below with arguments its ATen schema and meta function
 *   accept (shapes that broadcast, dims in range), but any dtypes, sizes (0 and 1 included), strides
 *   (transposed, stepped, negative, zero for inputs), an output that aliases an input, any data
 *   (indices out of range included). It must plan and run, or fail with a status; each tensor's
 *   storage is a heap block exactly as large as its strides reach, so any access past it is an
 *   ASan report.
 * - the same call with one defect in its structure or descriptors (op id, argument counts, a
 *   value kind its schema does not take, a bad list, dtype, rank, size, a span int64 cannot
 *   count, no data): every entry point must refuse it (validate.c).
 *
 * Shapes a meta function would refuse are outside the contract (the runtime trusts PyTorch's
 * meta functions for them: tpurt.h). Build and run: `make -C runtime fuzz` (README). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpurt.h"

typedef struct {
  const uint8_t* p;
  size_t n;
} input;

static unsigned take(input* in, unsigned range) {
  unsigned v = 0;
  if (in->n) v = in->p[0], in->p++, in->n--;
  if (range > 256 && in->n) v = v << 8 | in->p[0], in->p++, in->n--;
  return range ? v % range : 0;
}

/* ---------------------------------------------------------------- storage */
#define MAX_BLOCKS 64
typedef struct {
  void* blocks[MAX_BLOCKS];
  int nblocks;
} arena;

static void* block(arena* a, size_t bytes) {
  if (a->nblocks == MAX_BLOCKS) return NULL;
  return a->blocks[a->nblocks++] = malloc(bytes ? bytes : 1);
}

static void release(arena* a) {
  for (int i = 0; i < a->nblocks; i++) free(a->blocks[i]);
  a->nblocks = 0;
}

/* A tensor of these sizes laid out as the input chooses: dims in any order, stepped, flipped,
 * broadcast (stride 0, inputs only); storage exactly as large as the layout reaches. */
static int tensor(input* in, arena* a, tpurt_tensor* t, int dtype, int ndim, const int64_t* sizes, int input_side,
                  int index_bound) {
  memset(t, 0, sizeof *t);
  t->dtype = dtype, t->ndim = ndim;
  int order[TPURT_MAX_DIMS];
  for (int d = 0; d < ndim; d++) order[d] = d;
  for (int d = ndim - 1; d > 0; d--) { /* a permutation: transposed layouts */
    int j = (int)take(in, (unsigned)d + 1), x = order[d];
    order[d] = order[j], order[j] = x;
  }
  int64_t running = 1, lo = 0, hi = 0;
  for (int i = ndim - 1; i >= 0; i--) {
    int d = order[i];
    t->sizes[d] = sizes[d];
    unsigned how = take(in, 8);
    int64_t step = how == 5 ? 2 : how == 6 ? 3 : 1;
    t->strides[d] = running * step;
    if (how == 7 && input_side) t->strides[d] = 0;
    if (how == 4) t->strides[d] = -t->strides[d];
    running *= (sizes[d] > 1 ? sizes[d] : 1) * step;
  }
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= sizes[d];
  for (int d = 0; d < ndim && numel; d++) {
    int64_t reach = (sizes[d] - 1) * t->strides[d];
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  size_t es = tpurt_dtype_size((tpurt_dtype)dtype), bytes = numel ? (size_t)(hi - lo + 1) * es : 0;
  char* base = block(a, bytes);
  if (!base) return 0;
  for (size_t b = 0; b < bytes; b++) base[b] = (char)take(in, 256);
  t->data = base - lo * (int64_t)es;
  int64_t elems = numel ? hi - lo + 1 : 0;
  for (int64_t e = 0; e < elems; e++) { /* the values PyTorch would hold: bools 0/1, indices near the bound */
    if (dtype == TPURT_BOOL) ((uint8_t*)base)[e] &= 1;
    if (index_bound && dtype == TPURT_I64) ((int64_t*)base)[e] = (int64_t)(int8_t)base[e * 8] % (index_bound + 2);
    if (index_bound && dtype == TPURT_I32) ((int32_t*)base)[e] = (int32_t)(int8_t)base[e * 4] % (index_bound + 2);
  }
  return 1;
}

/* ---------------------------------------------------------------- calls */
typedef enum {
  UNARY, BINARY, BINARY_ALPHA, WHERE, ADDCMUL, REDUCE_DIMS, REDUCE_DIM, SCAN, SOFTMAX, MM, BMM, INDEX_SELECT,
  GATHER, SCATTER_ADD, CAT, EMBEDDING, SORT, TOPK, FLIP, MASKED_FILL, CLAMP, LAYER_NORM
} recipe;

static const struct {
  const char* name;
  recipe recipe;
} OPS[] = {
    {"neg", UNARY}, {"exp", UNARY}, {"abs", UNARY}, {"sqrt", UNARY}, {"sigmoid", UNARY}, {"tanh", UNARY},
    {"log1p", UNARY}, {"ceil", UNARY}, {"sign", UNARY}, {"logical_not", UNARY}, {"bitwise_not", UNARY},
    {"reciprocal", UNARY}, {"erf", UNARY}, {"isnan", UNARY}, {"sin", UNARY}, {"add.Tensor", BINARY_ALPHA},
    {"sub.Tensor", BINARY_ALPHA}, {"mul.Tensor", BINARY}, {"div.Tensor", BINARY}, {"maximum", BINARY},
    {"eq.Tensor", BINARY}, {"lt.Tensor", BINARY}, {"atan2", BINARY}, {"pow.Tensor_Tensor", BINARY},
    {"remainder.Tensor", BINARY}, {"bitwise_and.Tensor", BINARY}, {"logical_and", BINARY},
    {"floor_divide", BINARY}, {"fmod.Tensor", BINARY}, {"hypot", BINARY}, {"where.self", WHERE},
    {"addcmul", ADDCMUL}, {"sum.dim_IntList", REDUCE_DIMS}, {"amax", REDUCE_DIMS}, {"mean.dim", REDUCE_DIMS},
    {"prod.dim_int", REDUCE_DIM}, {"argmax", REDUCE_DIM}, {"cumsum", SCAN}, {"_softmax", SOFTMAX},
    {"_log_softmax", SOFTMAX}, {"mm", MM}, {"bmm", BMM}, {"index_select", INDEX_SELECT}, {"gather", GATHER},
    {"scatter_add", SCATTER_ADD}, {"cat", CAT}, {"embedding", EMBEDDING}, {"sort.stable", SORT}, {"topk", TOPK},
    {"flip", FLIP}, {"masked_fill.Scalar", MASKED_FILL}, {"clamp", CLAMP}, {"native_layer_norm", LAYER_NORM},
};
enum { NOPS = sizeof OPS / sizeof OPS[0] };

static tpurt_value tv(tpurt_tensor t) { return (tpurt_value){.kind = TPURT_V_TENSOR, .scalar_dtype = -1, .t = t}; }
static tpurt_value iv(int64_t i) { return (tpurt_value){.kind = TPURT_V_INT, .scalar_dtype = -1, .i = i}; }
static tpurt_value bv(int b) { return (tpurt_value){.kind = TPURT_V_BOOL, .scalar_dtype = -1, .i = b}; }
static tpurt_value fv(double f) { return (tpurt_value){.kind = TPURT_V_FLOAT, .scalar_dtype = -1, .f = f}; }
static const tpurt_value NONE = {.kind = TPURT_V_NONE, .scalar_dtype = -1};

/* Lists a call points at, alive while it is tried. */
typedef struct {
  int64_t ints[4][TPURT_MAX_DIMS];
  tpurt_tensor tensors[4];
} lists;

static int dtype_of(input* in) { return (int)take(in, TPURT_DTYPE_COUNT); }
static int index_dtype(input* in) { return take(in, 4) ? TPURT_I64 : TPURT_I32; }
static int float_dtype(input* in) {
  static const int f[] = {TPURT_F32, TPURT_F64, TPURT_F16, TPURT_BF16};
  return f[take(in, 4)];
}

static void shape(input* in, int* ndim, int64_t* sizes, int min_ndim, int max_size) {
  *ndim = min_ndim + (int)take(in, (unsigned)(5 - min_ndim));
  for (int d = 0; d < *ndim; d++) sizes[d] = take(in, 8) == 0 ? 0 : 1 + (int64_t)take(in, (unsigned)max_size);
}

/* A shape that broadcasts to (ndim, sizes): fewer leading dims, some of size 1. */
static void broadcast_from(input* in, int ndim, const int64_t* sizes, int* bnd, int64_t* bsizes) {
  *bnd = ndim - (int)take(in, (unsigned)ndim + 1);
  for (int d = 0; d < *bnd; d++) bsizes[d] = take(in, 4) == 0 ? 1 : sizes[ndim - *bnd + d];
}

#define T(t, dt, nd, sz, inp, bound) \
  if (!tensor(in, a, &(t), dt, nd, sz, inp, bound)) return 0

/* A call to OPS[k] that its schema and meta function accept; 0 when the arena is full. */
static int build(input* in, arena* a, lists* l, tpurt_op_call* c, int k) {
  memset(c, 0, sizeof *c);
  c->struct_size = sizeof *c;
  c->op = tpurt_op_lookup(OPS[k].name);
  c->precision = TPURT_PRECISION_HIGHEST;
  int nd, bnd, dt = dtype_of(in);
  int64_t sz[TPURT_MAX_DIMS], bsz[TPURT_MAX_DIMS];
  tpurt_tensor x, y, z, o;
  switch (OPS[k].recipe) {
    case UNARY:
    case CLAMP:
    case FLIP:
      shape(in, &nd, sz, 0, 6);
      T(x, dt, nd, sz, 1, 0);
      T(o, take(in, 3) ? dt : dtype_of(in), nd, sz, 0, 0);
      if (take(in, 4) == 0) o = x; /* in place */
      c->args[0] = tv(x);
      c->nargs = 1;
      if (OPS[k].recipe == CLAMP) {
        c->args[1] = take(in, 2) ? fv(-0.5) : NONE, c->args[2] = take(in, 2) ? iv(3) : NONE;
        c->nargs = 3;
      }
      if (OPS[k].recipe == FLIP) {
        int n = nd ? (int)take(in, (unsigned)nd + 1) : 0;
        for (int i = 0; i < n; i++) l->ints[0][i] = i;
        c->args[1] = (tpurt_value){.kind = TPURT_V_INTS, .n = n, .scalar_dtype = -1, .ints = l->ints[0]};
        c->nargs = 2;
      }
      break;
    case BINARY:
    case BINARY_ALPHA:
    case WHERE:
    case ADDCMUL:
    case MASKED_FILL: {
      shape(in, &nd, sz, 0, 6);
      int nin = OPS[k].recipe == WHERE || OPS[k].recipe == ADDCMUL ? 3 : 2;
      tpurt_tensor ins[3];
      for (int i = 0; i < nin; i++) {
        broadcast_from(in, nd, sz, &bnd, bsz);
        int idt = (OPS[k].recipe == WHERE && i == 0) || (OPS[k].recipe == MASKED_FILL && i == 1) ? TPURT_BOOL
                  : i == 0 || take(in, 2)                                                          ? dt
                                                                                                   : dtype_of(in);
        if (OPS[k].recipe == MASKED_FILL && i == 0) bnd = nd, memcpy(bsz, sz, sizeof sz);
        T(ins[i], idt, bnd, bsz, 1, 0);
        c->args[i] = tv(ins[i]);
      }
      c->nargs = nin;
      T(o, take(in, 3) ? dt : dtype_of(in), nd, sz, 0, 0);
      if (OPS[k].recipe == BINARY_ALPHA) c->args[c->nargs++] = take(in, 2) ? iv(2) : fv(0.5);
      if (OPS[k].recipe == ADDCMUL) c->args[c->nargs++] = fv(-1.5);
      if (OPS[k].recipe == MASKED_FILL) c->args[c->nargs++] = fv(7.25);
      break;
    }
    case REDUCE_DIMS:
    case REDUCE_DIM:
    case SCAN:
    case SOFTMAX: {
      shape(in, &nd, sz, 0, 6);
      T(x, dt, nd, sz, 1, 0);
      int keep = (int)take(in, 2), dims = 0, n = 0;
      int64_t osz[TPURT_MAX_DIMS];
      int ond = 0;
      if (OPS[k].recipe == REDUCE_DIMS) {
        for (int d = 0; d < nd; d++)
          if (take(in, 2)) dims |= 1 << d, l->ints[0][n++] = take(in, 2) ? d : d - nd; /* negative dims too */
        if (!n) dims = (1 << nd) - 1; /* dim=None or []: every dim */
      } else if (nd) {
        int d = (int)take(in, (unsigned)nd);
        dims = 1 << d, l->ints[0][0] = d;
      }
      for (int d = 0; d < nd; d++)
        if (!(dims >> d & 1)) osz[ond++] = sz[d];
        else if (keep) osz[ond++] = 1;
      c->args[0] = tv(x);
      int odt = take(in, 2) ? dt : dtype_of(in);
      switch (OPS[k].recipe) {
        case REDUCE_DIMS:
          c->args[1] = n || take(in, 2) ? (tpurt_value){.kind = TPURT_V_INTS, .n = n, .scalar_dtype = -1, .ints = l->ints[0]}
                                        : NONE;
          if (!strcmp(OPS[k].name, "amax")) c->args[1].kind = TPURT_V_INTS; /* amax's dim is not optional */
          c->args[2] = bv(keep), c->args[3] = NONE, c->nargs = strcmp(OPS[k].name, "amax") ? 4 : 3;
          break;
        case REDUCE_DIM:
          if (!nd) ond = 0;
          c->args[1] = nd ? iv(l->ints[0][0]) : (ond = 0, keep = 0, NONE);
          if (!nd && !strcmp(OPS[k].name, "prod.dim_int")) c->args[1] = iv(0);
          c->args[2] = bv(keep), c->args[3] = NONE, c->nargs = strcmp(OPS[k].name, "argmax") ? 4 : 3;
          if (!strcmp(OPS[k].name, "argmax")) odt = TPURT_I64;
          break;
        case SCAN:
        case SOFTMAX:
          ond = nd, memcpy(osz, sz, sizeof sz);
          c->args[1] = iv(nd ? l->ints[0][0] : 0);
          c->args[2] = OPS[k].recipe == SCAN ? NONE : bv(0);
          c->nargs = 3;
          if (OPS[k].recipe == SOFTMAX) odt = dt = float_dtype(in);
          break;
        default:
          break;
      }
      if (OPS[k].recipe == SOFTMAX) { /* its input is float too */
        T(x, dt, nd, sz, 1, 0);
        c->args[0] = tv(x);
      }
      T(o, odt, ond, osz, 0, 0);
      break;
    }
    case MM:
    case BMM: {
      int64_t b = OPS[k].recipe == BMM ? (int64_t)take(in, 4) : 0, m = take(in, 34), kk = take(in, 34), n = take(in, 34);
      int64_t as[3] = {b, m, kk}, bs[3] = {b, kk, n}, os[3] = {b, m, n};
      int off = OPS[k].recipe == BMM ? 0 : 1, r = 3 - off;
      T(x, dt, r, as + off, 1, 0);
      T(y, dt, r, bs + off, 1, 0);
      T(o, dt, r, os + off, 0, 0);
      c->args[0] = tv(x), c->args[1] = tv(y), c->nargs = 2;
      break;
    }
    case INDEX_SELECT:
    case GATHER:
    case SCATTER_ADD:
    case EMBEDDING:
    case SORT:
    case TOPK:
    case LAYER_NORM:
    case CAT: {
      shape(in, &nd, sz, OPS[k].recipe == EMBEDDING ? 2 : 1, 6);
      if (OPS[k].recipe == EMBEDDING) nd = 2;
      int d = (int)take(in, (unsigned)nd);
      int64_t isz[TPURT_MAX_DIMS];
      memcpy(isz, sz, sizeof sz);
      if (OPS[k].recipe == LAYER_NORM) {
        dt = float_dtype(in);
        T(x, dt, nd, sz, 1, 0);
        int norm = 1 + (int)take(in, (unsigned)nd);
        for (int i = 0; i < norm; i++) l->ints[0][i] = sz[nd - norm + i];
        T(y, dt, norm, sz + nd - norm, 1, 0);
        T(z, dt, norm, sz + nd - norm, 1, 0);
        int64_t ssz[TPURT_MAX_DIMS];
        for (int i = 0; i < nd; i++) ssz[i] = i < nd - norm ? sz[i] : 1;
        c->args[0] = tv(x);
        c->args[1] = (tpurt_value){.kind = TPURT_V_INTS, .n = norm, .scalar_dtype = -1, .ints = l->ints[0]};
        c->args[2] = take(in, 2) ? tv(y) : NONE, c->args[3] = take(in, 2) ? tv(z) : NONE, c->args[4] = fv(1e-5);
        c->nargs = 5, c->nouts = 3;
        T(c->outs[0], dt, nd, sz, 0, 0);
        T(c->outs[1], dt == TPURT_F64 ? dt : TPURT_F32, nd, ssz, 0, 0);
        T(c->outs[2], dt == TPURT_F64 ? dt : TPURT_F32, nd, ssz, 0, 0);
        return 1;
      }
      T(x, dt, nd, sz, 1, 0);
      c->args[0] = tv(x);
      if (OPS[k].recipe == INDEX_SELECT) {
        int64_t n = take(in, 6);
        isz[d] = n;
        T(y, index_dtype(in), 1, &n, 1, (int)sz[d]);
        c->args[1] = iv(d), c->args[2] = tv(y), c->nargs = 3;
        T(o, dt, nd, isz, 0, 0);
      } else if (OPS[k].recipe == GATHER || OPS[k].recipe == SCATTER_ADD) {
        for (int i = 0; i < nd; i++) isz[i] = take(in, 2) ? sz[i] : take(in, (unsigned)sz[i] + 1);
        if (OPS[k].recipe == GATHER) isz[d] = take(in, 6);
        T(y, TPURT_I64, nd, isz, 1, (int)sz[d]);
        c->args[1] = iv(d), c->args[2] = tv(y);
        if (OPS[k].recipe == GATHER) {
          c->args[3] = bv(0), c->nargs = 4;
          T(o, dt, nd, isz, 0, 0);
        } else {
          T(z, dt, nd, isz, 1, 0);
          c->args[3] = tv(z), c->nargs = 4;
          T(o, dt, nd, sz, 0, 0);
        }
      } else if (OPS[k].recipe == EMBEDDING) {
        int64_t isz2[2] = {take(in, 5), take(in, 5)};
        int ind = (int)take(in, 3);
        T(y, index_dtype(in), ind, isz2, 1, (int)sz[0]);
        int64_t osz[3] = {0, 0, 0};
        for (int i = 0; i < ind; i++) osz[i] = isz2[i];
        osz[ind] = sz[1];
        c->args[1] = tv(y), c->args[2] = iv(take(in, 2) ? -1 : 0), c->args[3] = bv(0), c->args[4] = bv(0);
        c->nargs = 5;
        T(o, dt, ind + 1, osz, 0, 0);
      } else if (OPS[k].recipe == SORT || OPS[k].recipe == TOPK) {
        int64_t ksz[TPURT_MAX_DIMS];
        memcpy(ksz, sz, sizeof sz);
        if (OPS[k].recipe == SORT) {
          c->args[1] = take(in, 2) ? bv(1) : NONE, c->args[2] = iv(d), c->args[3] = bv((int)take(in, 2));
        } else {
          ksz[d] = take(in, (unsigned)sz[d] + 1);
          c->args[1] = iv(ksz[d]), c->args[2] = iv(d), c->args[3] = bv((int)take(in, 2)), c->args[4] = bv((int)take(in, 2));
        }
        c->nargs = OPS[k].recipe == SORT ? 4 : 5, c->nouts = 2;
        T(c->outs[0], dt, nd, ksz, 0, 0);
        T(c->outs[1], TPURT_I64, nd, ksz, 0, 0);
        return 1;
      } else { /* CAT: up to 4 tensors matching but in dim d */
        int n = 1 + (int)take(in, 4);
        l->tensors[0] = x;
        for (int i = 1; i < n; i++) {
          int64_t s2[TPURT_MAX_DIMS];
          memcpy(s2, sz, sizeof sz);
          s2[d] = take(in, 4);
          T(l->tensors[i], take(in, 2) ? dt : dtype_of(in), nd, s2, 1, 0);
          isz[d] += s2[d];
        }
        c->args[0] = (tpurt_value){.kind = TPURT_V_TENSORS, .n = n, .scalar_dtype = -1, .tensors = l->tensors};
        c->args[1] = iv(d), c->nargs = 2;
        T(o, dt, nd, isz, 0, 0);
      }
      break;
    }
  }
  c->outs[0] = o, c->nouts = 1;
  return 1;
}

/* ---------------------------------------------------------------- defects */
enum {
  D_OP_ID, D_NARGS, D_NOUTS, D_KIND, D_WRONG_KIND, D_LIST_COUNT, D_LIST_NULL, D_DTYPE, D_NDIM, D_SIZE,
  D_NUMEL, D_SPAN, D_NO_DATA, D_COUNT
};

/* Gives the call one defect; returns whether plans (descriptors alone, data may be NULL) must
 * refuse it too, not only launches. */
static int spoil(input* in, tpurt_op_call* c, int defect) {
  tpurt_tensor* t = &c->outs[take(in, (unsigned)c->nouts)];
  static const int64_t ints[1] = {0};
  switch (defect) {
    case D_OP_ID: c->op = take(in, 2) ? -1 - (int)take(in, 100) : 100000 + (int)take(in, 100); break;
    case D_NARGS: c->nargs = take(in, 2) ? -1 - (int)take(in, 4) : TPURT_MAX_ARGS + 1; break;
    case D_NOUTS: c->nouts = take(in, 2) ? -1 - (int)take(in, 4) : TPURT_MAX_OUTS + 1; break;
    case D_KIND: c->args[0].kind = take(in, 2) ? -1 : TPURT_V_COMPLEX + 1 + (int)take(in, 8); break;
    case D_WRONG_KIND: c->args[0] = (tpurt_value){.kind = TPURT_V_STRING, .scalar_dtype = -1, .s = "x"}; break;
    case D_LIST_COUNT:
    case D_LIST_NULL:
      c->args[0] = (tpurt_value){.kind = TPURT_V_TENSORS, .scalar_dtype = -1,
                                 .n = defect == D_LIST_COUNT ? -1 - (int)take(in, 4) : 1 + (int)take(in, 4),
                                 .ints = defect == D_LIST_COUNT ? ints : NULL};
      if (c->args[0].n < 0) c->op = tpurt_op_lookup("cat"); /* a tensor list is its kind: the count is the defect */
      break;
    case D_DTYPE: t->dtype = take(in, 2) ? -1 : TPURT_DTYPE_COUNT + (int)take(in, 8); break;
    case D_NDIM: t->ndim = take(in, 2) ? -1 - (int)take(in, 4) : TPURT_MAX_DIMS + 1 + (int)take(in, 4); break;
    case D_SIZE:
      t->ndim = t->ndim ? t->ndim : 1;
      t->sizes[take(in, (unsigned)t->ndim)] = -1 - (int64_t)take(in, 8);
      break;
    case D_NUMEL:
      t->ndim = 2, t->sizes[0] = t->sizes[1] = (int64_t)1 << (32 + take(in, 8));
      break;
    case D_SPAN:
      t->ndim = 1, t->sizes[0] = 4 + take(in, 8), t->strides[0] = (take(in, 2) ? 1 : -1) * (INT64_MAX / 2 - (int64_t)take(in, 256));
      break;
    case D_NO_DATA:
      t->ndim = 1, t->sizes[0] = 1 + take(in, 8), t->strides[0] = 1, t->data = NULL;
      return 0;
  }
  return 1;
}

/* FUZZ_VERBOSE=1 (reproducing one input): the call, as the runtime gets it. */
static void describe(const tpurt_op_call* c, const char* name) {
  if (!getenv("FUZZ_VERBOSE")) return;
  fprintf(stderr, "%s: %d args, %d outs\n", name, c->nargs, c->nouts);
  for (int i = 0; i < c->nargs + c->nouts && i < TPURT_MAX_ARGS; i++) {
    const tpurt_value* v = i < c->nargs ? &c->args[i] : NULL;
    const tpurt_tensor* t = v ? (v->kind == TPURT_V_TENSOR ? &v->t : NULL) : &c->outs[i - c->nargs];
    fprintf(stderr, "  %s %d: kind %d i %lld f %g n %d", v ? "arg" : "out", v ? i : i - c->nargs, v ? v->kind : 1,
            v ? (long long)v->i : 0LL, v ? v->f : 0.0, v ? v->n : 0);
    if (t) {
      fprintf(stderr, " %s sizes", tpurt_dtype_name((tpurt_dtype)t->dtype));
      for (int d = 0; d < t->ndim; d++) fprintf(stderr, " %lld", (long long)t->sizes[d]);
      fprintf(stderr, " strides");
      for (int d = 0; d < t->ndim; d++) fprintf(stderr, " %lld", (long long)t->strides[d]);
    }
    fprintf(stderr, "\n");
  }
}

static void must(int ok) {
  if (!ok) __builtin_trap(); /* a defective call was accepted */
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int ready;
  if (!ready) {
    if (tpurt_init()) return 0;
    tpurt_set_eager_mode(TPURT_MODE_DEBUG);
    ready = 1;
  }
  input in = {data, size};
  arena a = {.nblocks = 0};
  lists l;
  tpurt_op_call c;
  unsigned defect = take(&in, D_COUNT + 3); /* above D_COUNT: well-formed */
  int k = (int)take(&in, NOPS);
  if (!build(&in, &a, &l, &c, k)) return release(&a), 0;
  int32_t stream = tpurt_stream_get_current(0);
  describe(&c, OPS[k].name);
  tpurt_plan plan = {.struct_size = sizeof plan};
  tpurt_cost cost = {.struct_size = sizeof cost};
  if (defect >= D_COUNT) {
    if (tpurt_op_plan(&c, &plan) == TPURT_OK) tpurt_op_cost(&c, "v6e", &cost);
    tpurt_status s = tpurt_op_launch_blocking(stream, &c); /* runs, or fails with a status */
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "  -> %s %s\n", tpurt_status_name(s), s ? tpurt_last_error() : "");
  } else {
    int plans_refuse = spoil(&in, &c, (int)defect);
    must(tpurt_op_launch_blocking(stream, &c) != TPURT_OK);
    if (plans_refuse) {
      must(tpurt_op_plan(&c, &plan) != TPURT_OK);
      must(tpurt_op_cost(&c, "v6e", &cost) != TPURT_OK);
      tpurt_graph* g;
      if (tpurt_graph_create(0, &g) == TPURT_OK) {
        must(tpurt_graph_add_call(g, &c, NULL, 0) != TPURT_OK);
        tpurt_graph_destroy(g);
      }
    }
  }
  release(&a);
  return 0;
}
