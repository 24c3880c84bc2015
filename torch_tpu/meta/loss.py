"""Meta functions for loss ops: the backwards PyTorch ships without one (grad_input is shaped
like the input), and multilabel_margin_loss's forward and multi_margin_loss, whose own give an
unreduced loss of shape [1] where CPU gives a 0-dim tensor (on tpu only): a 1-d input's for the
first (whose own also wants the target shaped as a 0-dim or 1-d input, where CPU counts its
elements), a 0-dim target's for the second. nll_loss's take CPU's target dtypes (int64 and uint8;
PyTorch's, a decomposition through gather, refuse uint8 and take int32)."""
import torch
from torch._C import DispatchKey
from ..tpu_checks import C10_NAMES
from . import register, resize_output



def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    return self.new_empty(self.shape)


def multi_margin_loss_backward_out(grad_output, self, target, p, margin, weight=None, reduction=1, *, grad_input):
    return resize_output(grad_input, self.shape)


def _multilabel_shape_check(self, target):
    # CPU's multilabel_margin_loss_shape_check: a 0-dim or 1-d input takes any target of at most
    # one dim with as many elements (PyTorch's meta function wants the same shape)
    nd = self.dim()
    torch._check((nd == 2 and self.size(0) > 0 and self.size(1) > 0) or (nd == 1 and self.size(0) > 0) or nd == 0,
                 lambda: f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(self.shape)}")
    fits = target.dim() <= 1 and target.numel() == (self.numel() if nd <= 1 else -1) or \
        (nd == 2 and target.shape == self.shape)
    torch._check(fits, lambda: f"inconsistent target size: {list(target.shape)} for input of size: {list(self.shape)}")


def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    _multilabel_shape_check(self, target)
    torch._check(is_target.shape == target.shape, lambda: (
        f"inconsistent is_target size: {list(is_target.shape)} for target of size: {list(target.shape)}"))
    return self.new_empty(self.shape)


def multilabel_margin_loss_backward_grad_input(grad_output, self, target, reduction, is_target, *, grad_input):
    multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
    return resize_output(grad_input, self.shape)


_forward_ref = torch.ops.aten.multilabel_margin_loss_forward.default.py_kernels[DispatchKey.Meta]


def multilabel_margin_loss_forward(self, target, reduction):
    _multilabel_shape_check(self, target)
    if self.dim() <= 1:
        return self.new_empty(()), self.new_empty(target.shape)
    return _forward_ref(self, target, reduction)


_multi_margin_ref = torch.ops.aten.multi_margin_loss.default.py_kernels[DispatchKey.Meta]


def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    out = _multi_margin_ref(self, target, p, margin, weight, reduction)
    return out if target.dim() > 0 or reduction != 0 else out.reshape(())


def multi_margin_loss_out(self, target, p=1, margin=1, weight=None, reduction=1, *, out):
    return resize_output(out, multi_margin_loss(self, target, p, margin, weight, reduction).shape)


register("multi_margin_loss", multi_margin_loss)
register("multi_margin_loss.out", multi_margin_loss_out)
register("multi_margin_loss_backward", multi_margin_loss_backward)
register("multi_margin_loss_backward.grad_input", multi_margin_loss_backward_out)
register("multilabel_margin_loss_forward", multilabel_margin_loss_forward)
register("multilabel_margin_loss_backward", multilabel_margin_loss_backward)
register("multilabel_margin_loss_backward.grad_input", multilabel_margin_loss_backward_grad_input)


def _nll_target(op, target_at, message, byte_ok):
    def shape(*args, **kwargs):
        target = args[target_at]
        name = C10_NAMES.get(target.dtype, target.dtype)
        torch._check(target.dtype in (torch.int64, torch.uint8), lambda: message.format(name))
        torch._check(byte_ok or target.dtype == torch.int64, lambda: f"expected scalar type Long but found {name}")
        return op(*args[:target_at], target.long(), *args[target_at + 1:], **kwargs)
    return shape


# overloads -> where the target is, CPU's message, whether CPU's kernel takes uint8 targets (its
# 2-d ones check for either and then dispatch on int64 alone)
_LONG_OR_BYTE = "expected target dtype to be Long or Byte, but got {}"
for _names, _at, _message, _byte_ok in [
    (("nll_loss_forward", "nll_loss_forward.output"), 1, _LONG_OR_BYTE, True),
    (("nll_loss_backward", "nll_loss_backward.grad_input"), 2, "expected scalar type Long but found {}", True),
    (("nll_loss2d_forward", "nll_loss2d_forward.output"), 1, _LONG_OR_BYTE, False),
    (("nll_loss2d_backward", "nll_loss2d_backward.grad_input"), 2, _LONG_OR_BYTE, False),
]:
    for _name in _names:
        _op, _, _overload = _name.partition(".")
        register(_name, _nll_target(getattr(getattr(torch.ops.aten, _op), _overload or "default"), _at, _message,
                                    _byte_ok))
