"""Meta functions for the convolution entry points PyTorch leaves to out-of-tree backends
(convolution_overrideable and its backward, whose composite kernel raises): shapes and checks as
CPU's convolution, for tpu tensors only."""
import torch
from torch._meta_registrations import calc_conv_nd_return_shape
from torch._prims_common import suggest_memory_format
from . import register


def _check_dtypes(input, weight, bias):
    torch._check(input.dtype == weight.dtype,
                 lambda: f"Input type ({input.dtype}) and weight type ({weight.dtype}) should be the same")
    torch._check(bias is None or bias.dtype == input.dtype,
                 lambda: f"Input type ({input.dtype}) and bias type ({bias.dtype}) should be the same")


def _transposed_shape(input, weight, stride, padding, dilation, output_padding, groups):
    """As CPU: without groups its kernel refuses an output with an empty spatial dim; its grouped
    path returns the empty tensor."""
    n = input.dim() - 2
    at = lambda v, i: v[i] if len(v) > 1 else v[0]  # noqa: E731
    out = [(input.shape[2 + i] - 1) * at(stride, i) - 2 * at(padding, i) + at(dilation, i) * (weight.shape[2 + i] - 1)
           + at(output_padding, i) + 1 for i in range(n)]
    if any(d < 0 for d in out) or (groups == 1 and any(d == 0 for d in out)):
        lead = [1] if n == 1 else []  # CPU runs 1-d as 2-d with a leading 1
        size = lambda dims: " x ".join(map(str, lead + list(dims)))  # noqa: E731
        raise RuntimeError(f"Given input size per channel: ({size(input.shape[2:])}). Calculated output size per "
                           f"channel: ({size(out)}). Output size is too small")
    return [input.shape[0], weight.shape[1] * groups] + out


def _memory_format(input, weight):
    """As CPU's and CUDA's convolutions: channels-last results when the input or the weight is
    channels-last (PyTorch's own meta, which cannot see the device, leaves them contiguous)."""
    formats = (suggest_memory_format(input), suggest_memory_format(weight))
    for f in (torch.channels_last, torch.channels_last_3d):
        if f in formats:
            return f
    return torch.contiguous_format


def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _check_dtypes(input, weight, bias)
    if transposed:
        shape = _transposed_shape(input, weight, stride, padding, dilation, output_padding, groups)
    else:
        shape = calc_conv_nd_return_shape(input, weight, stride, padding, dilation, transposed, groups, None)
    if input.size(1) == 0:
        shape[1] = 0
    return input.new_empty(shape).contiguous(memory_format=_memory_format(input, weight))


def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed,
                                      output_padding, groups, output_mask):
    _check_dtypes(input, weight, None)
    channels = weight.size(1) * groups if transposed else weight.size(0)
    fmt = _memory_format(input, weight)
    return (input.new_empty(input.shape).contiguous(memory_format=fmt) if output_mask[0] else None,
            weight.new_empty(weight.shape).contiguous(memory_format=fmt) if output_mask[1] else None,
            grad_output.new_empty((channels,)) if output_mask[2] else None)


register("convolution_overrideable", convolution_overrideable)
register("convolution_backward_overrideable", convolution_backward_overrideable)
