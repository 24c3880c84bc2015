// Python bindings of torch_tpu._C: thin wrappers over the runtime's C API.
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include <cstring>
#include <map>
#include <unordered_map>

#include "Generator.h"
#include "Runtime.h"

namespace torch_tpu {
std::map<std::string, std::pair<int64_t, std::string>> fallback_counts();
void reset_fallback_counts();
void add_cost_model(py::module& m);
void add_distributed(py::module& m);

PyExc python_exception_kind(const std::exception& e, std::string* message, bool take_runtime) {
  auto kind_of = [&](PyObject* type) {
    return !type ? PyExc::kOther
           : PyErr_GivenExceptionMatches(type, PyExc_NotImplementedError) ? PyExc::kNotImplemented
           : PyErr_GivenExceptionMatches(type, PyExc_AssertionError)      ? PyExc::kAssertion
           : take_runtime && type == PyExc_RuntimeError                   ? PyExc::kRuntime
                                                                           : PyExc::kOther;
  };
  if (const auto* pe = dynamic_cast<const pybind11::error_already_set*>(&e)) {  // holds the error
    pybind11::gil_scoped_acquire gil;
    PyExc kind = kind_of(pe->type().ptr());
    *message = pybind11::str(pe->value()).cast<std::string>();
    return kind;
  }
  const auto* pe = dynamic_cast<const python_error*>(&e);
  if (!pe) return PyExc::kOther;
  pybind11::gil_scoped_acquire gil;
  // Not yet persisted, the exception is still the interpreter's pending error.
  PyObject *type = pe->type, *value = pe->value, *tb = nullptr;
  bool pending = !type;
  if (pending) PyErr_Fetch(&type, &value, &tb);
  PyExc kind = kind_of(type);
  if (value) {
    PyObject* str = PyObject_Str(value);
    if (str && PyUnicode_AsUTF8(str)) *message = PyUnicode_AsUTF8(str);
    Py_XDECREF(str);
    PyErr_Clear();
  }
  if (pending && kind == PyExc::kOther) {
    PyErr_Restore(type, value, tb);
  } else if (pending) {
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
  }
  return kind;
}

// tpu-only hooks by overload name: argument checks (torch_tpu/tpu_checks.py) and shape
// functions that stand in for a Meta kernel PyTorch ships (torch_tpu/meta). Registered once at
// import, before any op runs; read without a lock after that.
namespace {
struct OpHooks {
  pybind11::object check, meta;
};
std::unordered_map<std::string, OpHooks>& op_hooks() {
  static auto* hooks = new std::unordered_map<std::string, OpHooks>();  // never destroyed
  return *hooks;
}
const OpHooks* hooks_of(const std::string& name) {
  auto it = op_hooks().find(name);
  return it == op_hooks().end() ? nullptr : &it->second;
}
// An argument as Python sees it: a dtype (the stack holds ScalarType as an int) as torch.dtype.
pybind11::object python_value(const c10::FunctionSchema& schema, size_t i, const c10::IValue& v) {
  if (v.isInt() && i < schema.arguments().size()) {
    c10::TypePtr t = schema.arguments()[i].real_type();
    if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
    if (t->kind() == c10::TypeKind::ScalarTypeType)
      return pybind11::reinterpret_borrow<pybind11::object>(
          reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<c10::ScalarType>(v.toInt()))));
  }
  return torch::jit::toPyObject(v);
}

// The stack as a Python call: positional arguments, keyword-only ones (out=, generator=) by name.
std::pair<pybind11::tuple, pybind11::dict> python_call_args(const c10::FunctionSchema& schema,
                                                            const torch::jit::Stack& args) {
  pybind11::list positional;
  pybind11::dict keywords;
  for (size_t i = 0; i < args.size(); i++) {
    auto value = python_value(schema, i, args[i]);
    if (i < schema.arguments().size() && schema.arguments()[i].kwarg_only())
      keywords[pybind11::str(schema.arguments()[i].name())] = value;
    else
      positional.append(value);
  }
  return {pybind11::tuple(positional), keywords};
}
}  // namespace

bool run_op_check(const c10::FunctionSchema& schema, const std::string& name, const torch::jit::Stack& args) {
  const OpHooks* h = hooks_of(name);
  if (!h || !h->check) return false;
  pybind11::gil_scoped_acquire gil;
  pybind11::tuple py_args(args.size());
  for (size_t i = 0; i < args.size(); i++) py_args[i] = python_value(schema, i, args[i]);
  // a raised Python exception travels to the caller with its type
  return h->check(*py_args).ptr() == Py_True;
}

