/* The line driver shared by the sort and scan families: kernels that work on whole 1-D
 * lines of the input along one dim (sorts, selections, cumulative ops). */
#ifndef TPURT_SORT_H
#define TPURT_SORT_H

#include "../internal.h"

typedef struct tpurt_line {
  int64_t n;      /* line length */
  int as_int;     /* keys are int64 (else double) */
  void* keys;     /* the input line, dense */
  int64_t* idx;   /* scratch: n indices (tpurt_line_sort's result) */
  int64_t* tmp;   /* scratch: n more */
  int nouts;
  char* out[TPURT_MAX_OUTS]; /* element 0 of this line in each output */
  int64_t ost[TPURT_MAX_OUTS], olen[TPURT_MAX_OUTS];
  int odt[TPURT_MAX_OUTS];
} tpurt_line;

typedef tpurt_status (*tpurt_line_fn)(tpurt_line* l, const void* ctx);

/* Call fn once per line of `in` along dim (already wrapped). Outputs have in's shape except
 * along dim (any length there; keepdim=False outputs lack the dim). */
tpurt_status tpurt_lines_run(const tpurt_tensor* in, int dim, int as_int, const tpurt_tensor* outs, int nouts,
                             tpurt_line_fn fn, const void* ctx);
/* The scratch tpurt_lines_run takes for `in` along dim (for the plan hooks of its users). */
int64_t tpurt_lines_bytes(const tpurt_tensor* in, int dim);
/* Store into output o at position j of the line. */
void tpurt_line_put_f(const tpurt_line* l, int o, int64_t j, double v);
void tpurt_line_put_i(const tpurt_line* l, int o, int64_t j, int64_t v);
void tpurt_line_put_key(const tpurt_line* l, int o, int64_t j, int64_t k); /* keys[k] */
/* Stable sort of idx[0..n) by keys, NaN largest; descending keeps ties in input order. */
void tpurt_line_sort(tpurt_line* l, int desc);

/* libstdc++'s std::sort of idx[0..n) with less(ctx, a, b) ("a goes before b"), step for
 * step, so orders CPU's std::sort leaves (ties, NaN under a plain <) come out the same. */
typedef int (*tpurt_less_fn)(const void* ctx, int64_t a, int64_t b);
void tpurt_std_sort(int64_t* idx, int64_t n, tpurt_less_fn less, const void* ctx);

#endif /* TPURT_SORT_H */
