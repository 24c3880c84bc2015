"""Meta functions for pooling ops PyTorch ships without one: fractional_max_pool3d_backward
(grad_input is shaped like the input, after CPU's shape checks)."""
import torch
from . import register, resize_output



def fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices):
    nsp = 3
    torch._check(self.dim() in (4, 5), lambda: f"fractional_max_pool3d_backward(): Expected 4D or 5D tensor, "
                                               f"but got: {list(self.shape)}")
    want = list(self.shape[:-nsp]) + list(output_size)
    torch._check(list(grad_output.shape) == want,
                 lambda: f"fractional_max_pool3d_backward(): gradOutput sizes unexpected, expected {want} "
                         f"but got {list(grad_output.shape)}")
    torch._check(list(indices.shape) == want, lambda: "fractional_max_pool3d_backward(): indices sizes unexpected")
    return self.new_empty(self.shape)


register("fractional_max_pool3d_backward", fractional_max_pool3d_backward)


def fractional_max_pool3d_backward_grad_input(grad_output, self, kernel_size, output_size, indices, *, grad_input):
    fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices)
    return resize_output(grad_input, self.shape)


register("fractional_max_pool3d_backward.grad_input", fractional_max_pool3d_backward_grad_input)
