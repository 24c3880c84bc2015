"""Checks CPU's kernels make that PyTorch's meta functions skip, run on the tpu path only.

The generic tpu path validates a call through the op's Meta kernel; where that kernel is laxer
than CPU's (a Python reference that never checks a bool subtraction, an in-place cast or a
Boolean alpha), a bad call would compute on tpu where CPU raises. Each check here receives the
call's arguments in schema order (tensors as meta tensors) before the Meta kernel runs, and
raises what CPU raises. Nothing is registered with PyTorch's dispatcher: CPU, meta and
FakeTensor behaviour are unchanged.

A check may raise NotImplementedError to say the output shape depends on the data (the
kernel then sizes it, as for a bool mask)."""
import warnings

import torch

from . import _C

# c10's names, as CPU's messages print dtypes
_C10_NAMES = {
    torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
    torch.float64: "Double", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
}
# caffe2's TypeMeta names, as frexp's message prints them
_CPP_NAMES = {
    torch.bool: "bool", torch.uint8: "unsigned char", torch.int8: "signed char", torch.int16: "short int",
    torch.int32: "int", torch.int64: "long int", torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16",
    torch.float32: "float", torch.float64: "double",
}


def _check(cond, msg, exc=RuntimeError):
    if not cond:
        raise exc(msg)


def _dtype_of(x):
    """dtype of an operand as type promotion sees it (Python numbers as their kind)."""
    if isinstance(x, torch.Tensor):
        return x.dtype
    return {bool: torch.bool, int: torch.int64, float: torch.get_default_dtype(), complex: torch.complex64}[type(x)]


# ---------------------------------------------------------------- arithmetic
def _sub_check(self, other):
    a, b = _dtype_of(self), _dtype_of(other)
    _check(not (a == torch.bool and b == torch.bool),
           "Subtraction, the `-` operator, with two bool tensors is not supported. "
           "Use the `^` or `logical_xor()` operator instead.")
    _check(a != torch.bool and b != torch.bool,
           "Subtraction, the `-` operator, with a bool tensor is not supported. "
           "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _alpha_check(dtype, alpha):
    _check(not isinstance(alpha, bool) or dtype == torch.bool, "Boolean alpha only supported for Boolean results.")
    _check(dtype.is_floating_point or dtype.is_complex or not isinstance(alpha, (float, complex)),
           "For integral input tensors, argument alpha must not be a floating point number.")


def _cast_check(result, out):
    _check(torch.can_cast(result, out.dtype),
           f"result type {_C10_NAMES.get(result, result)} can't be cast to the desired output type "
           f"{_C10_NAMES.get(out.dtype, out.dtype)}")


def _result(self, other, to_float=False):
    r = torch.result_type(self, other)
    return torch.get_default_dtype() if to_float and not (r.is_floating_point or r.is_complex) else r


def _add(self, other, alpha=1, out=None):
    _alpha_check(out.dtype if out is not None else _result(self, other), alpha)


def _add_(self, other, alpha=1):
    _alpha_check(self.dtype, alpha)
    _cast_check(_result(self, other), self)


def _sub(self, other, alpha=1, out=None):
    _sub_check(self, other)
    _add(self, other, alpha, out)


def _sub_(self, other, alpha=1):
    _sub_check(self, other)
    _add_(self, other, alpha)


def _rsub(self, other, alpha=1):
    _sub_check(self, other)
    _add(self, other, alpha)


def _in_place(to_float=False):
    """In place, self is the output: CPU refuses a result dtype that cannot be cast to it."""
    def check(self, other, *rest):
        _cast_check(_result(self, other, to_float), self)
    return check


def _div_(self, other, rounding_mode=None):
    _cast_check(_result(self, other, to_float=rounding_mode is None), self)


def _heaviside(self, values, out=None):
    _check(self.dtype == _dtype_of(values), "heaviside is not yet implemented for tensors with different dtypes.")


def _clamp(self, min=None, max=None, *rest):
    _check(min is not None or max is not None, "torch.clamp: At least one of 'min' or 'max' must not be None")


# ---------------------------------------------------------------- reductions and scans
def _scalar_type_check(expected, found):
    _check(expected == found, f"expected scalar_type {_C10_NAMES.get(expected, expected)} but found "
           f"{_C10_NAMES.get(found, found)}")


def _not_implemented_for(kernel, dtype):
    raise NotImplementedError(f'"{kernel}" not implemented for \'{_C10_NAMES.get(dtype, dtype)}\'')


def _nansum(self, dim=None, keepdim=False, dtype=None, out=None):
    computed = dtype or (out.dtype if out is not None else self.dtype)
    if self.is_floating_point() and not (computed.is_floating_point or computed.is_complex):
        _not_implemented_for("nansum_cpu", computed)


def _logcumsumexp(self, dim, out=None):
    if not (self.is_floating_point() or self.is_complex()):
        _not_implemented_for("logcumsumexp_out_cpu", self.dtype)
    if out is not None:
        _scalar_type_check(self.dtype, out.dtype)


def _cumext_out(self, dim, values, indices):
    _scalar_type_check(self.dtype, values.dtype)
    _scalar_type_check(torch.int64, indices.dtype)


# ---------------------------------------------------------------- frexp
def _frexp_out(self, mantissa, exponent):
    _check(self.is_floating_point(), f"torch.frexp() only supports floating-point dtypes, but got {self.dtype}")
    _check(mantissa.dtype == self.dtype, f"torch.frexp() expects mantissa to have dtype {self.dtype} "
           f"but got {mantissa.dtype}")
    _check(exponent.dtype == torch.int32, "torch.frexp() expects exponent to have int dtype but got "
           f"{_CPP_NAMES.get(exponent.dtype, exponent.dtype)}")


# ---------------------------------------------------------------- advanced indexing
def _indices_check(self, indices):
    """CPU accepts uint8 masks (deprecated, as bool masks) and raises IndexError when index
    tensors do not broadcast together."""
    defined = [i for i in indices if i is not None]
    for i in defined:
        _check(i.dtype in (torch.int64, torch.int32, torch.uint8, torch.bool),
               "tensors used as indices must be long, int, byte or bool tensors", IndexError)
    masks = sum(i.dtype == torch.uint8 for i in defined)
    for _ in range(masks):  # CPU warns once per uint8 mask, naming the user's line (stacklevel)
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
                      stacklevel=3)
    if masks:
        raise NotImplementedError("a uint8 mask: the output shape depends on the data")
    if any(i.dtype == torch.bool for i in defined):
        return
    try:
        torch.broadcast_shapes(*[i.shape for i in defined])
    except RuntimeError:
        shapes = ", ".join("[" + ", ".join(str(n) for n in i.shape) + "]" for i in defined)
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}") \
            from None


