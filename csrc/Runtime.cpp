// Shared glue: status -> exception, dtype mapping, tensor descriptors, the issuing Python line.
#include "Runtime.h"

#include <Python.h>
#include <c10/util/Exception.h>
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
// Python 3.11's frame layout: note_issue_site reads the calling thread's own frames without the GIL.
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#define TORCH_TPU_PEEK_FRAMES 1
#endif

#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace torch_tpu {

void check(tpurt_status status) {
  if (status == TPURT_OK) return;
  std::string msg = tpurt_last_error();
  switch (status) {  // the exception column of the runtime's status table
#define TPURT_X(code, value, exc) \
  case code:                      \
    TORCH_CHECK_WITH(exc, false, msg);
    TPURT_STATUS_LIST(TPURT_X)
#undef TPURT_X
  }
  TORCH_CHECK(false, msg);
}

namespace {
// One table: c10 scalar type <-> runtime dtype.
const std::pair<c10::ScalarType, int> kDtypes[] = {
    {c10::kBool, TPURT_BOOL}, {c10::kByte, TPURT_U8},      {c10::kChar, TPURT_I8},
    {c10::kShort, TPURT_I16}, {c10::kInt, TPURT_I32},      {c10::kLong, TPURT_I64},
    {c10::kHalf, TPURT_F16},  {c10::kBFloat16, TPURT_BF16}, {c10::kFloat, TPURT_F32},
    {c10::kDouble, TPURT_F64}, {c10::kComplexFloat, TPURT_C64},
};
}  // namespace

int to_tpurt_dtype(c10::ScalarType t) {
  for (auto& [st, d] : kDtypes)
    if (st == t) return d;
  return -1;
}

c10::ScalarType from_tpurt_dtype(int d) {
  for (auto& [st, dd] : kDtypes)
    if (dd == d) return st;
  return c10::ScalarType::Undefined;
}

tpurt_tensor describe(const at::Tensor& t) {
  tpurt_tensor d{};
  if (!t.defined()) {
    d.ndim = -1;
    return d;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(t.dim() <= TPURT_MAX_DIMS, "tpu tensors support at most ", TPURT_MAX_DIMS,
                              " dimensions, got ", t.dim());
  d.data = t.numel() ? t.data_ptr() : t.storage().mutable_data();
  d.dtype = to_tpurt_dtype(t.scalar_type());
  d.ndim = static_cast<int32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); i++) {
    d.sizes[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

int32_t current_stream(c10::DeviceIndex device) {
  return tpurt_stream_get_current(device < 0 ? tpurt_device_get() : device);
}

void synchronize_device(c10::DeviceIndex device) {
  if (device >= 0) check(tpurt_device_synchronize(device));
}

namespace {
struct PairHash {
  size_t operator()(const std::pair<const void*, const void*>& k) const {
    return std::hash<const void*>()(k.first) * 31 + std::hash<const void*>()(k.second);
  }
};

// torch's and torch_tpu's directories: their frames are not the line a user wrote.
bool in_library(const char* file) {
  static std::vector<std::string> dirs = [] {
    std::vector<std::string> d;
    for (const char* name : {"torch", "torch_tpu"}) {
      PyObject* key = PyUnicode_FromString(name);
      PyObject* m = key ? PyImport_GetModule(key) : nullptr;  // imported by now; never imports
      Py_XDECREF(key);
      PyObject* f = m ? PyObject_GetAttrString(m, "__file__") : nullptr;
      const char* path = f ? PyUnicode_AsUTF8(f) : nullptr;
      if (path) d.emplace_back(std::string(path).substr(0, std::string(path).rfind('/') + 1));
      Py_XDECREF(f);
      Py_XDECREF(m);
    }
    PyErr_Clear();
    return d;
  }();
  for (const auto& d : dirs)
    if (std::strncmp(file, d.c_str(), d.size()) == 0) return true;
  return false;
}
// Whether the thread is inside Python code, read without the GIL (only this thread changes its own
// frame stack): threads with a thread state but no frame, as autograd's device threads, then
// issue without taking the GIL.
bool runs_python(PyThreadState* ts) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
  return ts->cframe && ts->cframe->current_frame;
#else
  return true;  // found out under the GIL
#endif
}

// Interned "file:line" strings, under the GIL; kept for the process: queued commands point at them.
const char* intern_site(const char* file, int line) {
  static auto* sites = new std::unordered_set<std::string>();
  return sites->insert(std::string(file) + ":" + std::to_string(line)).first->c_str();
}

#ifdef TORCH_TPU_PEEK_FRAMES
// Whether a code object is torch's or torch_tpu's, learnt under the GIL once per thread and code
// object; the code object is then held for the process, so its address names it for good.
bool learn_library(PyCodeObject* code) {
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_INCREF(code);
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  bool lib = !file || in_library(file);
  if (!file) PyErr_Clear();
  PyGILState_Release(gil);
  return lib;
}

const char* learn_site(PyCodeObject* code, const _PyInterpreterFrame* f) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int line = PyCode_Addr2Line(code, static_cast<int>((f->prev_instr - _PyCode_CODE(code)) * sizeof(_Py_CODEUNIT)));
  const char* site = intern_site(PyUnicode_AsUTF8(code->co_filename), line);
  PyGILState_Release(gil);
  return site;
}

// The first frame outside torch and torch_tpu, read without the GIL (only this thread changes its
// own frames): a place issuing again is a lookup in this thread's caches.
const char* site_of_frames(PyThreadState* ts) {
  thread_local std::unordered_map<const void*, bool> library;
  thread_local std::unordered_map<std::pair<const void*, const void*>, const char*, PairHash> sites;
  for (const _PyInterpreterFrame* f = ts->cframe->current_frame; f; f = f->previous) {
    PyCodeObject* code = f->f_code;
    auto lib = library.find(code);
    if (lib == library.end()) lib = library.emplace(code, learn_library(code)).first;
    if (lib->second) continue;
    auto key = std::make_pair(static_cast<const void*>(code), static_cast<const void*>(f->prev_instr));
    auto it = sites.find(key);
    if (it == sites.end()) it = sites.emplace(key, learn_site(code, f)).first;
    return it->second;
  }
  return nullptr;
}
#else
// Other Pythons: the frames through the public API, under the GIL.
const char* site_of_frames(PyThreadState*) {
  const char* site = nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f && !site) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    if (file && !in_library(file)) site = intern_site(file, PyFrame_GetLineNumber(f));
    if (!file) PyErr_Clear();
    Py_DECREF(code);
    PyFrameObject* back = site ? nullptr : PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  PyGILState_Release(gil);
  return site;
}
#endif
}  // namespace

void note_issue_site() {
  PyThreadState* ts = Py_IsInitialized() ? PyGILState_GetThisThreadState() : nullptr;
  tpurt_set_issue_site(ts && runs_python(ts) ? site_of_frames(ts) : nullptr);
}

}  // namespace torch_tpu
