"""Makes PrivateUse1 the ``tpu`` device and installs torch_tpu's objects over the stubs that
PyTorch >= 2.12 registers lazily for the name "tpu" (ARCHITECTURE.md, known traps)."""
import atexit
import importlib.abc
import importlib.util
import sys

import torch

from . import tpu as _tpu_module

_done = False


def register():
    global _done
    if _done:
        return
    _done = True
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", _tpu_module)
    for sub in ("amp", "metrics", "distributed"):  # `from torch.tpu.amp import autocast`, as with torch.cuda.amp
        sys.modules[f"torch.tpu.{sub}"] = getattr(_tpu_module, sub)
    sys.meta_path.insert(0, _SubmoduleAlias("torch.tpu.distributed", "torch_tpu.distributed"))
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    _after_import("torch._dynamo.device_interface", _install_dynamo_interface)
    _after_import("torch._inductor.codegen.wrapper", _install_inductor)
    for name in ("accelerate.state", "accelerate.utils.modeling"):
        _after_import(name, _install_accelerate)
    _after_import("torch.nn.attention.flex_attention", _install_flex_attention)
    for name in ("safetensors", "safetensors.torch"):
        _after_import(name, _install_safetensors)
    atexit.register(_release_autograd_graph_tasks)
    from .distributed import backend

    backend.register()


def _release_autograd_graph_tasks():
    """torch 2.13 keeps each backward's Python context (contextvars) in its autograd graph task.
    The tpu device thread can drop the last reference to a finished task after the interpreter
    has begun finalizing; the context's destructor then takes the GIL, which ends the thread
    inside a noexcept destructor: abort, exit status 134, at random after any tpu backward.
    A backward issued here without that context runs on each device thread after every earlier
    one, so when it returns no thread holds a task with a Python object (pytorch engine.cpp,
    thread_main drops a task at the end of its loop iteration)."""
    try:
        from torch.autograd.variable import Variable

        for d in range(torch.tpu.device_count()):
            x = torch.ones((), device=f"tpu:{d}", requires_grad=True)
            Variable._execution_engine.run_backward((x * 1,), (torch.ones((), device=f"tpu:{d}"),), False, False, (), True, True)
    except Exception:  # best effort while the process exits
        pass


def _install_dynamo_interface(mod):
    # Dynamo registers its own stub TpuInterface the first time any interface is looked up;
    # run that first, then put ours in its place.
    mod.init_device_reg()
    from ._dynamo_interface import TpuInterface

    mod.register_interface_for_device("tpu", TpuInterface)
    for i in range(torch.tpu.device_count()):
        mod.register_interface_for_device(f"tpu:{i}", TpuInterface)


def _install_inductor(mod):
    from . import compiler

    compiler.install(mod)


def _install_flex_attention(mod):
    from .compiler.flex_attention import allow_tpu

    allow_tpu(mod)


def _install_accelerate(mod):
    from . import _accelerate

    _accelerate.install(mod)


def _install_safetensors(mod):
    from . import _safetensors

    _safetensors.install(mod)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Runs a callback right after a module finishes importing (without importing it). It stays in
    sys.meta_path until the module is executed: an availability check (importlib.util.find_spec,
    as transformers and diffusers make for safetensors) asks for the spec without importing."""

    def __init__(self, name, callback):
        self.name, self.callback, self._finding = name, callback, False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self._finding:
            return None
        self._finding = True  # the other finders' spec, not this one's again
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        loader, finder = spec.loader, self

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                if finder in sys.meta_path:
                    sys.meta_path.remove(finder)
                    finder.callback(module)

        spec.loader = _Loader()
        return spec


class _SubmoduleAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`alias.X` is the module `real.X`: one module object under both names (a second copy would
    run its registrations again), and `python -m alias.X` runs real.X's file (runpy asks the loader
    for the code; the package itself is aliased in sys.modules, which runpy needs for __path__)."""

    def __init__(self, alias, real):
        self.alias, self.real = alias + ".", real + "."

    def _real_name(self, fullname):
        return self.real + fullname[len(self.alias):]

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith(self.alias):
            return None
        real = importlib.util.find_spec(self._real_name(fullname))
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=real.origin,
                                               is_package=real.submodule_search_locations is not None)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        # the import system returns what sys.modules holds under the name after exec_module
        sys.modules[module.__name__] = importlib.import_module(self._real_name(module.__name__))

    def get_code(self, fullname):
        real = importlib.util.find_spec(self._real_name(fullname))
        return real.loader.get_code(real.name)


def _after_import(name, callback):
    mod = sys.modules.get(name)
    if mod is None:
        sys.meta_path.insert(0, _PostImportFinder(name, callback))
    elif not getattr(getattr(mod, "__spec__", None), "_initializing", False):
        callback(mod)
    # else: the module is importing torch from its own top lines (`import safetensors.torch` first
    # thing in a script), so what the callback patches does not exist yet; safetensors.torch then
    # binds the safe_open of the safetensors package, patched already.