def _index(self, indices, out=None):
    _indices_check(self, indices)


def _index_put(self, indices, values, accumulate=False, *rest):
    _indices_check(self, indices)


_ALPHA_OPS = {"add.Tensor": _add, "add.out": _add, "add.Scalar": _add, "add_.Tensor": _add_, "add_.Scalar": _add_,
              "sub.Tensor": _sub, "sub.out": _sub, "sub.Scalar": _sub, "sub_.Tensor": _sub_, "sub_.Scalar": _sub_,
              "rsub.Tensor": _rsub, "rsub.Scalar": _rsub}
_IN_PLACE_OPS = {name: _in_place() for name in (
    "mul_.Tensor", "mul_.Scalar", "pow_.Tensor", "pow_.Scalar", "remainder_.Tensor", "remainder_.Scalar",
    "fmod_.Tensor", "fmod_.Scalar", "floor_divide_.Tensor", "floor_divide_.Scalar", "lerp_.Scalar", "lerp_.Tensor", "clamp_min_.Tensor", "clamp_max_.Tensor")}
_IN_PLACE_OPS.update({name: _in_place(to_float=True) for name in (
    "atan2_", "hypot_", "copysign_.Tensor", "copysign_.Scalar", "xlogy_.Tensor", "xlogy_.Scalar_Other")})
_IN_PLACE_OPS.update({"div_.Tensor": _div_, "div_.Scalar": _div_, "div_.Tensor_mode": _div_, "div_.Scalar_mode": _div_})

CHECKS = {
    **_ALPHA_OPS,
    **_IN_PLACE_OPS,
    "heaviside": _heaviside, "heaviside.out": _heaviside, "heaviside_": _heaviside,
    **{name: _clamp for name in ("clamp", "clamp_", "clamp.out", "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out")},
    "nansum": _nansum, "nansum.out": _nansum,
    "logcumsumexp": _logcumsumexp, "logcumsumexp.out": _logcumsumexp,
    "cummax.out": _cumext_out, "cummin.out": _cumext_out,
    "frexp.Tensor_out": _frexp_out,
    "index.Tensor": _index, "index.Tensor_out": _index,
    "index_put": _index_put, "index_put_": _index_put, "index_put.out": _index_put, "_index_put_impl_": _index_put,
}

for _name, _fn in CHECKS.items():
    _C._set_op_check(_name, _fn)
