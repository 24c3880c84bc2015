"""Checks CPU's kernels make that PyTorch's meta functions skip, run on the tpu path only.

The generic tpu path validates a call through the op's Meta kernel; where that kernel is laxer
than CPU's (a Python reference that never checks a bool subtraction, an in-place cast or a
Boolean alpha), a bad call would compute on tpu where CPU raises. Each check here receives the
call's arguments in schema order (tensors as meta tensors) before the Meta kernel runs, and
raises what CPU raises. A check that warns returns True: the call's signature is then not
cached, so the check runs (and warns as CPU's kernel does: each time, or once per process)
on every such call. Nothing is registered with PyTorch's dispatcher: CPU, meta and FakeTensor
behaviour are unchanged.

A check may raise NotImplementedError when the tpu path cannot take the call as it stands:
the output shape depends on the data (the kernel sizes it, as for a bool mask), or PyTorch's
meta function refuses what CPU accepts (the call runs on the counted CPU fallback)."""
import functools
import warnings

import torch

from . import _C

# c10's names, as CPU's messages print dtypes
C10_NAMES = {
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


def _foreach_sub(self, other, *rest):
    # CPU's foreach_sub runs sub per tensor; PyTorch's meta checks only two bool lists
    for t, o in zip(self, other if isinstance(other, (list, tuple)) else [other] * len(self)):
        _sub_check(t, o)


def _alpha_check(dtype, alpha):
    _check(not isinstance(alpha, bool) or dtype == torch.bool, "Boolean alpha only supported for Boolean results.")
    _check(dtype.is_floating_point or dtype.is_complex or not isinstance(alpha, (float, complex)),
           "For integral input tensors, argument alpha must not be a floating point number.")
    _check(dtype.is_complex or not isinstance(alpha, complex),
           "For non-complex input tensors, argument alpha must not be a complex number.")


def out_cast_check(result, out):
    _check(torch.can_cast(result, out.dtype),
           f"result type {C10_NAMES.get(result, result)} can't be cast to the desired output type "
           f"{C10_NAMES.get(out.dtype, out.dtype)}")


def _cat_out(tensors, dim, out):
    # CPU's cat checks the cast with TORCH_CHECK_TYPE (TypeError), in its own words
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors], tensors[0].dtype) if tensors else out.dtype
    _check(torch.can_cast(dtype, out.dtype),
           f"torch.cat(): input types can't be cast to the desired output type {C10_NAMES.get(out.dtype, out.dtype)}",
           TypeError)


def _result(self, other, to_float=False):
    r = torch.result_type(self, other)
    return torch.get_default_dtype() if to_float and not (r.is_floating_point or r.is_complex) else r


def _add(self, other, alpha=1, out=None):
    _alpha_check(out.dtype if out is not None else _result(self, other), alpha)


def _add_(self, other, alpha=1):
    _alpha_check(self.dtype, alpha)
    out_cast_check(_result(self, other), self)


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
        out_cast_check(_result(self, other, to_float), self)
    return check


def _div_(self, other, rounding_mode=None):
    out_cast_check(_result(self, other, to_float=rounding_mode is None), self)


# ---------------------------------------------------------------- activation backwards
# An in-place activation with a negative slope cannot recover its input from its result.
_NEGATIVE_SLOPE_IN_PLACE = ("backward calculation is triggered with a negative slope which is not supported. This is "
                            "caused by calling in-place forward function with a negative slope, please call "
                            "out-of-place version instead.")


def _elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result, grad_input=None):
    _check(not is_result or alpha >= 0, "In-place elu " + _NEGATIVE_SLOPE_IN_PLACE)


def _leaky_relu_backward(grad_output, self, negative_slope, self_is_result, grad_input=None):
    _check(not self_is_result or negative_slope >= 0,
           "In-place leakyReLu " + _NEGATIVE_SLOPE_IN_PLACE + " File an issue at https://github.com/pytorch/pytorch "
           "if you do require supporting in-place leakRelu backward calculation with negative slope")


def _softshrink(self, lambd, out=None):
    # CPU's words; PyTorch's meta prints the bound and dtype its own way
    top = torch.finfo(self.dtype).max if self.dtype.is_floating_point else float("inf")
    _check(0 <= lambd <= top, f"lambda must be in range [0, {top:g}] for input dtype "
                              f"{C10_NAMES.get(self.dtype, self.dtype)}, but found {lambd:g}")


def _masked_scatter_(self, mask, source):
    # as CPU's in-place kernel: the mask broadcasts to self, never self to the mask
    try:
        mask.expand(self.shape)
    except RuntimeError as e:  # PyTorch's expand message, about the tpu tensor rather than its meta stand-in
        raise RuntimeError(str(e).replace("expand(Meta", "expand(tpu", 1)) from None


def _heaviside(self, values, out=None):
    _check(self.dtype == _dtype_of(values) and (out is None or out.dtype == self.dtype),
           "heaviside is not yet implemented for tensors with different dtypes.")


def _clamp(self, min=None, max=None, *rest):
    _check(min is not None or max is not None, "torch.clamp: At least one of 'min' or 'max' must not be None")


# ---------------------------------------------------------------- embedding_bag
def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False, per_sample_weights=None,
                   *rest):
    """CPU's argument checks, in its order (PyTorch's meta function checks only the dtypes)."""
    _check(indices.dim() in (1, 2), f"input has to be a 1D or 2D Tensor, but got Tensor of dimension {indices.dim()}")
    if indices.dim() == 1:
        _check(offsets.dim() == 1, f"offsets has to be a 1D Tensor, but got Tensor of dimension {offsets.dim()}")
    _check(weight.dim() == 2, f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    while_checking = "(while checking arguments for embedding_bag)"
    _check(indices.dtype in (torch.int64, torch.int32), "Expected tensor for argument #1 'indices' to have one of the "
           f"following scalar types: Long, Int; but got {_tensor_type(indices)} instead {while_checking}")
    _check(weight.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64),
           "Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, BFloat16, "
           f"Float, Double; but got {_tensor_type(weight)} instead {while_checking}")
    if per_sample_weights is not None:
        _check(per_sample_weights.dtype == weight.dtype, "Expected tensor for argument #1 'weight' to have the same "
               f"type as tensor for argument #1 'per_sample_weights'; but type {_tensor_type(weight)} does not equal "
               f"{_tensor_type(per_sample_weights)} {while_checking}")


