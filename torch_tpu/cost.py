"""What the ATen calls of a region would take on a real TPU generation: a dispatch mode that
prices every call on a tpu tensor with the runtime's cost model (runtime/src/cost.c, where the
formulas and their sources are), from the tensors' metadata only, so it works as well on fake
tensors (the dry run) as on real ones (the porting report).

    with torch_tpu.cost.CostRecorder("v6e") as rec:
        loss = model(x).sum(); loss.backward()
    rec.totals()["seconds"]     # the sum of the ops' rooflines: eager, op by op, no fusion

Calls outside the op table (ops PyTorch decomposes, CPU fallbacks, _grouped_mm) are priced by
the bytes they move, or by their GEMM, and listed in `unmodelled` so nothing is silently free;
views cost nothing."""
import collections
import contextlib
import dataclasses

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import torch_tpu

FIELDS = ("seconds", "mxu_seconds", "vpu_seconds", "hbm_seconds", "flops", "mxu_flops", "hbm_bytes")


@dataclasses.dataclass
class OpCost:
    name: str
    phase: str
    seconds: float = 0.0
    mxu_seconds: float = 0.0
    vpu_seconds: float = 0.0
    hbm_seconds: float = 0.0
    flops: float = 0.0      # the op's operations at their true sizes
    mxu_flops: float = 0.0  # matrix-unit work after padding to the MXU tile (0: not a GEMM)
    hbm_bytes: float = 0.0
    bound: str = "none"
    modelled: bool = True   # False: priced by the bytes it moves only (not in the op table)
    shapes: tuple = ()


def _tensor_bytes(t):
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


# Calls that only move or fill bytes: priced by those bytes, which is all they do.
DATA_MOVEMENT = frozenset({"_to_copy", "clone", "copy_", "copy", "slice_backward", "select_backward", "zeros", "ones",
                           "zeros_like", "ones_like", "empty_like", "new_zeros", "new_ones", "fill_", "zero_",
                           "constant_pad_nd", "arange", "full", "scalar_tensor", "_to_dense",
                           "_local_scalar_dense"})
# Views whose schemas do not say so.
FREE = frozenset({"_unsafe_view", "lift_fresh", "detach"})


def _is_free(func):
    if func.namespace != "aten" or func._schema.name[6:] in FREE:
        return True
    rets = func._schema.returns
    if rets and all(str(r.type) in ("bool", "int") for r in rets):
        return True  # a question about metadata (_has_compatible_shallow_copy_type, is_same_size)
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write for r in rets)


class CostRecorder(TorchDispatchMode):
    """Records the cost of every ATen call on tpu tensors made while active. `phase(name)`
    labels the calls of a region (forward, backward, optimizer)."""

    def __init__(self, generation="v6e"):
        super().__init__()
        self.generation = generation
        self.info = torch_tpu._C._generation_info(generation)  # raises ValueError for an unknown name
        self.ops = []
        self.unmodelled = collections.Counter()
        self._phase = "step"

    @contextlib.contextmanager
    def phase(self, name):
        before, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = before

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        flat, _ = tree_flatten((args, kwargs, out))
        if any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in flat) and not _is_free(func):
            self.ops.append(self._price(func, args, kwargs, out))
        return out

    def _price(self, func, args, kwargs, out):
        name = func.__name__  # "mm.default"
        shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
        schema = func._schema
        cost = None
        try:
            cost = torch_tpu._C._op_cost(schema.name[6:], schema.overload_name or "default", tuple(args), kwargs,
                                         out, self.generation)
        except (RuntimeError, TypeError):
            cost = None  # arguments the marshalling does not take: priced by bytes below
        if cost is None and func is torch.ops.aten._grouped_mm.default:
            cost = self._grouped_mm(args, out)
        if cost is not None:
            return OpCost(name, self._phase, **{k: cost[k] for k in FIELDS}, bound=cost["bound"], shapes=shapes)
        bytes_only = schema.name[6:] in DATA_MOVEMENT
        if not bytes_only:
            self.unmodelled[name] += 1
        flat, _ = tree_flatten((args, kwargs, out))
        moved = float(sum(_tensor_bytes(t) for t in flat))
        seconds = moved / (self.info["hbm_GBps"] * 1e9)
        return OpCost(name, self._phase, seconds=seconds, hbm_seconds=seconds, hbm_bytes=moved, bound="hbm",
                      modelled=bytes_only, shapes=shapes)

    def _grouped_mm(self, args, out):
        """Experts' grouped GEMM: rows spread evenly over the groups (balanced routing), every
        group's weights read once. Forward and input gradient: x [S, K] by w [E, K, N]; weight
        gradient: a [K, S] by b [S, N] into [E, K, N]."""
        a, b = args[0], args[1]
        if a.dim() == 2 and b.dim() == 3:
            m, k, n = a.shape[0], a.shape[1], b.shape[-1]
        elif a.dim() == 2 and b.dim() == 2 and out.dim() == 3:
            m, k, n = a.shape[0], a.shape[1], b.shape[1]
        else:
            return None
        moved = _tensor_bytes(a) + _tensor_bytes(b) + _tensor_bytes(out)
        return torch_tpu._C._gemm_cost(self.generation, [(1, m, n, k, False)], b.dtype, moved)

    def totals(self, phase=None):
        """Sums over the recorded calls (of one phase), with gemm_flops: the flops of calls that
        ran on the MXU (what MFU counts)."""
        t = dict.fromkeys(FIELDS, 0.0)
        t["gemm_flops"] = 0.0
        t["calls"] = 0
        for op in self.ops:
            if phase is not None and op.phase != phase:
                continue
            for k in FIELDS:
                t[k] += getattr(op, k)
            if op.mxu_flops:
                t["gemm_flops"] += op.flops
            t["calls"] += 1
        return t
