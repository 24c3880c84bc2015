"""Meta function for _fused_sgd_ (torch.optim.SGD(fused=True)), which PyTorch ships without
one: it updates its arguments in place and returns nothing, so the meta function only checks
the list lengths as CPU's kernel does."""
import torch
from . import register



def _fused_sgd_(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov, maximize,
                is_first_step, grad_scale=None, found_inf=None):
    torch._check(len(grads) == len(self), lambda: "Tensor lists must have the same number of tensors")
    torch._check(momentum == 0 or len(momentum_buffer_list) == len(self),
                 lambda: "Tensor lists must have the same number of tensors")


register("_fused_sgd_", _fused_sgd_)
register("_fused_sgd_.tensor_lr", _fused_sgd_)
