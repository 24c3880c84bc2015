"""Meta functions for loss backward ops PyTorch ships without one: grad_input has self's
shape and dtype."""
import torch

_lib = torch.library.Library("aten", "IMPL")


def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    return self.new_empty(self.shape)


def multi_margin_loss_backward_out(grad_output, self, target, p, margin, weight=None, reduction=1, *, grad_input):
    return grad_input.resize_(self.shape)


_lib.impl("multi_margin_loss_backward", multi_margin_loss_backward, "Meta")
_lib.impl("multi_margin_loss_backward.grad_input", multi_margin_loss_backward_out, "Meta")
