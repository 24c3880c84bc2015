"""torch.compile for tpu: the backend "tpu" and Inductor's code generation for the device.

Registration happens right after torch._inductor.codegen.wrapper is imported: Inductor's own
lazy registration for "tpu" (Pallas, in init_backend_registration, which imports that module
first) then finds ours in place (ARCHITECTURE.md, known traps)."""
import functools
import hashlib
import pathlib

import torch

from .. import _C


# Scheduler passes that torch 2.13 skips for C++ kernels by testing node.is_cpu(), i.e.
# device.type == "cpu" (scheduler.py: loop reordering, reindexing and index inversion in
# fusion): tpu graphs are C++ kernels too, and reindexing one crashes. The change upstream
# wants: ask the device's scheduling whether it generates C++ instead of the device type.
CPP_KERNEL_CONFIG = {
    "loop_ordering_after_fusion": False,
    "loop_reindexing_after_fusion": False,
    "loop_index_inversion_in_fusion": False,
}
_TESTED_TORCH = "2.13."


# Options of backend "tpu" that are not Inductor config keys.
TPU_OPTIONS = ("bounded_dynamism",)


def backend(gm, example_inputs, options=None):
    """torch.compile(m, backend="tpu"): Inductor, with TPU compile semantics (static shapes
    unless marked dynamic, recompiles counted with their cause: report.py) and the tpu
    decomposition table (every op the runtime's table calls matmul-like stays one call into
    the tpu kernel, so it rounds its operands as eager tpu does)."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    from . import report

    options = dict(options or {})
    tpu = {k: options.pop(k) for k in TPU_OPTIONS if k in options}
    report.prepare(gm, example_inputs, bounded_dynamism=bool(tpu.get("bounded_dynamism")))
    table = decompositions(keep=("matmul", "random") if options.get("fallback_random") else ("matmul",))
    return compile_fx(gm, example_inputs, inner_compile=report.timed_inner_compile(compile_fx_inner),
                      config_patches={**CPP_KERNEL_CONFIG, **options}, decompositions=table)


@functools.cache
def _overloads_of_kind(kind_wanted):
    """The ATen overloads the op table's kind column gives that kind."""
    found = []
    for name, kind in _C._op_kinds().items():
        if kind != kind_wanted or name.startswith("tpurt::"):
            continue
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if op is not None:
            found.append(op)
    return tuple(found)


def decompositions(keep=("matmul",)):
    """Inductor's decomposition table without the op table's ops of the kinds in `keep`, which
    stay calls into their tpu kernels. Matmul-like always: Inductor decomposes a K=1
    mm/addmm/bmm into multiplies on non-CPU devices, which would skip the MXU's bf16 operand
    rounding that eager tpu applies. Random ones with Inductor's fallback_random: Inductor
    rewrites native_dropout as rand + compare, a different draw from eager tpu's kernel, so
    only the kernel itself gives eager's random stream (on CPU the two coincide)."""
    from torch._inductor.decomposition import select_decomp_table

    table = dict(select_decomp_table())
    for kind in keep:
        for op in _overloads_of_kind(kind):
            table.pop(op, None)
    aten = torch.ops.aten
    table[aten.gelu.default] = functools.partial(_gelu, table[aten.gelu.default])
    table[aten.gelu_backward.default] = functools.partial(_gelu_backward, table[aten.gelu_backward.default])
    return table


# GELU's tanh approximation through exp: 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), with
# u = sqrt(2/pi) (x + 0.044715 x^3). Inductor's C++ writes tanh as Sleef's tanh, 4.7x the time
# of its exp on this host (the GPT step's GELU was 11.6% of its compiled forward); this form
# also keeps its relative error where 1 + tanh(u) cancels (x < -5), which the tanh form loses.
_GELU_BETA = 0.7978845608028654  # sqrt(2/pi)
_GELU_KAPPA = 0.044715


def _opmath(x):
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def _gelu(inductor_gelu, self, approximate="none"):
    if approximate != "tanh":
        return inductor_gelu(self, approximate)
    x = _opmath(self)
    u = _GELU_BETA * (x + _GELU_KAPPA * x * x * x)
    return (x / (1 + torch.exp(-2 * u))).to(self.dtype)


def _gelu_backward(inductor_gelu_backward, grad, self, approximate="none"):
    """d/dx x s(2u) = s + 2 x s (1 - s) u', s = sigmoid(2u): Inductor's tanh form rewritten
    (0.5 (1 + tanh u) = s, 1 - tanh(u)^2 = 4 s (1 - s))."""
    if approximate != "tanh":
        return inductor_gelu_backward(grad, self, approximate)
    x, g = _opmath(self), _opmath(grad)
    x_sq = x * x
    s = 1 / (1 + torch.exp(-2 * _GELU_BETA * (x + _GELU_KAPPA * x_sq * x)))
    du = _GELU_BETA * (1 + 3 * _GELU_KAPPA * x_sq)
    return (g * (s + 2 * x * s * (1 - s) * du)).to(grad.dtype)


def _codegen_version():
    """Hash of this package's code generation and of the vector ISA Inductor generates C++ for:
    part of Inductor's FX graph cache key, so a cached wrapper written by another torch_tpu
    version, or for another ISA, is never reused. torch 2.13's key lacks the ISA: a graph cached
    on an AVX-512 host and loaded on an AVX2 one (a shared or restored cache dir; or
    ATEN_CPU_CAPABILITY=avx2) runs kernels written for 16 lanes with 8-lane vectors, which gave
    wrong results and heap corruption (CPU graphs still do: that is PyTorch's to fix)."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    h = hashlib.sha256()
    for f in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        h.update(f.read_bytes())
    h.update(repr(_C._runtime_version()).encode())
    isa = pick_vec_isa()
    h.update(f"{type(isa).__name__} {isa}".encode())
    return h.hexdigest()


def _cache_key_pass():
    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    class CodegenVersion(CustomGraphModulePass):
        """The post-grad pass Inductor runs on graphs with tpu tensors, whatever the backend:
        flex attention's dense form (flex_attention.py); its uuid keys Inductor's caches by
        torch_tpu's code generation."""

        def __call__(self, gm):
            from .flex_attention import decompose

            decompose(gm)

        def uuid(self):
            return _codegen_version()

    return CodegenVersion()


def install(wrapper_module):
    """Registers device "tpu" with Inductor, once torch._inductor.codegen.wrapper is imported."""
    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.cpp import CppScheduling

    from .codegen import TpuWrapperCodegen

    register_backend_for_device("tpu", CppScheduling, TpuWrapperCodegen, device_custom_pass=_cache_key_pass())
    # The backend name Inductor's passes consult for the device (dtype propagation, vector
    # code): "tpu" means Pallas in torch 2.13; it only ever concerns tpu graphs.
    torch._inductor.config.tpu_backend = "cpp"
    # Plain torch.compile (backend "inductor") reads the global config: there the C++-kernel
    # settings are set only when no GPU-like device shares the process, where they change
    # nothing but tpu graphs (CPU graphs skip those passes already).
    if not any(_gpu_like()):
        for name, value in CPP_KERNEL_CONFIG.items():
            setattr(torch._inductor.config, name, value)
    if not torch.__version__.startswith(_TESTED_TORCH):
        import warnings

        warnings.warn(f"torch_tpu's compiler was built against torch {_TESTED_TORCH}x; torch {torch.__version__} may "
                      "generate code it does not expect", stacklevel=2)


def _gpu_like():
    for name in ("cuda", "xpu", "mps", "mtia"):
        mod = getattr(torch, name, None)
        yield mod is not None and hasattr(mod, "is_available") and mod.is_available()
