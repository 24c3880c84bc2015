"""Loads the build of the C runtime for one instruction set, before the extension needs it.

runtime/Makefile builds the whole library once per x86-64 level (tpurt.h's TPURT_ISA_LIST),
each named libtpurt.so inside: the extension (and every graph torch.compile builds) asks the
dynamic loader for libtpurt.so, which is then the build loaded here. TPU_ISA picks one; by
default the widest this host runs. A value the host cannot run is not an import error (importing
torch must not fail, as with CUDA): the portable build loads and the runtime names the value at
the device's first use (chip.c), like every other TPU_* variable."""
import ctypes
import os
import pathlib

LIB = pathlib.Path(__file__).parent / "lib"
_probe = None  # libtpurt-isa.so: which builds the host runs, before any is loaded
_loaded = None  # the loaded build's handle


def _isa_probe():
    global _probe
    if _probe is None:
        _probe = ctypes.CDLL(str(LIB / "libtpurt-isa.so"))
        _probe.tpurt_isa_name.restype = ctypes.c_char_p
        _probe.tpurt_isa_host_runs.argtypes = [ctypes.c_char_p]
        _probe.tpurt_isa_level.argtypes = [ctypes.c_char_p]
        _probe.tpurt_isa_level.restype = ctypes.c_char_p
    return _probe


def builds() -> list:
    """Every build's name, widest first."""
    names, probe = [], _isa_probe()
    while (name := probe.tpurt_isa_name(len(names))) is not None:
        names.append(name.decode())
    return names


def host_runs() -> list:
    """The builds this host's CPU runs (and that are installed), widest first."""
    probe = _isa_probe()
    return [n for n in builds() if probe.tpurt_isa_host_runs(n.encode()) and (LIB / library_file(n)).exists()]


def level(name: str) -> str:
    """The compiler's name of the build's x86-64 level (``-march=``)."""
    return _isa_probe().tpurt_isa_level(name.encode()).decode()


def library_file(name: str) -> str:
    return "libtpurt.so" if name == "portable" else f"libtpurt-{name}.so"


def load() -> str:
    """Loads the build TPU_ISA names (else the widest the host runs), or with TPU_SANITIZER=asan
    the sanitized build (`make test-asan`), when it is there; returns the name of the
    instruction set the loaded library was compiled for."""
    global _loaded
    if _loaded is None:
        runs = host_runs()
        wanted = os.environ.get("TPU_ISA") or runs[0]
        file = library_file(wanted if wanted in runs else "portable")
        asan = os.environ.get("TPU_SANITIZER") == "asan"
        if asan and (LIB / "libtpurt-asan.so").exists():
            file = "libtpurt-asan.so"  # it must come after the ASan runtime: LD_PRELOAD (make test-asan)
        _loaded = ctypes.CDLL(str(LIB / file))
        _loaded.tpurt_isa.restype = ctypes.c_char_p
        if asan:
            _load_sanitized_extension()
    return _loaded.tpurt_isa().decode()


def _load_sanitized_extension():
    """The extension built under ASan + UBSan (`make test-asan` puts it in lib/asan), in place of
    the plain one: imported as torch_tpu._C before anything imports that."""
    import importlib.machinery
    import importlib.util
    import sys

    built = sorted((LIB / "asan").glob("_C.*.so"))
    if built:
        loader = importlib.machinery.ExtensionFileLoader("torch_tpu._C", str(built[0]))
        spec = importlib.util.spec_from_file_location("torch_tpu._C", built[0], loader=loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules["torch_tpu._C"] = module
        spec.loader.exec_module(module)