# ---------------------------------------------------------------- pooling
def _fractional_samples(nsp):
    """CPU's checks of fractional max pooling's _random_samples: one row of nsp samples per plane
    (PyTorch's meta function for the 3-d op has none)."""
    ints = "Ints" if nsp == 2 else "three Ints"

    def check(self, kernel_size, output_size, random_samples, *rest):
        for name, value in (("kernel_size", kernel_size), ("output_size", output_size)):
            _check(len(value) == nsp, f"fractional_max_pool{nsp}d: {name} must either be a single Int or tuple of {ints}")
        if self.dim() not in (nsp + 1, nsp + 2):
            return  # the meta function's message
        _check(random_samples.dim() == 3, f"Expect _random_samples to have 3 dimensions, got {random_samples.dim()}")
        _check(random_samples.size(0) >= (self.size(0) if self.dim() == nsp + 2 else 1),
               "Expect _random_samples.size(0) no less then input batch size.")
        _check(random_samples.size(1) == self.size(-nsp - 1), "Expect _random_samples.size(1) equals to input channel size.")
        _check(random_samples.size(2) == nsp, f"Expect _random_samples.size(2) equals to {nsp}; got {random_samples.size(2)}.")
    return check


def _grad_output_non_empty(name):
    """CPU's check (and words) of the adaptive poolings' backward: only the batch may be empty."""
    def check(grad_output, *rest):
        for d in range(1, grad_output.dim()):
            _check(grad_output.size(d) != 0, f"{name}(): Expected grad_output to have non-zero size for non-batch "
                   f"dimensions, but grad_output has sizes {list(grad_output.shape)} with dimension "
                   f"{d} being empty")
    return check


# ---------------------------------------------------------------- reductions and scans
def _scalar_type_check(expected, found, words="scalar_type"):
    """CPU's dtype check of an out= (both wordings occur: "scalar_type" and "scalar type")."""
    _check(expected == found, f"expected {words} {C10_NAMES.get(expected, expected)} but found "
           f"{C10_NAMES.get(found, found)}")


def _not_implemented_for(kernel, dtype):
    raise NotImplementedError(f'"{kernel}" not implemented for \'{C10_NAMES.get(dtype, dtype)}\'')


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


def _tensor_type(t):
    """CPU's legacy type name of a tensor ("torch.FloatTensor"), which a meta tensor's .type() is not."""
    return f"torch.{C10_NAMES[t.dtype]}Tensor"


def _values_indices_out(kernel):
    """dtype checks of a (values, indices) out= pair, in the order and words of CPU's kernel."""
    def values_check(self, values):
        if kernel == "mode":
            _check(values.dtype == self.dtype, f"expected scalar type '{C10_NAMES[self.dtype]}' but got "
                   f"'{C10_NAMES[values.dtype]}' for values output")
        elif kernel == "kthvalue":
            _check(values.dtype == self.dtype, "output values must be of same type as input")
        elif kernel == "sort":
            _check(values.dtype == self.dtype, f"Expected out tensor to have dtype {_CPP_NAMES[self.dtype]}, but got "
                   f"{_CPP_NAMES[values.dtype]} instead")
        else:  # median, nanmedian: checkSameType
            _check(values.dtype == self.dtype, "Expected tensor for 'values' to have the same type as tensor for "
                   f"argument #2 'self'; but type {_tensor_type(values)} does not equal {_tensor_type(self)} (while checking "
                   "arguments for median)")

    def indices_check(indices):
        if indices.dtype == torch.int64:
            return
        if kernel == "mode":
            _check(False, f"expected scalar type 'Long' but got '{C10_NAMES[indices.dtype]}' for indices output")
        elif kernel == "kthvalue":
            _check(False, "output indices must be of scalar type Long")
        elif kernel == "sort":
            _check(False, f"Expected out tensor to have dtype long int, but got {_CPP_NAMES[indices.dtype]} instead")
        _check(False, "Expected tensor for argument #1 'indices' to have scalar type Long; but got "
               f"{_tensor_type(indices)} instead (while checking arguments for median)")

    def check(self, *rest):
        values, indices = rest[-2:]
        if kernel == "median":
            indices_check(indices)
            values_check(self, values)
        else:
            values_check(self, values)
            indices_check(indices)
    return check


def _aminmax_out(self, *rest):
    for out in rest[-2:]:
        _check(out.dtype == self.dtype, f"Expected out tensor to have dtype {_CPP_NAMES[self.dtype]}, but got "
               f"{_CPP_NAMES[out.dtype]} instead")


def _logsumexp_out(self, dim, keepdim, out):
    _check(out.dtype.is_floating_point, "logsumexp(): Expected floating point type for result tensor, but got: "
           f"{C10_NAMES[out.dtype]}")


_FLOAT_DIGITS = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}


def _random_precision(self, from_, to=None, generator=None):
    """CPU's warning when random_'s bounds pass the integers a float dtype holds exactly (the
    runtime's kernel makes the checks that raise)."""
    digits = _FLOAT_DIGITS.get(self.dtype)
    if digits is None:
        return False
    warned = False
    for value, name in ((from_, "from"), (None if to is None else to - 1, "to - 1")):
        if value is not None and not -(1 << digits) <= value <= 1 << digits:
            warned = True
            warnings.warn(f"{name} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations "
                          f"{_CPP_NAMES[self.dtype]} can support discrete uniform distribution only within this range. "
                          "This warning will become an error in version 1.7 release, please fix the code in advance")
    return warned


def _geometric(self, *rest):
    if self.dtype == torch.bool:
        _not_implemented_for("geometric_cpu", self.dtype)


def _continuous(name, names):
    def check(self, *rest):
        _check(self.is_floating_point(), f"{name} distribution is a continuous probability distribution. dtype must be "
               f"a floating point but you specified {names[self.dtype]}")
    return check