bool has_tpu_meta(const std::string& name) {
  const OpHooks* h = hooks_of(name);
  return h && h->meta;
}

bool run_tpu_meta(const c10::FunctionSchema& schema, const std::string& name, torch::jit::Stack& stack) {
  const OpHooks* h = hooks_of(name);
  if (!h || !h->meta) return false;
  pybind11::gil_scoped_acquire gil;
  auto [positional, keywords] = python_call_args(schema, stack);
  pybind11::object r = h->meta(*positional, **keywords);
  const auto& rets = schema.returns();
  stack.clear();
  if (rets.size() == 1) {
    stack.push_back(torch::jit::toIValue(r, rets[0].type()));
  } else if (!rets.empty()) {
    auto seq = r.cast<pybind11::sequence>();
    TORCH_CHECK(seq.size() == rets.size(), name, ": the tpu shape function returned ", seq.size(), " values, not ",
                rets.size());
    for (size_t i = 0; i < rets.size(); i++) stack.push_back(torch::jit::toIValue(seq[i], rets[i].type()));
  }
  return true;
}
}  // namespace torch_tpu

namespace {
using namespace torch_tpu;
namespace py = pybind11;

py::dict info_dict(const tpurt_chip_info& i) {
  py::dict d;
  d["generation"] = std::string(i.generation);
  d["accelerator_type"] = std::string(i.accelerator_type);
  d["topology"] = std::string(i.topology);
  d["global_index"] = i.global_index;
  d["hbm_bytes"] = i.hbm_bytes;
  d["bf16_tflops"] = i.bf16_tflops;
  d["hbm_GBps"] = i.hbm_GBps;
  d["ici_GBps_bidir"] = i.ici_GBps_bidir;
  d["mxu_dim"] = i.mxu_dim;
  d["mxu_count"] = i.mxu_count;
  d["tensorcores"] = i.tensorcores;
  d["usd_per_chip_hour"] = i.usd_per_chip_hour;
  d["slice_chips"] = i.slice_chips;
  return d;
}

py::dict chip_info(int device) {
  tpurt_chip_info i{};
  i.struct_size = sizeof i;
  check(tpurt_chip_get_info(device, &i));
  return info_dict(i);
}

py::dict generation_info(const std::string& generation) {
  tpurt_chip_info i{};
  i.struct_size = sizeof i;
  check(tpurt_generation_get_info(generation.c_str(), &i));
  return info_dict(i);
}

py::dict memory_stats(int device) {
  tpurt_memory_stats m{};
  m.struct_size = sizeof m;
  check(tpurt_memory_get_stats(device, &m));
  py::dict d;
  d["allocated_bytes.all.current"] = m.allocated_bytes;
  d["allocated_bytes.all.peak"] = m.allocated_peak;
  d["reserved_bytes.all.current"] = m.reserved_bytes;
  d["reserved_bytes.all.peak"] = m.reserved_peak;
  d["requested_bytes.all.current"] = m.requested_bytes;
  d["allocation.all.allocated"] = m.alloc_count;
  d["allocation.all.freed"] = m.free_count;
  d["allocation.all.current"] = m.alloc_count - m.free_count;
  d["segment.all.current"] = m.segment_count;
  d["segment.all.allocated"] = m.segment_alloc_count;
  d["segment.all.freed"] = m.segment_free_count;
  d["num_alloc_retries"] = m.cache_flushes;
  d["num_ooms"] = m.oom_count;
  d["capacity_bytes"] = m.capacity_bytes;
  d["largest_free_block"] = m.largest_free_block;
  return d;
}

py::dict metrics() {
  tpurt_metrics m{};
  m.struct_size = sizeof m;
  tpurt_metrics_get(&m);
  py::dict d;
  d["ops_executed"] = m.ops_executed;
  d["ops_f64"] = m.ops_f64;
  d["h2d_count"] = m.h2d_count;
  d["h2d_bytes"] = m.h2d_bytes;
  d["d2h_count"] = m.d2h_count;
  d["d2h_bytes"] = m.d2h_bytes;
  d["d2d_count"] = m.d2d_count;
  d["d2d_bytes"] = m.d2d_bytes;
  d["alloc_count"] = m.alloc_count;
  d["kernel_errors"] = m.kernel_errors;
  d["fused_chains"] = m.fused_chains;
  d["fused_ops"] = m.fused_ops;
  d["unplanned_temp_bytes"] = m.unplanned_temp_bytes;
  py::dict per_kernel, unplanned;
  for (int i = 0; i < tpurt_op_name_count(); i++) {
    int op = tpurt_op_lookup(tpurt_op_name(i));
    std::string k = tpurt_op_kernel_name(op);
    if (!per_kernel.contains(k) && tpurt_metrics_op_count(op)) per_kernel[k.c_str()] = tpurt_metrics_op_count(op);
    if (!unplanned.contains(k) && tpurt_metrics_op_unplanned_bytes(op))
      unplanned[k.c_str()] = tpurt_metrics_op_unplanned_bytes(op);
  }
  d["kernels"] = per_kernel;
  d["unplanned_temp_bytes_by_kernel"] = unplanned;
  py::dict fb;
  for (auto& [name, e] : fallback_counts()) fb[name.c_str()] = py::make_tuple(e.first, e.second);
  d["fallbacks"] = fb;
  return d;
}

std::vector<std::pair<std::string, std::string>> native_ops() {
  std::vector<std::pair<std::string, std::string>> v;
  for (int i = 0; i < tpurt_op_name_count(); i++) {
    const char* n = tpurt_op_name(i);
    v.emplace_back(n, tpurt_op_kernel_name(tpurt_op_lookup(n)));
  }
  return v;
}


// torch.compile's generated C++ kernels (torch_tpu/compiler/launch.py): tensors become their
// data pointers, Python ints and floats int64 slots (floats as a double's bits), and the launch
// is a command on the stream of the tensors' tpu device, ordered with eager ops. CPU tensors
// are not stream-ordered memory: a small one the kernel only reads (const_args[i], from its
// C++ signature) travels in the command as it is now (a CPU scalar, as CUDA passes it by
// value); for any other the launch waits for the kernel. A kernel with no tpu tensor at all
// (CPU ops of a tpu graph) runs here and now.
void launch_host_kernel(uintptr_t fn, const std::string& name, const py::bytes& const_args, const py::args& args) {
  TORCH_CHECK(args.size() <= TPURT_MAX_HOST_KERNEL_ARGS, "compiled kernel ", name, ": too many arguments");
  constexpr int64_t kSnapshotMax = 256;
  const std::string_view is_const(const_args);
  int64_t slots[TPURT_MAX_HOST_KERNEL_ARGS];
  tpurt_host_arg_copy copies[TPURT_MAX_HOST_KERNEL_ARGS];
  int n = 0, ncopies = 0;
  int device = -1;
  bool wait = false;
  for (const auto& h : args) {
    PyObject* o = h.ptr();
    if (THPVariable_Check(o)) {
      const auto& t = THPVariable_Unpack(o);
      if (t.device().type() == kTpu) {
        TORCH_CHECK(device < 0 || device == t.device().index(), "compiled kernel ", name, ": tensors on tpu:", device,
                    " and ", t.device());
        device = t.device().index();
      } else {
        TORCH_CHECK(t.device().is_cpu(), "compiled kernel ", name, ": a tensor on ", t.device());
        int64_t bytes = static_cast<int64_t>(t.numel() * t.element_size());
        bool read_only = static_cast<size_t>(n) < is_const.size() && is_const[n];
        if (read_only && t.is_contiguous() && bytes <= kSnapshotMax) {
          copies[ncopies++] = tpurt_host_arg_copy{n, static_cast<int32_t>(bytes), t.data_ptr()};
        } else {
          wait = true;
        }
      }
      slots[n++] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
    } else if (PyFloat_Check(o)) {
      double d = PyFloat_AS_DOUBLE(o);
      std::memcpy(&slots[n++], &d, sizeof d);
    } else {
      slots[n++] = py::cast<int64_t>(h);
    }
  }
  auto kernel = reinterpret_cast<tpurt_host_kernel_fn>(fn);
  py::gil_scoped_release nogil;
  if (device < 0) {
    char msg[512] = "";
    TORCH_CHECK(kernel(slots, msg, sizeof msg) == 0, "compiled kernel ", name, ": ", msg[0] ? msg : "failed");
    return;
  }
  int32_t stream = current_stream(static_cast<c10::DeviceIndex>(device));
  check(tpurt_host_kernel_launch(stream, kernel, slots, n, name.c_str(), copies, wait ? 0 : ncopies));
  if (wait) check(tpurt_stream_synchronize(stream));
}
}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native extension: the emulated TPU runtime and its PyTorch registration";
  m.def("_init", [] { check(tpurt_init()); });
  m.def("_runtime_version", [] { return py::make_tuple(TPURT_VERSION_MAJOR, TPURT_VERSION_MINOR); });
  m.def("_device_count", [] { return tpurt_device_count(); });
  m.def("_current_device", [] { return tpurt_device_get(); });
  m.def("_set_device", [](int d) { check(tpurt_device_set(d)); });
  m.def("_synchronize", [](int d) {
    py::gil_scoped_release nogil;
    check(tpurt_device_synchronize(d));
  });
  m.def("_chip_info", &chip_info);
  m.def("_generation_info", &generation_info);
  add_cost_model(m);
  add_distributed(m);
  m.def("_memory_stats", &memory_stats);
  m.def("_empty_cache", [] {
    py::gil_scoped_release nogil;
    tpurt_empty_cache();
  });
  m.def("_reset_peak_memory_stats", [](int d) { check(tpurt_memory_reset_peak(d)); });
  m.def("_reset_accumulated_memory_stats", [](int d) { check(tpurt_memory_reset_counts(d)); });
  m.def("_metrics", &metrics);
  m.def("_metrics_reset", [] {
    tpurt_metrics_reset();
    reset_fallback_counts();
  });
  m.def("_native_ops", &native_ops);
  m.def("_op_kinds", [] {  // overload -> the op table's kind ("matmul", "elementwise", ...)
    std::map<std::string, std::string> kinds;
    for (int i = 0; i < tpurt_op_name_count(); i++) {
      tpurt_op_info info{};
      info.struct_size = sizeof info;
      check(tpurt_op_get_info(tpurt_op_lookup(tpurt_op_name(i)), &info));
      kinds[tpurt_op_name(i)] = tpurt_op_kind_name(info.kind);
    }
    return kinds;
  });
  m.def("_launch_host_kernel", &launch_host_kernel);
  m.def("_environment", [] {  // the runtime's table: (name, description, value or None)
    py::list l;
    for (int e = 0; e < TPURT_ENV_COUNT; e++) {
      const char* v = tpurt_env_get(static_cast<tpurt_env>(e));
      l.append(py::make_tuple(tpurt_env_name(e), tpurt_env_doc(e), v ? py::object(py::str(v)) : py::none()));
    }
    return l;
  });
  // The runtime's (enum, value, name) tables, for Python to read rather than copy: name -> value.
