"""Runs torch.compile's generated C++ kernels on the tpu stream.

Inductor's C++ code generation writes a loop nest `kernel(const float* in_ptr0, float*
out_ptr0, const int64_t ks0, ...)`. Here each one gets a uniform entry point, `kernel`, taking
the arguments as an int64 array, and every call becomes a command on the stream of the tensors'
device (tpurt_host_kernel_launch): in order with the eager tpu ops the graph also calls
(matmul, convolution, attention), with no host synchronisation per kernel."""
import functools
import pathlib
import re

from torch._inductor.async_compile import AsyncCompile, get_compile_threads
from torch._inductor.codecache import CppCodeCache, LambdaFuture

from .. import _C

# The OpenMP calls GCC lowers Inductor's loops to (#pragma omp parallel / for / single): linked
# with -Wl,--wrap they bind to the runtime's pool (runtime/src/omp.c), so generated loops and
# the runtime's kernels share one set of threads instead of two that take each other's cores.
_POOL_OPENMP = ("GOMP_parallel", "GOMP_barrier", "GOMP_single_start", "omp_get_thread_num", "omp_get_num_threads",
                "omp_get_max_threads")
_LIB = pathlib.Path(__file__).resolve().parent.parent / "lib"


@functools.cache
def pool_flags():
    """The link flags of a kernel on the pool. Inductor's C++ kernel cache keys a compile by its
    command line, so the library directory is named by a path that depends on the runtime's
    contents, not on where this package lives: a link in Inductor's cache directory (made or
    re-pointed here), so a second checkout or virtual environment of the same build reuses the
    kernels the first compiled. At run time the loaded libtpurt.so answers (same soname)."""
    import hashlib
    import os

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    build = hashlib.sha256((_LIB / "libtpurt.so").read_bytes()).hexdigest()[:16]
    stable = pathlib.Path(cache_dir()) / f"torch_tpu_lib_{build}"
    if not (stable / "libtpurt.so").exists():  # absent, or left pointing at a removed checkout
        stable.parent.mkdir(parents=True, exist_ok=True)
        tmp = stable.with_name(f"{stable.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(_LIB, target_is_directory=True)
        os.replace(tmp, stable)
    return (*(f"-Wl,--wrap={s}" for s in _POOL_OPENMP), f"-L{stable}", "-ltpurt", f"-Wl,-rpath,{stable}")
# What the pool's OpenMP covers: the constructs above with the static schedule. A dynamic
# schedule, reduction clause, critical section or other omp_ call would need libgomp's own
# team, so such a kernel keeps libgomp.
_PRAGMA = re.compile(r"#pragma\s+omp\s+(.*)")
_POOL_PRAGMA = re.compile(r"(parallel(\s+num_threads\(\d+\))?|for(\s+(nowait|collapse\(\d+\)|schedule\(static(,\s*\d+)?\)))*"
                          r"|single(\s+nowait)?|barrier)\s*$")
_OMP_CALL = re.compile(r"\bomp_\w+")


def runs_on_pool(source_code):
    """Whether every OpenMP construct and call of a kernel is one the pool implements."""
    if any(not _POOL_PRAGMA.match(p.strip()) for p in _PRAGMA.findall(source_code)):
        return False
    return all(call in _POOL_OPENMP for call in _OMP_CALL.findall(source_code))

# The entry every generated kernel is given; Inductor's own function is renamed to BODY.
BODY = "tpu_kernel_body"
_ENTRY = """
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
extern "C" void {body}({params});
static inline double tpu_arg_as_double(int64_t bits) {{ double d; std::memcpy(&d, &bits, sizeof d); return d; }}
extern "C" int kernel(const int64_t* a, char* msg, size_t msg_size) {{
  try {{
    {body}({args});
    return 0;
  }} catch (const std::exception& e) {{
    std::snprintf(msg, msg_size, "%s", e.what());
  }} catch (...) {{
    std::snprintf(msg, msg_size, "unknown C++ exception");
  }}
  return 1;
}}
"""


def _param(argtype):
    """The entry's declaration of a kernel parameter. Pointers are declared void: the entry
    includes no ATen header, so `at::BFloat16*` or `at::Half*` would not compile there (the
    body is extern "C", so only the calling convention, the same for every pointer, links)."""
    t = argtype.strip()
    if "*" in t:
        return "const void*" if t.startswith("const ") else "void*"
    return t


def _unpack(i, argtype):
    """The C++ expression that reads argument i of type argtype from the int64 array."""
    t = argtype.strip()
    if "*" in t:
        return f"reinterpret_cast<{_param(t)}>(a[{i}])"
    if t.removeprefix("const ").strip() in ("double", "float"):
        return f"static_cast<{t.removeprefix('const ').strip()}>(tpu_arg_as_double(a[{i}]))"
    return f"static_cast<{t.removeprefix('const ').strip()}>(a[{i}])"


def kernel_source(source_code):
    """Inductor's kernel with its function renamed to BODY (compiled as Inductor compiles CPU
    kernels: optimized, with its precompiled cpp_prefix.h)."""
    renamed = source_code.replace('void  kernel(', f'void {BODY}(').replace('void kernel(', f'void {BODY}(')
    if renamed == source_code:
        raise RuntimeError("torch_tpu: Inductor's C++ kernel has no function named 'kernel' (torch version?)")
    return renamed


def entry_source(argtypes):
    """The uniform entry: unpacks the argument array and calls BODY (the kernel's other file)."""
    args = ", ".join(_unpack(i, t) for i, t in enumerate(argtypes))
    params = ", ".join(_param(t) for t in argtypes)
    return _ENTRY.format(body=BODY, params=params, args=args)


class TpuKernel:
    """A compiled kernel: calling it with tensors and integers launches it on the stream."""

    __slots__ = ("name", "_call")

    def __init__(self, name, cfunc, argtypes):
        import ctypes

        self.name = name
        read_only = bytes(1 if t.strip().startswith("const ") and "*" in t else 0 for t in argtypes)
        self._call = functools.partial(_C._launch_host_kernel, ctypes.cast(cfunc, ctypes.c_void_p).value, name,
                                       read_only)

    def __call__(self, *args):
        return self._call(*args)


class TpuAsyncCompile(AsyncCompile):
    """Inductor's compile pool, with C++ kernels compiled for the tpu stream instead of as
    Python bindings that run on the calling thread (the wrapper's kernel definitions call
    tpu_kernel where Inductor writes cpp_pybinding)."""

    def tpu_kernel(self, name, argtypes, source_code):
        body = kernel_source(source_code)
        flags = pool_flags() if runs_on_pool(body) else ()
        # as CppPythonBindingsCodeCache builds CPU kernels: the entry is the main file (built at
        # -O1), the kernel the optimized one, with the precompiled prefix header of device "cpu"
        load = functools.partial(CppCodeCache.load_async, entry_source(argtypes), "cpu", extra_flags=flags,
                                 optimized_code=body)
        if get_compile_threads() <= 1:
            return TpuKernel(name, load()().kernel, argtypes)
        get = load(submit_fn=self.submit)
        return LambdaFuture(lambda: TpuKernel(name, get().kernel, argtypes))