def _uniform(self, from_=0.0, to=1.0, generator=None):
    """CPU's uniform_impl_ checks, in its order (a complex tensor draws its float parts)."""
    dtype = self.real.dtype if self.is_complex() else self.dtype
    if not dtype.is_floating_point:
        _not_implemented_for("check_uniform_bounds", dtype)
    info = torch.finfo(dtype)
    for value, name in ((from_, "from"), (to, "to")):
        _check(info.min <= value <= info.max, f"{name} is out of bounds for {_CPP_NAMES[dtype]}")
    _check(from_ <= to, f"uniform_ expects to return a [from, to) range, but found from={from_:g} > to={to:g}")
    _check(to - from_ <= info.max, f"uniform_ expects to-from <= std::numeric_limits<{C10_NAMES[dtype]}>::max(), but "
           f"found to={to:g} and from={from_:g} which result in to-from to exceed the limit")


# c10's names in Scalar's checked conversions ("value cannot be converted to type int8_t ...")
_SCALAR_TO_NAMES = {torch.uint8: "uint8_t", torch.int8: "int8_t", torch.int16: "int16_t", torch.int32: "int",
                    torch.int64: "int64_t"}


def _randperm_out(n, generator=None, out=None):
    """CPU's check_supported_max_int_with_precision: every value below n must fit out's dtype."""
    _check(n >= 0, f"n must be non-negative, got{n}")
    if out.dtype in _SCALAR_TO_NAMES:
        _check(max(n - 1, 0) <= torch.iinfo(out.dtype).max,
               f"value cannot be converted to type {_SCALAR_TO_NAMES[out.dtype]} without overflow")
    limits = {torch.float16: (11, "2049"), torch.float32: (24, "2^24+1"), torch.float64: (53, "2^53+1")}
    if out.dtype in limits:
        bits, words = limits[out.dtype]
        _check(n <= (1 << bits) + 1, f"n cannot be greater than {words} for {C10_NAMES[out.dtype]} type.")


def _same_dtype_out(self, *rest):
    """TensorIterator's unary ops that keep the input dtype (neg, floor, clamp, the activations):
    CPU refuses an out= of another dtype instead of casting into it."""
    out = rest[-1]
    if self.is_complex() and not out.is_complex():
        return  # abs of complex: CPU casts |z| into the out= (out_cast_check's rule)
    _check(out.dtype == self.dtype, f"Found dtype {C10_NAMES[out.dtype]} but expected {C10_NAMES[self.dtype]}")


def _floats_only(kernel):
    """Ops CPU computes for floating types only (activations, adaptive pooling): NotImplementedError
    in its kernel's name (tpu's Python meta functions raised other types, or computed, on an
    integer input)."""
    def check(self, *rest):
        if not (self.is_floating_point() or self.is_complex()):
            _not_implemented_for(kernel, self.dtype)
    return check


def _log_sigmoid_out(self, output, buffer):
    _check(output.dtype == self.dtype, f"expected scalar type {C10_NAMES[self.dtype]} but found "
           f"{C10_NAMES[output.dtype]}")


def _nan_to_num_out(self, nan=None, posinf=None, neginf=None, out=None):
    _check(out.dtype == self.dtype, f"nan_to_num: dtype of out: {C10_NAMES[out.dtype]} should be same as input: "
           f"{C10_NAMES[self.dtype]}")


def _signbit_out(self, out):
    _check(out.dtype == torch.bool, "signbit does not support non-boolean outputs.")


def _cross_out(self, other, dim=-1, out=None):
    result = torch.promote_types(self.dtype, other.dtype)
    _check(out.dtype == result, f"Expected out tensor to have dtype {_CPP_NAMES[result]}, but got "
           f"{_CPP_NAMES[out.dtype]} instead")


def _softmax_of_integers(kernel):
    def check(self, dim, half_to_float, *rest):
        if not (self.is_floating_point() or self.is_complex()):
            last = self.dim() == 0 or dim in (-1, self.dim() - 1)
            _not_implemented_for(f"{kernel}_lastdim_kernel_impl" if last else f"{kernel}_kernel_impl", self.dtype)
    return check


def _addcdiv(self, tensor1, tensor2, *rest):
    # before PyTorch's meta function, whose message is a tuple's repr
    integral = [not (_dtype_of(t).is_floating_point or _dtype_of(t).is_complex) for t in (tensor1, tensor2)]
    _check(not all(integral),
           "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a "
           "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value "
           "* torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
           "tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value "
           "* tensor1 / tensor2), for all dtypes.")


_WARNED_ONCE = set()


def _warn_once(message):
    """TORCH_WARN_ONCE: once per process unless torch.set_warn_always(True). The caller returns
    True so that the call's signature stays uncached and the rule applies on every call."""
    if torch.is_warn_always_enabled() or message not in _WARNED_ONCE:
        _WARNED_ONCE.add(message)
        warnings.warn(message)
    return True


def _searchsorted_copies(values=None, boundaries=None, sorter=None):
    """CPU's searchsorted/bucketize copy non-contiguous operands and warn once about it."""
    uncached = False
    for t, what in ((values, "input value"), (boundaries, "boundary"), (sorter, "sorter")):
        if isinstance(t, torch.Tensor) and not t.is_contiguous():
            uncached = _warn_once(f"torch.searchsorted(): {what} tensor is non-contiguous, this will lower the "
                                  "performance due to extra data copy when converting non-contiguous tensor to "
                                  f"contiguous, please use contiguous {what} tensor if possible. This message will "
                                  "only appear once per program.")
    return uncached


def _searchsorted_out_dtype(out, out_int32):
    _check(out.dtype == (torch.int32 if out_int32 else torch.int64), "torch.searchsorted(): output tensor's dtype is "
           "wrong, it can only be Int(int32) or Long(int64) depending on whether out_int32 flag is True, but we got "
           f"output tensor's dtype {C10_NAMES[out.dtype]} and out_int32 flag is {out_int32}")


