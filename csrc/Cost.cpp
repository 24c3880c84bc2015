// Python bindings of the runtime's cost model (runtime/src/cost.c): one ATen call's cost from
// its arguments' metadata alone, so the dry run can cost fake tensors, and the GEMM and
// collective formulas for what no single op describes.
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include "OpCall.h"
#include "Runtime.h"

namespace torch_tpu {
namespace {

// Sizes and strides only: fake and meta tensors have no data to point at.
tpurt_tensor describe_metadata(const at::Tensor& t) {
  tpurt_tensor d{};
  d.ndim = -1;
  if (!t.defined() || t.dim() > TPURT_MAX_DIMS) return d;
  d.dtype = to_tpurt_dtype(t.scalar_type());
  d.ndim = static_cast<int32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); i++) {
    d.sizes[i] = t.sym_size(i).guard_int(__FILE__, __LINE__);
    d.strides[i] = t.sym_stride(i).guard_int(__FILE__, __LINE__);
  }
  return d;
}

py::dict cost_dict(const tpurt_cost& c) {
  static const char* bounds[] = {
#define TPURT_X(e, name) name,
      TPURT_BOUND_LIST(TPURT_X)
#undef TPURT_X
  };
  py::dict d;
  d["seconds"] = c.seconds;
  d["mxu_seconds"] = c.mxu_seconds;
  d["vpu_seconds"] = c.vpu_seconds;
  d["hbm_seconds"] = c.hbm_seconds;
  d["ici_seconds"] = c.ici_seconds;
  d["flops"] = c.flops;
  d["mxu_flops"] = c.mxu_flops;
  d["hbm_bytes"] = c.hbm_bytes;
  d["ici_bytes"] = c.ici_bytes;
  d["bound"] = bounds[c.bound >= 0 && c.bound < TPURT_BOUND_COUNT ? c.bound : 0];
  return d;
}

// The cost of aten::<name>(*args, **kwargs) -> outputs on `generation`; None when the op is not
// in the runtime's op table or its plan refuses these shapes and dtypes (the caller says so).
py::object op_cost(const std::string& name, const std::string& overload, const py::tuple& args,
                   const py::dict& kwargs, const py::object& outputs, const std::string& generation) {
  tpurt_chip_info known{};
  known.struct_size = sizeof known;
  check(tpurt_generation_get_info(generation.c_str(), &known));  // a bad name raises; a refused plan is None
  const int op = tpurt_op_lookup((overload.empty() || overload == "default" ? name : name + "." + overload).c_str());
  if (op < 0) return py::none();
  auto handle = c10::Dispatcher::singleton().findSchema({"aten::" + name, overload == "default" ? "" : overload});
  if (!handle) return py::none();
  const auto& schema = handle->schema();
  // As the dispatcher passes them: a Python number where the schema takes a Tensor (x + 1e-6)
  // arrives as a wrapped number, which the runtime reads as a scalar argument.
  torch::jit::Stack stack;
  const auto& formals = schema.arguments();
  for (size_t i = 0; i < formals.size(); i++) {
    const auto& f = formals[i];
    py::object v;
    if (i < args.size()) v = args[i];
    else if (kwargs.contains(f.name().c_str())) v = kwargs[f.name().c_str()];
    else if (f.default_value()) {
      stack.push_back(*f.default_value());
      continue;
    } else {
      return py::none();
    }
    const bool number = py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) || py::isinstance<py::bool_>(v);
    if (number && f.type()->kind() == c10::TypeKind::TensorType) stack.emplace_back(torch::jit::toIValue(v, c10::NumberType::get()));
    else stack.push_back(torch::jit::toIValue(v, f.type()));
  }
  std::vector<c10::IValue> results;
  if (py::isinstance<py::tuple>(outputs) || py::isinstance<py::list>(outputs)) {
    for (const auto& o : outputs) {
      if (THPVariable_Check(o.ptr())) results.emplace_back(THPVariable_Unpack(o.ptr()));
      else if (py::isinstance<py::list>(o)) results.emplace_back(torch::jit::toIValue(o, c10::ListType::ofTensors()));
    }
  } else if (THPVariable_Check(outputs.ptr())) {
    results.emplace_back(THPVariable_Unpack(outputs.ptr()));
  }
  // an out= or in-place op returns its written arguments: the outputs are those
  tpurt_op_call call;
  begin_call(call, op, c10::Device(kTpu, 0));
  ArgStorage store(stack.size() + results.size());
  int n = 0;
  for (size_t i = 0; i < stack.size(); i++) {
    if (n >= TPURT_MAX_ARGS) return py::none();
    call.args[n++] = argument_value(schema, i, stack[i], store, describe_metadata);
  }
  const int nouts = describe_outputs(call, n, results, schema, stack, store, describe_metadata);
  seal_call(call, n, nouts);
  tpurt_cost c{};
  c.struct_size = sizeof c;
  return tpurt_op_cost(&call, generation.c_str(), &c) == TPURT_OK ? py::object(cost_dict(c)) : py::none();
}

py::dict gemm_cost(const std::string& generation, const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>>& gemms,
                   at::ScalarType dtype, int64_t hbm_bytes) {
  std::vector<tpurt_gemm_shape> g;
  for (const auto& [batch, m, n, k, causal] : gemms) g.push_back({batch, m, n, k, causal});
  tpurt_cost c{};
  c.struct_size = sizeof c;
  check(tpurt_gemm_cost(generation.c_str(), g.data(), static_cast<int>(g.size()), to_tpurt_dtype(dtype), hbm_bytes, &c));
  return cost_dict(c);
}

py::dict collective_cost(const std::string& generation, const std::string& kind, int64_t bytes,
                         const std::vector<int32_t>& axis_sizes, const std::vector<int32_t>& wraparound) {
  static const char* kinds[] = {
#define TPURT_X(e, name) name,
      TPURT_COLLECTIVE_LIST(TPURT_X)
#undef TPURT_X
  };
  int collective = -1;
  std::string known;
  for (int k = 0; k < TPURT_COLLECTIVE_COUNT; k++) {
    if (kind == kinds[k]) collective = k;
    known += (k ? ", " : "") + std::string(kinds[k]);
  }
  if (collective < 0) throw py::value_error("unknown collective '" + kind + "': " + known);
  if (axis_sizes.size() != wraparound.size()) throw py::value_error("one wraparound flag per axis");
  tpurt_cost c{};
  c.struct_size = sizeof c;
  check(tpurt_collective_cost(generation.c_str(), collective, bytes, axis_sizes.data(), wraparound.data(),
                              static_cast<int32_t>(axis_sizes.size()), &c));
  return cost_dict(c);
}

}  // namespace

void add_cost_model(py::module& m) {
  m.def("_op_cost", &op_cost);
  m.def("_gemm_cost", &gemm_cost);
  m.def("_collective_cost", &collective_cost);
}

}  // namespace torch_tpu
