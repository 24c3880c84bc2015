"""Meta functions for activation backwards PyTorch ships without one for other devices
(mish_backward has CPU and CUDA kernels and a composite that rounds at every step in float16)."""
import torch

from . import register


def mish_backward(grad_output, self):
    shape = torch.broadcast_shapes(grad_output.shape, self.shape)
    dtype = torch.result_type(grad_output, self)
    if tuple(shape) == tuple(self.shape):
        return torch.empty_like(self, dtype=dtype)  # keeps self's layout, as TensorIterator does
    return self.new_empty(shape, dtype=dtype)


register("mish_backward", mish_backward)