def _searchsorted(sorted_sequence, self, out_int32=False, right=False, side=None, sorter=None, out=None):
    """CPU's searchsorted_pre_check, in its order and words (the size message's missing space included)."""
    _check(side in (None, "left", "right"), f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
    if sorter is not None:
        _check(sorter.shape == sorted_sequence.shape, "torch.searchsorted(): boundary and sorter must have the same "
               f"size, but got boundary tensor {list(sorted_sequence.shape)}and got sorter tensor {list(sorter.shape)}")
        _check(sorter.dtype == torch.int64, "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype "
               f"{C10_NAMES[sorter.dtype]}")
    if not isinstance(self, torch.Tensor):  # PyTorch's meta function reads a Scalar's .shape
        _check(sorted_sequence.dim() == 1, "torch.searchsorted(): input value can be a scalar only when boundaries "
               f"tensor dimension is 1, but we got boundaries tensor dim({sorted_sequence.dim()}) and input value's "
               "dim(0) numel(1)")
    if out is not None:
        _searchsorted_out_dtype(out, out_int32)
    return _searchsorted_copies(self, sorted_sequence, sorter)


def _bucketize(self, boundaries, out_int32=False, right=False, out=None):
    if out is not None:
        _searchsorted_out_dtype(out, out_int32)
    return _searchsorted_copies(self, boundaries)


def _fill_tensor(self, value):
    # fill_ writes through an expanded view (TPURT_OPF_SELF_OVERLAP_OK); its Tensor overload
    # on CPU does not
    _check(torch._debug_has_internal_overlap(self) != 1, "unsupported operation: more than one element of the "
           "written-to tensor refers to a single memory location. Please clone() the tensor before performing the "
           "operation.")


def _roll(self, shifts, dims=()):
    # CPU's roll_common, before the dims are wrapped (PyTorch's reference wraps them first)
    _check(len(shifts) > 0, "`shifts` required")
    _check(len(dims) == len(shifts) or (not dims and len(shifts) == 1),
           f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")


def _bitwise_not(self, *rest):
    if self.is_floating_point() or self.is_complex():
        _not_implemented_for("bitwise_not_cpu", self.dtype)


def _hypot(self, other, *rest):
    result = _result(self, other)
    if not result.is_floating_point:
        _not_implemented_for("hypot_cpu", result)


def _unique_dims(overload):
    """CPU's reductions refuse a dim listed twice (dim_list_to_bitset), naming the wrapped dim."""
    name, _, variant = overload.partition(".")
    args = getattr(torch.ops.aten, name).__getattr__(variant or "default")._schema.arguments
    at = next(i for i, a in enumerate(args) if a.name == "dim")

    def check(self, *rest):
        dims = rest[at - 1] if at - 1 < len(rest) else None
        if dims is None or isinstance(dims, int):
            return
        seen = set()
        for d in dims:
            d = d + max(self.dim(), 1) if d < 0 else d
            _check(d not in seen, f"dim {d} appears multiple times in the list of dims")
            seen.add(d)
    return check


def _mean(self, *rest):
    dtype = next((a for a in rest if isinstance(a, torch.dtype)), None)
    computed = dtype or self.dtype
    _check(computed.is_floating_point or computed.is_complex, "mean(): could not infer output dtype. "
           f"{'Optional' if dtype else 'Input'} dtype must be either a floating point or complex dtype. "
           f"Got: {C10_NAMES.get(computed, computed)}")

# ---------------------------------------------------------------- shape checks CPU's kernels make
def _index_func(self, dim, index, source, *rest):
    """index_add / index_reduce: self and source agree except along dim (index_func_meta_impl)."""
    a, b = list(self.shape), list(source.shape)
    if self.dim() and source.dim():
        d = dim + self.dim() if dim < 0 else dim
        if d < len(a) and d < len(b):
            del a[d], b[d]
    _check(a == b, "source tensor shape must match self tensor shape, excluding the specified dimension. "
           f"Got self.shape = {list(self.shape)} source.shape = {list(source.shape)}")


# ---------------------------------------------------------------- matrix products
# CPU's messages, in CPU's order (PyTorch's meta functions word them differently: "a and b must
# have same reduction dim" for the best-known error of all, "mat1 and mat2 shapes cannot be
# multiplied"), and the checks the meta functions skip (addmv of a 2-D input; addr's scalars, which
# composite.py runs: addr reaches tpu as PyTorch's composite of outer, mul and add).
def _shapes_multiply(mat1, mat2):
    _check(mat1.shape[1] == mat2.shape[0], f"mat1 and mat2 shapes cannot be multiplied "
           f"({mat1.shape[0]}x{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")


def _mm(self, mat2, out=None):
    _check(self.dim() == 2, "self must be a matrix")
    _check(mat2.dim() == 2, "mat2 must be a matrix")
    _check(self.dtype == mat2.dtype, "expected m1 and m2 to have the same dtype, but got: "
           f"{_CPP_NAMES.get(self.dtype, self.dtype)} != {_CPP_NAMES.get(mat2.dtype, mat2.dtype)}")
    _shapes_multiply(self, mat2)


def _addmm_checks(self, mat1, mat2):
    _check(self.dtype == mat2.dtype,
           f"self and mat2 must have the same dtype, but got {C10_NAMES[self.dtype]} and {C10_NAMES[mat2.dtype]}")
    _check(mat1.dtype == mat2.dtype,
           f"mat1 and mat2 must have the same dtype, but got {C10_NAMES[mat1.dtype]} and {C10_NAMES[mat2.dtype]}")
    _check(mat1.dim() == 2, f"mat1 must be a matrix, got {mat1.dim()}-D tensor")
    _check(mat2.dim() == 2, f"mat2 must be a matrix, got {mat2.dim()}-D tensor")
    _shapes_multiply(mat1, mat2)


def _addmm(self, mat1, mat2, *rest):
    _addmm_checks(self, mat1, mat2)
    self.expand(mat1.shape[0], mat2.shape[1])  # CPU's expand_size message


def _addmm_(self, mat1, mat2, *rest):
    _addmm_checks(self, mat1, mat2)
    result = [mat1.shape[0], mat2.shape[1]]
    _check(list(self.shape) == result,
           f"Bad in-place call: input tensor size {list(self.shape)} and output tensor size {result} should match")


def _addmv_checks(self, mat, vec):
    _check(mat.dim() == 2 and vec.dim() == 1 and self.dim() <= 1,
           f"vector + matrix @ vector expected, got {self.dim()}, {mat.dim()}, {vec.dim()}")
    _check(mat.shape[1] == vec.shape[0] and (mat.shape[0] == self.numel() or self.numel() == 1),
           f"size mismatch, got input ({self.shape[0] if self.dim() else 1}), mat ({mat.shape[0]}x{mat.shape[1]}), "
           f"vec ({vec.shape[0]})")


def _addmv(self, mat, vec, *rest):
    _addmv_checks(self, mat, vec)


def _mv(self, vec, out=None):
    # CPU: addmv_ into empty({self.size(0)}) of vec's dtype
    _check(self.dim() > 0, "Dimension specified as 0 but tensor has no dimensions", IndexError)
    _addmv_checks(torch.empty(self.shape[0], device="meta"), self, vec)
    _check(self.dtype == vec.dtype, "addmv input tensors must have the same dtype, but got "
           f"{C10_NAMES[vec.dtype]}, {C10_NAMES[self.dtype]}, and {C10_NAMES[vec.dtype]}")


def _dot(self, tensor, *rest):
    _check(self.dim() == 1 and tensor.dim() == 1,
           f"1D tensors expected, but got {self.dim()}D and {tensor.dim()}D tensors")
    _check(self.dtype == tensor.dtype, "dot : expected both vectors to have same dtype, but found "
           f"{C10_NAMES[self.dtype]} and {C10_NAMES[tensor.dtype]}")
    _check(self.numel() == tensor.numel(),
           f"inconsistent tensor size, expected tensor [{self.numel()}] and src [{tensor.numel()}] to have the same "
           f"number of elements, but got {self.numel()} and {tensor.numel()} elements respectively")


def _bmm(self, mat2, out=None):
    if self.dim() == 3 and mat2.dim() == 3 and mat2.shape[:2] == (self.shape[0], self.shape[2]):
        _check(self.dtype == mat2.dtype,
               f"expected scalar type {C10_NAMES[self.dtype]} but found {C10_NAMES[mat2.dtype]}")


def _baddbmm(self, batch1, batch2, *rest):
    _check(self.dtype == batch1.dtype == batch2.dtype, "Input dtypes must be the same, got: input "
           f"{_CPP_NAMES.get(self.dtype)}, batch1: {_CPP_NAMES.get(batch1.dtype)}, batch2: {_CPP_NAMES.get(batch2.dtype)}")


def addr_checks(self, vec1, vec2, beta=1, alpha=1, out=None):
    _check(vec1.dim() == 1, f"addr: Expected 1-D argument vec1, but got {vec1.dim()}-D")
    _check(vec2.dim() == 1, f"addr: Expected 1-D argument vec2, but got {vec2.dim()}-D")
    dtype = torch.promote_types(torch.promote_types(self.dtype, vec1.dtype), vec2.dtype)
    for name, scalar in (("beta", beta), ("alpha", alpha)):
        _check(not isinstance(scalar, bool) or dtype == torch.bool, f"Boolean {name} only supported for Boolean results.")
        _check(dtype.is_floating_point or dtype.is_complex or isinstance(scalar, int),
               f"For integral input tensors, argument {name} must not be a floating point number.")


# ---------------------------------------------------------------- linalg out= dtypes
def _structured_out(name):
    """CPU's check of a structured kernel's out= (every output exactly the functional result's
    dtype), where PyTorch's meta function casts when it can (an int64 pivots or a float info
    out= was written)."""
    op, overload = name.split(".")
    packet = getattr(torch.ops.aten, op)
    n_out = sum(a.is_out for a in getattr(packet, overload)._schema.arguments)
    functional = packet.default
    params = functional._schema.arguments

    def check(*args):
        ins, outs = args[:len(args) - n_out], args[len(args) - n_out:]
        expected = functional(*[v for a, v in zip(params, ins) if not a.kwarg_only],
                              **{a.name: v for a, v in zip(params, ins) if a.kwarg_only})
        for e, o in zip(expected if isinstance(expected, tuple) else (expected,), outs):
            _check(o.dtype == e.dtype, f"Expected out tensor to have dtype {_CPP_NAMES.get(e.dtype, e.dtype)}, "
                   f"but got {_CPP_NAMES.get(o.dtype, o.dtype)} instead")
    return check


def _castable(api, dtype, out, name="result"):
    _check(torch.can_cast(dtype, out.dtype), f"{api}: Expected {name} to be safely castable from {C10_NAMES[dtype]} "
           f"dtype, but got {name} with dtype {C10_NAMES[out.dtype]}")


def _householder_product(input, tau, out=None):
    _check(tau.dtype == input.dtype, "torch.linalg.householder_product: tau dtype "
           f"{C10_NAMES[tau.dtype]} does not match input dtype {C10_NAMES[input.dtype]}")
    if out is not None:
        _castable("torch.linalg.householder_product", input.dtype, out)


def _lstsq_out(self, b, rcond=None, driver=None, solution=None, residuals=None, rank=None, singular_values=None):
    _castable("torch.linalg.lstsq", self.dtype, solution, "solution")
    _castable("torch.linalg.lstsq", self.dtype.to_real(), residuals, "solution")  # sic: CPU names residuals so
    _castable("torch.linalg.lstsq", self.dtype.to_real(), singular_values, "singular_values")


def _geqrf_out(self, a, tau):
    _castable("torch.geqrf", self.dtype, a, "a")
    _castable("torch.geqrf", self.dtype, tau, "tau")


def _ormqr_out(self, input2, input3, left=True, transpose=False, out=None):
    _check(out.dtype == self.dtype, "torch.ormqr: Expected input and result to have the same dtype, but input has "
           f"dtype{C10_NAMES[self.dtype]} and result has dtype {C10_NAMES[out.dtype]}")


_LINALG_OUTS = {
    **{n: _structured_out(n) for n in (
        "_linalg_det.result", "_linalg_slogdet.sign", "_linalg_solve_ex.result", "linalg_inv_ex.inverse",
        "linalg_cholesky_ex.L", "linalg_lu_factor_ex.out", "linalg_lu.out", "linalg_lu_solve.out", "linalg_qr.out",
        "_linalg_eigh.eigenvalues", "_linalg_svd.U", "linalg_ldl_factor_ex.out", "linalg_ldl_solve.out",
        "triangular_solve.X", "linalg_matrix_exp.out", "linalg_vector_norm.out")},
    "cholesky_inverse.out": lambda self, upper=False, out=None: _castable("cholesky_inverse", self.dtype, out),
    "linalg_householder_product": _householder_product, "linalg_householder_product.out": _householder_product,
    "linalg_lstsq.out": _lstsq_out, "geqrf.a": _geqrf_out, "ormqr.out": _ormqr_out,
}


_MATRIX_PRODUCTS = {
    "mm": _mm, "mm.out": _mm, "addmm": _addmm, "addmm.out": _addmm, "addmm_": _addmm_,
    "addmv": _addmv, "addmv.out": _addmv, "addmv_": _addmv, "mv": _mv, "mv.out": _mv,
    "dot": _dot, "dot.out": _dot, "vdot": _dot, "vdot.out": _dot, "bmm": _bmm, "bmm.out": _bmm,
    "baddbmm": _baddbmm, "baddbmm.out": _baddbmm, "baddbmm_": _baddbmm,
}


def _softmax_backward(name):
    def check(grad_output, output, dim, input_dtype, *rest):
        _check(grad_output.shape == output.shape,
               f"Expected tensor for argument #1 'grad' to have same size as tensor for argument #2 'output'; but "
               f"{list(grad_output.shape)} does not equal {list(output.shape)} (while checking arguments for {name})")
    return check


def _pool2d(self, *rest):
    _check(self.dim() in (3, 4), "non-empty 3D or 4D (batch mode) tensor expected for input")
    _check(0 not in self.shape[self.dim() - 3:], "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
           f"for input, but got:{list(self.shape)}")


def _pool2d_backward(grad_output, self, *rest):
    _pool2d(self)


def _batch_norm(input, *rest):
    # CPU fails deep inside its kernel here (a ValueError about a SmallVector, for most shapes)
    _check(input.dim() >= 1, f"batch_norm: expected an input with at least 1 dimension (N, C, ...), got "
           f"{input.dim()}", ValueError)


def _grid_sampler_2d(input, grid, *rest):
    # CPU's check_grid_sampler_common and check_grid_sampler_2d, in order (PyTorch's
    # decomposition unpacks a 5-D input's shape into four names: ValueError)
    _check(input.dim() > 0 and grid.dim() > 0, "Dimension specified as 0 but tensor has no dimensions", IndexError)
    sizes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    _check(input.shape[0] == grid.shape[0], f"grid_sampler(): expected grid and input to have same batch size, but got {sizes}")
    _check(grid.shape[-1] == input.dim() - 2, f"grid_sampler(): expected grid to have size {input.dim() - 2} in last "
           f"dimension, but got grid with sizes {list(grid.shape)}")
    for i in range(2, input.dim()):
        _check(input.shape[i] > 0, "grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
               f"sizes {list(input.shape)} with dimension {i} being empty")
    _check(input.dim() == 4 and grid.dim() == 4,
           f"grid_sampler(): expected 4D input and grid with same number of dimensions, but got {sizes}")
    _check(input.dtype == grid.dtype, f"expected scalar type {C10_NAMES[input.dtype]} but found {C10_NAMES[grid.dtype]}")


def _segment_reduce(data, reduce, lengths=None, indices=None, offsets=None, *rest):
    for name, t in (("lengths", lengths), ("offsets", offsets)):
        if t is not None:
            _check(data.dim() >= t.dim(), f"Expected data.dim() >= {name}_value.dim() to be true, but got false.")


# ---------------------------------------------------------------- out= dtypes CPU's kernels check
def _bool_out(name):
    def check(self, out):
        _check(out.dtype == torch.bool, f"{name} does not support non-boolean outputs.")
    return check


def _abs_(self):
    _check(not self.is_complex(), "In-place abs is not supported for complex tensors.")


def _abs_out(self, out):
    if self.is_complex() and out.is_complex():  # CPU stores |z| as complex; the meta refuses it
        raise NotImplementedError("abs of a complex tensor into a complex out=")
    if self.is_complex() and out.dtype != self.dtype.to_real():
        out_cast_check(self.dtype.to_real(), out)  # CPU casts |z| into a wider out=; the meta refuses it
        raise NotImplementedError("abs of a complex tensor into a wider out=")


def _angle_out(self, out):
    result = self.dtype.to_real() if self.is_complex() else \
        self.dtype if self.is_floating_point() else torch.get_default_dtype()
    out_cast_check(result, out)


def _histogram_out(self, bins, *rest):
    hist, bin_edges = rest[-2], rest[-1]
    for what, t in (("hist", hist), ("bin_edges", bin_edges)):
        _check(t.dtype == self.dtype, f"torch.histogram: input tensor and {what} tensor should have the same dtype, "
               f"but got input {_CPP_NAMES.get(self.dtype, self.dtype)} and {what} {_CPP_NAMES.get(t.dtype, t.dtype)}"
               + (" for dimension 0" if what == "bin_edges" else ""))


def _solve_triangular_out(self, B, *rest):
    _scalar_type_check(self.dtype, rest[-1].dtype, "scalar type")


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
    _check(values.dtype == self.dtype, "Index put requires the source and destination dtypes match, got "
           f"{C10_NAMES[self.dtype]} for the destination and {C10_NAMES[values.dtype]} for the source.")


def _no_bool(kernel):
    """CPU has no Bool kernel for these (remainder, fmod, the rounding divisions, pow of tensors)."""
    def check(self, other, *rest):
        if _result(self, other) == torch.bool:
            _not_implemented_for(kernel, torch.bool)
    return check


def _div_mode_no_bool(self, other, *rest):
    mode = next((r for r in rest if isinstance(r, str)), None)
    if mode is not None:
        _no_bool("div_floor_cpu" if mode == "floor" else "div_trunc_cpu")(self, other)


def _nonempty_dim(name, at=1):
    """CPU's zero_numel_check_dims: a reduction without identity over a dim of size 0 has no
    answer (the dim argument is at schema position `at`; None reduces everything)."""
    def check(self, *args):
        dim = args[at - 1] if len(args) >= at else None
        if dim is None:
            if name.startswith("arg"):
                _check(self.numel() != 0, f"{name} Expected reduction dim to be specified for input.numel() == 0.",
                       IndexError)
            return
        if self.dim() == 0:
            return
        d = dim + self.dim() if dim < 0 else dim
        if 0 <= d < self.dim():
            _check(self.shape[d] != 0, f"{name} Expected reduction dim {d} to have non-zero size.", IndexError)
    return check


def _arg_reduction(name):
    """argmax/argmin: CPU has no bool kernel (checked before the empty dim)."""
    nonempty = _nonempty_dim(f"{name}():")

    def check(self, *args):
        _check(self.dtype != torch.bool, f"{name}(): does not support bool input")
        nonempty(self, *args)
    return check


def _needs_dim(name):
    def check(self, *rest):
        _check(self.numel() != 0, f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                                  "Specify the reduction dim with the 'dim' argument.")
    return check


_EMPTY_REDUCTIONS = {
    **{n: _nonempty_dim("max():") for n in ("max.dim", "max.dim_max")},
    **{n: _nonempty_dim("min():") for n in ("min.dim", "min.dim_min")},
    **{n: _nonempty_dim("mode():") for n in ("mode", "mode.values")},
    **{n: _nonempty_dim("kthvalue():", at=2) for n in ("kthvalue", "kthvalue.values")},
    **{n: _nonempty_dim("aminmax:") for n in ("aminmax", "aminmax.out")},
    **{n: _arg_reduction("argmax") for n in ("argmax", "argmax.out")},
    **{n: _arg_reduction("argmin") for n in ("argmin", "argmin.out")},
    "max": _needs_dim("max"), "min": _needs_dim("min"),
}

_NO_BOOL = {
    **{n: _no_bool("remainder_cpu") for n in ("remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out",
                                              "remainder.Scalar", "remainder_.Scalar", "remainder.Scalar_out")},
    **{n: _no_bool("fmod_cpu") for n in ("fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out", "fmod.Scalar",
                                         "fmod_.Scalar", "fmod.Scalar_out")},
    **{n: _no_bool("div_floor_cpu") for n in ("floor_divide", "floor_divide_.Tensor", "floor_divide.out",
                                              "floor_divide.Scalar", "floor_divide_.Scalar", "floor_divide.Scalar_out")},
    **{n: _div_mode_no_bool for n in ("div.Tensor_mode", "div_.Tensor_mode", "div.out_mode", "div.Scalar_mode",
                                      "div_.Scalar_mode", "div.Scalar_mode_out")},
    **{n: _no_bool("pow") for n in ("pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out")},
}

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
    "softshrink": _softshrink, "softshrink.out": _softshrink,
    "masked_scatter_": _masked_scatter_,
    **{f"_foreach_sub{inplace}.{ov}": _foreach_sub for inplace in ("", "_") for ov in ("List", "Scalar", "ScalarList")},
    "_embedding_bag": _embedding_bag, "_embedding_bag_forward_only": _embedding_bag,
    **{n: _fractional_samples(2) for n in ("fractional_max_pool2d", "fractional_max_pool2d.output")},
    **{n: _fractional_samples(3) for n in ("fractional_max_pool3d", "fractional_max_pool3d.output")},
    **{n: _grad_output_non_empty(k) for names, k in [
        (("_adaptive_avg_pool2d_backward",), "adaptive_avg_pool2d_backward"),
        (("_adaptive_avg_pool3d_backward",), "adaptive_avg_pool3d_backward"),
        (("adaptive_max_pool2d_backward", "adaptive_max_pool2d_backward.grad_input"), "adaptive_max_pool2d_backward"),
        (("adaptive_max_pool3d_backward", "adaptive_max_pool3d_backward.grad_input"), "adaptive_max_pool3d_backward")]
       for n in names},
    "elu_backward": _elu_backward, "elu_backward.grad_input": _elu_backward,
    "leaky_relu_backward": _leaky_relu_backward, "leaky_relu_backward.grad_input": _leaky_relu_backward,
    **{name: _clamp for name in ("clamp", "clamp_", "clamp.out", "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out")},
    "nansum": _nansum, "nansum.out": _nansum,
    **{n: _values_indices_out("mode") for n in ("mode.values",)},
    **{n: _values_indices_out("median") for n in ("median.dim_values", "nanmedian.dim_values")},
    **{n: _values_indices_out("kthvalue") for n in ("kthvalue.values",)},
    **{n: _values_indices_out("sort") for n in ("sort.values", "sort.values_stable")},
    **{n: _mean for n in ("mean", "mean.dim", "mean.out")},
    "aminmax.out": _aminmax_out,
    "random_.from": _random_precision,
    "uniform_": _uniform,
    # in-place draws: the NotImplementedError skips the meta function and the kernel raises it
    "normal_": _floats_only("normal_kernel_cpu"), "log_normal_": _floats_only("log_normal_cpu"),
    "geometric_": _geometric,
    "exponential_": _continuous("Exponential", C10_NAMES), "cauchy_": _continuous("Cauchy", _CPP_NAMES),
    "log_sigmoid_forward.output": _log_sigmoid_out,
    "nan_to_num.out": _nan_to_num_out,
    "signbit.out": _signbit_out,
    "linalg_cross.out": _cross_out,
    **{n: _softmax_of_integers("softmax") for n in ("_softmax", "_softmax.out")},
    **{n: _softmax_of_integers("log_softmax") for n in ("_log_softmax", "_log_softmax.out")},
    **{n: _hypot for n in ("hypot", "hypot.out", "hypot_")},
    **{n: _bitwise_not for n in ("bitwise_not", "bitwise_not.out", "bitwise_not_")},
    **{n: _addcdiv for n in ("addcdiv", "addcdiv.out", "addcdiv_")},
    "roll": _roll,
    "fill_.Tensor": _fill_tensor,
    **{n: _searchsorted for n in ("searchsorted.Tensor", "searchsorted.Tensor_out", "searchsorted.Scalar",
                                  "searchsorted.Scalar_out")},
    **{n: _bucketize for n in ("bucketize.Tensor", "bucketize.Tensor_out")},
    "randperm.generator_out": _randperm_out,
    "random_.to": lambda self, to, generator=None: _random_precision(self, 0, to),
    "logsumexp.out": _logsumexp_out,
    "logcumsumexp": _logcumsumexp, "logcumsumexp.out": _logcumsumexp,
    "cummax.out": _cumext_out, "cummin.out": _cumext_out,
    "frexp.Tensor_out": _frexp_out,
    "cat.out": _cat_out,
    **{name: _index_func for name in ("index_add", "index_add_", "index_add.out", "index_reduce", "index_reduce_",
                                      "index_reduce.out")},
    **_MATRIX_PRODUCTS,
    **_LINALG_OUTS,
    "_softmax_backward_data": _softmax_backward("softmax_backward"),
    "_softmax_backward_data.out": _softmax_backward("softmax_backward"),
    "max_pool2d_with_indices": _pool2d, "max_pool2d_with_indices.out": _pool2d,
    "max_pool2d_with_indices_backward": _pool2d_backward, "max_pool2d_with_indices_backward.grad_input": _pool2d_backward,
    "native_batch_norm": _batch_norm, "_native_batch_norm_legit": _batch_norm,
    "_native_batch_norm_legit.no_stats": _batch_norm, "_batch_norm_with_update": _batch_norm,
    "grid_sampler_2d": _grid_sampler_2d,
    "segment_reduce": _segment_reduce,
    "angle.out": _angle_out, "abs.out": _abs_out, "abs_": _abs_,
    "isposinf.out": _bool_out("isposinf"), "isneginf.out": _bool_out("isneginf"),
    "histogram.bins_tensor_out": _histogram_out, "histogram.bin_ct_out": _histogram_out,
    "linalg_solve_triangular.out": _solve_triangular_out,
    "index.Tensor": _index, "index.Tensor_out": _index,
    "index_put": _index_put, "index_put_": _index_put, "index_put.out": _index_put, "_index_put_impl_": _index_put,
}


def _both(first, second):
    def check(*args):
        uncached = first(*args) is True
        return second(*args) is True or uncached  # either check's request to stay uncached
    return check


_SAME_DTYPE_OUT = {n: _same_dtype_out for n in (
    "abs.out", "neg.out", "floor.out", "ceil.out", "trunc.out", "frac.out", "round.out", "round.decimals_out",
    "sign.out", "sgn.out", "bitwise_not.out", "conj_physical.out", "clamp.out", "clamp_min.out", "clamp_max.out",
    "hardtanh.out", "elu.out", "leaky_relu.out", "softplus.out", "hardswish.out", "hardsigmoid.out", "mish.out",
    "softshrink.out", "gelu.out")}

# (overloads, CPU's kernel name); a check of the out= dtype runs first except where CPU
# dispatches on the input dtype before it (log_sigmoid, softshrink)
_FLOATS_ONLY = {n: _floats_only(kernel) for names, kernel in [
    (("elu", "elu.out"), "elu_cpu"), (("leaky_relu", "leaky_relu.out"), "leaky_relu_cpu"),
    (("softplus", "softplus.out"), "softplus_cpu"), (("hardswish", "hardswish.out"), "hardswish_cpu"),
    (("hardsigmoid", "hardsigmoid.out"), "hardsigmoid_cpu"), (("mish", "mish.out"), "mish_cpu"),
    (("gelu", "gelu.out"), "GeluKernelImpl"), (("round.decimals", "round.decimals_out"), "round_cpu"),
    (("log_sigmoid_forward", "log_sigmoid_forward.output"), "log_sigmoid_cpu"),
    (("softshrink", "softshrink.out"), "softshrink_check"),
    (("_adaptive_avg_pool2d", "_adaptive_avg_pool2d.out"), "adaptive_avg_pool2d"),
    (("_adaptive_avg_pool3d",), "adaptive_avg_pool3d_cpu"),
    (("adaptive_max_pool2d", "adaptive_max_pool2d.out"), "adaptive_max_pool2d"),
    (("adaptive_max_pool3d", "adaptive_max_pool3d.out"), "adaptive_max_pool3d_cpu")] for n in names}

_UNIQUE_DIMS = {n: _unique_dims(n) for n in (
    "sum.dim_IntList", "sum.IntList_out", "mean.dim", "mean.out", "nansum", "nansum.out", "std.correction",
    "std.correction_out", "var.correction", "var.correction_out", "std_mean.correction", "var_mean.correction",
    "logsumexp", "logsumexp.out", "norm.ScalarOpt_dim", "norm.ScalarOpt_dim_dtype", "norm.out", "norm.dtype_out",
    "amax", "amax.out", "amin", "amin.out", "count_nonzero.dim_IntList", "linalg_vector_norm",
    "linalg_vector_norm.out")}

for _name, _fn in [*_NO_BOOL.items(), *_EMPTY_REDUCTIONS.items(), *_UNIQUE_DIMS.items(), *_SAME_DTYPE_OUT.items()]:
    CHECKS[_name] = _both(_fn, CHECKS[_name]) if _name in CHECKS else _fn  # overloads with a check get both
for _name, _fn in _FLOATS_ONLY.items():
    _first = _name.startswith(("log_sigmoid", "softshrink"))
    CHECKS[_name] = _fn if _name not in CHECKS else _both(_fn, CHECKS[_name]) if _first else _both(CHECKS[_name], _fn)

# Every name is an overload of the runtime's op table (tests/test_upstream_regressions.py checks).
for _name, _fn in CHECKS.items():
    _C._set_op_check(_name, _fn)
