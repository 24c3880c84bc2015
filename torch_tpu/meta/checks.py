"""Argument checks that CPU's kernels make and PyTorch's meta functions skip (or make with
another exception type). The generic tpu path validates through Meta, so without these a bad
call would run on tpu (or fail as IndexError) where CPU raises RuntimeError. Each function
checks, then computes the shape as PyTorch's meta function does; they run for tpu tensors
only (torch_tpu.meta.register)."""
import torch
from torch._meta_registrations import meta_bucketize, meta_multinomial
from . import register, resize_output



def _check(cond, msg):
    if not cond:
        raise RuntimeError(msg)


def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    _check(from_ <= to, f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    return self


def _multinomial_checks(self, num_samples, replacement, out=None):
    _check(self.is_floating_point(), f"multinomial only supports floating-point dtypes for input, got: {self.dtype}")
    _check(out is None or out.dtype == torch.long, f"multinomial expects Long tensor out, got: {out.dtype if out is not None else ''}")
    _check(self.dim() in (1, 2), "prob_dist must be 1 or 2 dim")
    _check(num_samples > 0, "cannot sample n_sample <= 0 samples")
    _check(replacement or num_samples <= self.size(-1),
           "cannot sample n_sample > prob_dist.size(-1) samples without replacement")


def multinomial(self, num_samples, replacement=False, *, generator=None):
    _multinomial_checks(self, num_samples, replacement)
    return meta_multinomial(self, num_samples, replacement, generator=generator)


def multinomial_out(self, num_samples, replacement=False, *, generator=None, out):
    _multinomial_checks(self, num_samples, replacement, out)
    return meta_multinomial(self, num_samples, replacement, generator=generator, out=out)


def _bucketize_checks(boundaries):
    _check(boundaries.dim() == 1, f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")


def bucketize(self, boundaries, *, out_int32=False, right=False):
    _bucketize_checks(boundaries)
    return meta_bucketize(self, boundaries, out_int32=out_int32, right=right)


def bucketize_out(self, boundaries, *, out_int32=False, right=False, out):
    _bucketize_checks(boundaries)
    return meta_bucketize(self, boundaries, out_int32=out_int32, right=right, out=out)


def cat(tensors, dim=0):
    for i, t in enumerate(tensors):
        _check(t.dim() > 0, f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    return torch._refs.cat(tensors, dim)


def aminmax_out(self, *, dim=None, keepdim=False, min, max):
    for name, out in (("min", min), ("max", max)):
        _check(out.dtype == self.dtype, f"Expected out tensor to have dtype {self.dtype}, but got {out.dtype} instead")
    ref = torch.amin(self, dim, keepdim) if dim is not None else torch.amin(self)
    resize_output(min, ref.shape)
    resize_output(max, ref.shape)
    return min, max


def _narrow_copy_shape(self, dim, start, length):
    """CPU's narrow_copy checks (a positive dim out of range is a RuntimeError there, an
    IndexError in the composite meta function), then the output shape."""
    _check(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.")
    if dim < 0:
        dim = torch._prims_common.canonicalize_dim(self.dim(), dim)
    else:
        _check(dim < self.dim(), "Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, but got false.  "
               "(Could this error message be improved?  If so, please report an enhancement request to PyTorch.)")
    size = self.shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    start = start + size if start < 0 else start
    _check(length >= 0 and start <= size - length,
           f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return self.shape[:dim] + (length,) + self.shape[dim + 1:]


def narrow_copy(self, dim, start, length):
    return self.new_empty(_narrow_copy_shape(self, dim, start, length))


def narrow_copy_out(self, dim, start, length, *, out):
    shape = _narrow_copy_shape(self, dim, start, length)
    _check(self.dtype == out.dtype, "Expected self.dtype() == output.dtype() to be true, but got false.  "
           "(Could this error message be improved?  If so, please report an enhancement request to PyTorch.)")
    return out.resize_(shape)  # CPU's narrow_copy_out resizes without resize_output's warning


for _name, _fn in {"uniform_": uniform_, "multinomial": multinomial, "multinomial.out": multinomial_out,
                   "bucketize.Tensor": bucketize, "bucketize.Tensor_out": bucketize_out,
                   "cat": cat, "aminmax.out": aminmax_out,
                   "narrow_copy": narrow_copy, "narrow_copy.out": narrow_copy_out}.items():
    register(_name, _fn)
