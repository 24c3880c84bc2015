// The generic kernel path's reusable parts: the meta answer of a call (output metadata and
// CPU's checks, cached per argument signature) and the marshalling of boxed arguments into the
// runtime's tpurt_op_call. NativeKernel.cpp runs ops through them; Attention.cpp plans the
// fused kernel with them (descriptors of fake tensors under torch.compile).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "Runtime.h"

namespace torch_tpu {

// ------------------------------------------------------------------ meta answers
struct TensorMeta {
  bool defined = false;
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  at::Tensor allocate(c10::Device device) const;  // undefined for an undefined output
  static TensorMeta of(const at::Tensor& t);
};
struct MetaRet {
  enum Kind { kTensor, kList, kOther } kind = kOther;
  int aliased_arg = -1;
  std::vector<TensorMeta> tensors;
  c10::IValue other;
};
struct MetaResult {
  // Whether a call of this signature ran to completion: the first call of a signature runs
  // blocking, so errors that depend only on shapes and dtypes (a dtype the kernel lacks)
  // raise from it; later calls go to the stream.
  mutable std::atomic<bool> verified{false};
  bool complex_output = false;
  const char* unsupported_output = nullptr;  // why no kernel can write some output
  std::vector<MetaRet> rets;
  std::vector<std::pair<size_t, std::vector<int64_t>>> resized;  // out= args the meta resized
  bool uncached = false;  // the tpu check warned: it runs (and warns, as CPU) on every call
  bool meta_warns_resize = false;  // torch_tpu's shape function ran, with CPU's out= resize warning
};

// Index of the argument a return aliases (out= and in-place ops), or -1.
int aliased_arg(const c10::FunctionSchema& schema, size_t r);
bool aliases_output(const c10::FunctionSchema& schema);
// Every return is a written argument that is not an out= (self of an in-place op).
bool in_place_only(const c10::FunctionSchema& schema);
// The answer of an in-place op whose outputs are its arguments (no meta function needed).
std::shared_ptr<const MetaResult> in_place_result(const c10::FunctionSchema& schema);

// Meta answers of one op, cached per argument signature (meta functions are often Python,
// ~100 us a call). Thread-safe.
class MetaCache {
 public:
  // Everything a meta function can see of the arguments (shapes, strides, dtypes, scalar
  // values, the default dtype); cacheable is false if some argument kind is not understood.
  struct Signature {
    c10::SmallVector<int64_t, 64> key;
    size_t hash = 0;
    bool cacheable = false;
  };
  static Signature signature_of(c10::ArrayRef<c10::IValue> args);
  std::shared_ptr<const MetaResult> find(const Signature& sig);
  void insert(const Signature& sig, std::shared_ptr<const MetaResult> meta);
  // The op's tpu check, then its tpu shape function or PyTorch's Meta kernel, on meta copies
  // of the arguments: raises what CPU raises, else the outputs' metadata.
  static std::shared_ptr<const MetaResult> compute(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

 private:
  // Keyed by the signature's hash; entries sharing a hash are told apart by the full key.
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<std::pair<std::vector<int64_t>, std::shared_ptr<const MetaResult>>>> cache_;
  size_t entries_ = 0;
};

// The outputs a meta answer describes, allocated on device (aliased ones are the arguments),
// after resizing out= arguments the answer resized, with CPU's warning for a non-empty out= (on
// every call: PyTorch's meta functions saw such an out= empty; torch_tpu's warned themselves
// on the call that computed the answer, not cached).
void allocate_outputs(const MetaResult& meta, c10::ArrayRef<c10::IValue> args, c10::Device device,
                      std::vector<c10::IValue>& results, bool cached);

// ------------------------------------------------------------------ marshalling
// Backing storage of the call's list and string arguments. Reserved on first use (most
// calls have none) and never reallocated after: the call points into its elements.
class ArgStorage {
 public:
  explicit ArgStorage(size_t max_items) : max_(max_items) {}
  std::vector<int64_t>& ints() { return next(ints_); }
  std::vector<double>& floats() { return next(floats_); }
  std::vector<tpurt_tensor>& list() { return next(lists_); }
  std::string& string() { return next(strings_); }

 private:
  template <typename T>
  T& next(std::vector<T>& v) {
    if (v.capacity() == 0) v.reserve(max_);
    TORCH_CHECK(v.size() < max_, "too many list arguments for the tpu runtime");
    return v.emplace_back();
  }
  size_t max_;
  std::vector<std::vector<int64_t>> ints_;
  std::vector<std::vector<double>> floats_;
  std::vector<std::vector<tpurt_tensor>> lists_;
  std::vector<std::string> strings_;
};

// How a tpu tensor argument becomes a descriptor: describe() for tensors with data; a plan of
// fake tensors (symbolic sizes) passes its own.
using Describe = tpurt_tensor (*)(const at::Tensor&);
// One boxed argument as the runtime's value: tpu tensors as descriptors, 0-dim CPU tensors and
// scalars as values, lists into store.
tpurt_value value_of(const c10::IValue& a, ArgStorage& store, Describe describe_tensor = describe);
// Schema argument i as the call's argument: value_of, except that a dense out= tensor, which is
// the call's output, is None here. Passed as an argument too it overlaps the output, and the
// runtime computes into a private temporary and copies it (every matmul torch.compile emits is
// an out= call); a strided one keeps that copy, which writes its strides.
tpurt_value argument_value(const c10::FunctionSchema& schema, size_t i, const c10::IValue& a, ArgStorage& store,
                           Describe describe_tensor = describe);
// The op's results as the call's outputs: tensors into outs (their count is returned), a tensor
// list as one more list argument at n, and for an in-place list op (_foreach_*_, no results)
// the mutated list again. n is the next argument slot and advances.
int describe_outputs(tpurt_op_call& call, int& n, c10::ArrayRef<c10::IValue> results, const c10::FunctionSchema& schema,
                     c10::ArrayRef<c10::IValue> args, ArgStorage& store, Describe describe_tensor = describe);
// The call's header (the struct is ~9 KiB: only the header is zeroed here).
void begin_call(tpurt_op_call& call, int op, c10::Device device);
// Marks the argument and output slots past the used ones empty, as tpurt_call_copy leaves them.
void seal_call(tpurt_op_call& call, int nargs, int nouts);
bool is_number_list(const c10::IValue& a);
int64_t numel_of(const tpurt_tensor& t);

}  // namespace torch_tpu
