// Sparse COO tensors on tpu: PyTorch's device-generic sparse kernels, registered for the
// SparsePrivateUse1 key (and, for dense -> COO, PrivateUse1). A tpu COO tensor is a
// SparseTensorImpl whose indices (int64) and values are ordinary tpu tensors, so every kernel
// below only builds, reads or copies those two tensors; the math they call (nonzero,
// unique_dim, index, copies) runs on the native dense path. The two kernels PyTorch has only
// per device (_coalesce, _to_dense) are composed from tpu ops in torch_tpu/sparse.py.
// Any other op on a sparse tpu tensor has no SparsePrivateUse1 kernel and raises the
// dispatcher's NotImplementedError: the boxed CPU fallback is registered for the dense key
// only, and it could not carry a SparseTensorImpl anyway.
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_to_sparse_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/conj_physical_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

// at::native's overload set needs a cast to name one function.
at::Tensor dense_to_sparse_dim(const at::Tensor& self, int64_t sparse_dim) {
  return at::native::dense_to_sparse(self, sparse_dim);
}
at::Tensor dense_to_sparse_layout(const at::Tensor& self, std::optional<at::Layout> layout,
                                  at::OptionalIntArrayRef blocksize, std::optional<int64_t> dense_dim) {
  return at::native::dense_to_sparse(self, layout, blocksize, dense_dim);
}
at::Tensor coo_to_sparse_dim(const at::Tensor& self, int64_t sparse_dim) {
  return at::native::sparse_coo_to_sparse(self, sparse_dim);
}
at::Tensor coo_to_sparse_layout(const at::Tensor& self, std::optional<at::Layout> layout,
                                at::OptionalIntArrayRef blocksize, std::optional<int64_t> dense_dim) {
  return at::native::sparse_coo_to_sparse(self, layout, blocksize, dense_dim);
}

}  // namespace

// The same kernels SparseCPU and SparseCUDA register (native_functions.yaml lists them under
// "SparseCPU, SparseCUDA, SparseMeta"): they read the SparseTensorImpl's metadata or go
// through the dispatcher for the dense work.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims", at::native::new_with_dims_sparse);
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", at::native::new_with_dims_and_tensor_sparse_symint);
  m.impl("empty.memory_format", at::native::empty_sparse_symint);
  m.impl("empty_like", at::native::empty_like_sparse_coo);
  m.impl("sparse_dim", at::native::sparse_dim_sparse);
  m.impl("dense_dim", at::native::dense_dim_sparse);
  m.impl("_dimI", at::native::sparse_dim_sparse);
  m.impl("_dimV", at::native::dense_dim_sparse);
  m.impl("_nnz", at::native::_nnz_sparse);
  m.impl("is_coalesced", at::native::is_coalesced_sparse);
  m.impl("_coalesced_", at::native::_coalesced_sparse_);
  m.impl("_indices", at::native::_indices_sparse);
  m.impl("_values", at::native::_values_sparse);
  m.impl("indices", at::native::indices_sparse);
  m.impl("values", at::native::values_sparse);
  m.impl("clone", at::native::clone_sparse);
  m.impl("copy_", at::native::copy_sparse_wrapper_);
  m.impl("copy_sparse_to_sparse_", at::native::copy_sparse_);
  m.impl("zero_", at::native::zero_sparse_);
  m.impl("sparse_resize_", at::native::sparse_resize_);
  m.impl("sparse_resize_and_clear_", at::native::sparse_resize_and_clear_);
  m.impl("add.Tensor", at::native::add_sparse);
  m.impl("add_.Tensor", at::native::add_sparse_);
  m.impl("mul.Tensor", at::native::mul_sparse);
  m.impl("mul_.Tensor", at::native::mul_sparse_);
  m.impl("conj_physical.out", at::native::conj_physical_out_sparse);
  m.impl("_to_sparse.sparse_dim", coo_to_sparse_dim);
  m.impl("_to_sparse", coo_to_sparse_layout);
}

// Dense -> COO dispatches on the dense input; CPU and CUDA share dense_to_sparse.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse.sparse_dim", dense_to_sparse_dim);
  m.impl("_to_sparse", dense_to_sparse_layout);
}

}  // namespace torch_tpu
