"""Meta functions for indexing ops whose PyTorch meta function must say "needs the data" in
the way the generic path understands (NotImplementedError), so tpu's kernel sizes the output (tpu only)."""
import torch
from . import register



def repeat_interleave_tensor(repeats, output_size=None):
    # PyTorch's own raises RuntimeError here, which would read as an argument error.
    if output_size is None:
        raise NotImplementedError("cannot repeat_interleave a meta tensor without output_size")
    return repeats.new_empty(output_size)


register("repeat_interleave.Tensor", repeat_interleave_tensor)
