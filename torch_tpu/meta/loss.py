"""Meta functions for loss ops: the backwards PyTorch ships without one (grad_input is shaped
like the input), and multilabel_margin_loss's forward, whose own gives a 1-d input's
unreduced loss shape [1] where CPU gives a 0-dim tensor (on tpu only)."""
import torch
from torch._C import DispatchKey
from . import register, resize_output



def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    return self.new_empty(self.shape)


def multi_margin_loss_backward_out(grad_output, self, target, p, margin, weight=None, reduction=1, *, grad_input):
    return resize_output(grad_input, self.shape)


def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    torch._check(target.shape == self.shape and is_target.shape == self.shape,
                 lambda: f"multilabel_margin_loss_backward: inconsistent target size {list(target.shape)} "
                         f"for input of size {list(self.shape)}")
    return self.new_empty(self.shape)


def multilabel_margin_loss_backward_grad_input(grad_output, self, target, reduction, is_target, *, grad_input):
    multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
    return resize_output(grad_input, self.shape)


_forward_ref = torch.ops.aten.multilabel_margin_loss_forward.default.py_kernels[DispatchKey.Meta]


def multilabel_margin_loss_forward(self, target, reduction):
    out, is_target = _forward_ref(self, target, reduction)
    return (out if self.dim() == 2 else out.reshape(())), is_target


register("multi_margin_loss_backward", multi_margin_loss_backward)
register("multi_margin_loss_backward.grad_input", multi_margin_loss_backward_out)
register("multilabel_margin_loss_forward", multilabel_margin_loss_forward)
register("multilabel_margin_loss_backward", multilabel_margin_loss_backward)
register("multilabel_margin_loss_backward.grad_input", multilabel_margin_loss_backward_grad_input)
