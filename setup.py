"""Builds the C runtime (runtime/, plain make) and the thin C++ extension torch_tpu._C.

Build without isolation so the extension compiles against the installed torch:
    pip install --no-build-isolation -e .
"""
import os
import shutil
import subprocess

from setuptools import setup

# Building must not autoload an installed torch_tpu: a stale editable install (pointing at a
# deleted checkout) would make `import torch` fail before anything is built.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
CCACHE_DIR = "/usr/lib/ccache"  # Debian's compiler symlinks through ccache


class BuildRuntimeThenExtension(BuildExtension):
    def run(self):
        lib_dir = os.path.join(ROOT, "torch_tpu", "lib")
        subprocess.check_call(["make", "-C", os.path.join(ROOT, "runtime"), f"-j{os.cpu_count() or 2}",
                               f"OUT={lib_dir}"])
        if not self.inplace:  # a regular (non-editable) build: ship the runtime in the wheel
            dest = os.path.join(self.build_lib, "torch_tpu", "lib")
            os.makedirs(dest, exist_ok=True)
            for name in os.listdir(lib_dir):  # a build per instruction set, and libtpurt-isa.so
                if name.startswith("libtpurt") and name.endswith(".so") and name != "libtpurt-asan.so":
                    shutil.copy2(os.path.join(lib_dir, name), dest)
        if not SANITIZE:  # (make test-asan names its own)
            # One place for the extension's objects whichever way it is built: an editable
            # install builds in a fresh temp dir, where ccache cannot match a wheel build's
            # sources (it makes paths relative to the working directory), so the wheel built
            # right after it (make wheel-suite) compiled every C++ file again (3 min on 2 cores).
            self.build_temp = os.path.join(ROOT, "build", "temp-ext")
        super().run()


os.environ.setdefault("CCACHE_BASEDIR", ROOT)  # cache hits across clones of the repo,
os.environ.setdefault("CCACHE_NOHASHDIR", "true")  # -g builds too (their debug info names the first clone)
if os.path.isdir(CCACHE_DIR) and CCACHE_DIR not in os.environ.get("PATH", ""):
    os.environ["PATH"] = CCACHE_DIR + os.pathsep + os.environ.get("PATH", "")

# TORCH_TPU_SANITIZER=asan: the extension under ASan + UBSan, for `make test-asan` (which builds it
# apart, into torch_tpu/lib/asan, and loads it with TPU_SANITIZER=asan: torch_tpu/_runtime.py).
SANITIZE = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"] \
    if os.environ.get("TORCH_TPU_SANITIZER") == "asan" else []

setup(
    ext_modules=[
        CppExtension(
            "torch_tpu._C",
            sorted(os.path.join("csrc", f) for f in os.listdir(os.path.join(ROOT, "csrc")) if f.endswith(".cpp")),
            # kineto: Profiler.cpp's child profiler implements Kineto's interface
            include_dirs=[os.path.join(ROOT, "runtime", "include"), os.path.join(include_paths()[0], "kineto")],
            library_dirs=[os.path.join(ROOT, "torch_tpu", "lib")],
            libraries=["tpurt"],
            extra_compile_args=["-std=c++20", "-O2", "-Wno-unused-parameter"] + SANITIZE,
            extra_link_args=["-Wl,-rpath,$ORIGIN/lib"] + SANITIZE[-2:],
        )
    ],
    cmdclass={"build_ext": BuildRuntimeThenExtension.with_options(use_ninja=True)},
    package_data={"torch_tpu": ["lib/libtpurt*.so", "specs/*.json"]},
    exclude_package_data={"torch_tpu": ["lib/libtpurt-asan.so", "lib/asan/*"]},  # make test-asan's builds
)