#define TPURT_NAME_VALUE(e, value, name) d[name] = value;
  m.def("_eager_modes", [] {
    py::dict d;
    TPURT_EAGER_MODE_LIST(TPURT_NAME_VALUE)
    return d;
  });
  m.def("_matmul_precisions", [] {
    py::dict d;
    TPURT_PRECISION_LIST(TPURT_NAME_VALUE)
    return d;
  });
#undef TPURT_NAME_VALUE
  m.def("_can_hold_dtype", [](at::ScalarType dtype) { return storable(dtype); });
  m.def("_native_dtypes", [] {  // the dtypes the runtime's kernels compute in, by torch name
    py::list l;
#define TPURT_X(e, ctype, size, name, c10_name) l.append(name);
    TPURT_DTYPE_LIST(TPURT_X)
#undef TPURT_X
    return l;
  });
  m.def("_set_eager_mode", [](int mode) { tpurt_set_eager_mode(static_cast<tpurt_eager_mode>(mode)); });
  m.def("_get_eager_mode", [] { return static_cast<int>(tpurt_get_eager_mode()); });
  m.def("_set_matmul_precision", [](int p) { tpurt_set_matmul_precision(static_cast<tpurt_precision>(p)); });
  m.def("_get_matmul_precision", [] { return static_cast<int>(tpurt_get_matmul_precision()); });
  m.def("_set_op_check", [](const std::string& name, py::object fn) { op_hooks()[name].check = std::move(fn); });
  m.def("_set_op_meta", [](const std::string& name, py::object fn) { op_hooks()[name].meta = std::move(fn); });
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(d)));
  });
}
